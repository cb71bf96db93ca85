package fanout_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/fanout"
)

func TestPick(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := func(id string, i int, s fanout.State, at, diff int) fanout.Candidate {
		var p time.Time
		if s == fanout.Passed {
			p = t0.Add(time.Duration(at) * time.Minute)
		}
		return fanout.Candidate{ID: id, Index: i, State: s, PassedAt: p, Diff: diff}
	}
	tests := []struct {
		name    string
		policy  string
		cands   []fanout.Candidate
		decided bool
		winner  string
		judge   bool
	}{
		{"first: nothing passed yet", "first", []fanout.Candidate{c("a", 1, fanout.Running, 0, 0), c("b", 2, fanout.Ended, 0, 0)}, false, "", false},
		{"first: the earliest pass wins while others run", "", []fanout.Candidate{c("a", 1, fanout.Running, 0, 0), c("b", 2, fanout.Passed, 5, 9), c("c", 3, fanout.Passed, 3, 90)}, true, "c", false},
		{"first: a tie goes to the lower index", "first", []fanout.Candidate{c("b", 2, fanout.Passed, 3, 0), c("a", 1, fanout.Passed, 3, 0)}, true, "a", false},
		{"first: all ended without a pass", "first", []fanout.Candidate{c("a", 1, fanout.Ended, 0, 0), c("b", 2, fanout.Ended, 0, 0)}, true, "", false},
		{"smallest_diff waits for every candidate", "smallest_diff", []fanout.Candidate{c("a", 1, fanout.Passed, 1, 3), c("b", 2, fanout.Running, 0, 0)}, false, "", false},
		{"smallest_diff: the smallest passing diff", "smallest_diff", []fanout.Candidate{c("a", 1, fanout.Passed, 1, 30), c("b", 2, fanout.Passed, 2, 4), c("c", 3, fanout.Ended, 0, 1)}, true, "b", false},
		{"smallest_diff: a tie goes to the earlier pass", "smallest_diff", []fanout.Candidate{c("a", 1, fanout.Passed, 9, 4), c("b", 2, fanout.Passed, 2, 4)}, true, "b", false},
		{"smallest_diff: an unknown diff counts as largest", "smallest_diff", []fanout.Candidate{c("a", 1, fanout.Passed, 1, -1), c("b", 2, fanout.Passed, 2, 400)}, true, "b", false},
		{"judge: one passing needs no judge", "judge", []fanout.Candidate{c("a", 1, fanout.Ended, 0, 0), c("b", 2, fanout.Passed, 2, 4)}, true, "b", false},
		{"judge: two passing ask the judge", "judge", []fanout.Candidate{c("a", 1, fanout.Passed, 1, 0), c("b", 2, fanout.Passed, 2, 4)}, false, "", true},
		{"judge: none passed", "judge", []fanout.Candidate{c("a", 1, fanout.Ended, 0, 0)}, true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := fanout.Pick(tt.policy, tt.cands)
			got := []any{d.Decided, d.Winner, d.Judge}
			if diff := cmp.Diff([]any{tt.decided, tt.winner, tt.judge}, got); diff != "" {
				t.Errorf("Pick() mismatch (-want +got)\n%s", diff)
			}
			if d.Decided && d.Winner != "" && d.Why == "" {
				t.Error("Pick() decided a winner without saying why")
			}
		})
	}
}

func TestLaunches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		n                int
		root, per, spent fanout.Budget
		want             int
	}{
		{"no budget: all", 3, fanout.Budget{}, fanout.Budget{}, fanout.Budget{}, 3},
		{"tree budget without a candidate budget: all", 3, fanout.Budget{USD: 1}, fanout.Budget{}, fanout.Budget{}, 3},
		{"room for two", 3, fanout.Budget{USD: 2.5}, fanout.Budget{USD: 1}, fanout.Budget{}, 2},
		{"exactly two", 3, fanout.Budget{USD: 2}, fanout.Budget{USD: 1}, fanout.Budget{}, 2},
		{"spent counts", 3, fanout.Budget{USD: 5}, fanout.Budget{USD: 1}, fanout.Budget{USD: 3.5}, 1},
		{"tokens are the tighter", 4, fanout.Budget{USD: 100, Tokens: 3000}, fanout.Budget{USD: 1, Tokens: 1000}, fanout.Budget{}, 3},
		{"never below one", 3, fanout.Budget{USD: 1}, fanout.Budget{USD: 1}, fanout.Budget{USD: 2}, 1},
		{"never above n", 2, fanout.Budget{USD: 100}, fanout.Budget{USD: 1}, fanout.Budget{}, 2},
		{"a huge ratio of dollars: all, not one", 3, fanout.Budget{USD: 1e300}, fanout.Budget{USD: 1e-300}, fanout.Budget{}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := fanout.Launches(tt.n, tt.root, tt.per, tt.spent); got != tt.want {
				t.Errorf("Launches() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseJudge(t *testing.T) {
	t.Parallel()
	passing := []fanout.Candidate{{ID: "01JAAAAAAAAAAAAAAAAAAAAAAX", Index: 1}, {ID: "01JBBBBBBBBBBBBBBBBBBBBBBY", Index: 3}}
	tests := []struct {
		name, out, want, reason string
		err                     bool
	}{
		{"an index", "\n3 cleaner\n", passing[1].ID, "cleaner", false},
		{"#index:", "#1: fewer files\nmore", passing[0].ID, "fewer files", false},
		{"a short id", "bbbbbbby\n", passing[1].ID, "", false},
		{"a candidate that did not pass", "2\n", "", "", true},
		{"nothing", "  \n", "", "", true},
		{"an unknown word", "the second one", "", "", true},
		{"a tab after the index", "3\tsmaller\n", passing[1].ID, "smaller", false},
		{"a flood of reason", "1 " + strings.Repeat("é", 10000) + "\n", passing[0].ID, strings.Repeat("é", fanout.MaxReason/2) + "…", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, reason, err := fanout.ParseJudge(tt.out, passing)
			if (err != nil) != tt.err {
				t.Fatalf("ParseJudge() error = %v, want error %v", err, tt.err)
			}
			if c.ID != tt.want || reason != tt.reason {
				t.Errorf("ParseJudge() = %q %q, want %q %q", c.ID, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestAgents(t *testing.T) {
	t.Parallel()
	got := []string{fanout.Agents(nil, 1), fanout.Agents([]string{"claude", "codex"}, 1), fanout.Agents([]string{"claude", "codex"}, 2), fanout.Agents([]string{"claude", "codex"}, 3)}
	if diff := cmp.Diff([]string{"", "claude", "codex", "claude"}, got); diff != "" {
		t.Errorf("Agents() mismatch (-want +got)\n%s", diff)
	}
}
