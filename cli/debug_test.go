package cli

import (
	"bytes"
	"errors"
	"testing"

	stdjson "github.com/go-json-experiment/json/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
)

// TestSchedulerTable: printScheduler's columns are as wide as their widest
// cell plus two spaces (text/tabwriter), the last one as it is.
func TestSchedulerTable(t *testing.T) {
	t.Parallel()
	v := api.SchedulerView{Rows: []api.SchedRow{
		{ID: "01JD3K9Q5ZB7X0000000000000", Type: "ralph", Priority: 120, AgeSeconds: 3720, Depth: 3, Iteration: 1, Runnable: true},
		{ID: "phase9", Type: "review-long", Priority: -5, AgeSeconds: 59, Depth: 12, Iteration: 117,
			ReasonText: []string{"global cap 50/50", "artifact missing (/a/é/日本.md)"}},
		{ID: "ééé", Type: "plan", Priority: 7, AgeSeconds: 200000, Depth: 0, Iteration: 2},
	}}
	want := "" +
		"ID                          TYPE         PRIORITY  AGE   DEPTH  ITER  RUNNABLE\n" +
		"01JD3K9Q5ZB7X0000000000000  ralph        120       1h2m  3      1     yes\n" +
		"phase9                      review-long  -5        59s   12     117   no (global cap 50/50, artifact missing (/a/é/日本.md))\n" +
		"ééé                         plan         7         2d7h  0      2     no\n"
	var got bytes.Buffer
	if err := printScheduler(&env{stdout: &got}, rowsOf(v)); err != nil {
		t.Fatal(err)
	}
	if got.String() != want {
		t.Errorf("table mismatch\ngot:\n%s\nwant:\n%s", got.String(), want)
	}
	got.Reset()
	if err := printScheduler(&env{stdout: &got}, rowsOf(api.SchedulerView{})); err != nil || got.String() != "no pending loops\n" {
		t.Errorf("empty plan = %q, %v; want %q", got.String(), err, "no pending loops\n")
	}
	got.Reset()
	cut := errors.New("plan cut off")
	err := printScheduler(&env{stdout: &got}, func(row func(*api.SchedRow) error) error {
		if err := rowsOf(v)(row); err != nil {
			return err
		}
		return cut
	})
	if !errors.Is(err, cut) || got.Len() != 0 {
		t.Errorf("a plan that fails after its rows = %q, %v; want nothing printed and %v", got.String(), err, cut)
	}
}

// TestRunnableTextSaysEachOnce: a loop held for its spent budget carries
// the budget text in its needs_human reason and again as the budget gate;
// the RUNNABLE cell says it once. Texts that only look alike stay.
func TestRunnableTextSaysEachOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		reasons []string
		want    string
	}{
		{"runnable", nil, "yes"},
		{"no reason", []string{}, "no"},
		{"own budget", []string{"needs you (budget): budget spent: $0.30 of $0.25", "backoff until 11:48:59 (1s)", "budget spent: $0.30 of $0.25"},
			"no (needs you (budget): budget spent: $0.30 of $0.25, backoff until 11:48:59 (1s))"},
		{"tree budget", []string{"needs you (budget): tree budget spent: $2.10 of $2.00 (root 01JR)", "tree budget spent: $2.10 of $2.00 (root 01JR)"},
			"no (needs you (budget): tree budget spent: $2.10 of $2.00 (root 01JR))"},
		{"the same text twice", []string{"global cap 50/50", "global cap 50/50"}, "no (global cap 50/50)"},
		{"a suffix that is not a clause", []string{"needs you (question): raise the budget spent: $1", "budget spent: $1 more"}, "no (needs you (question): raise the budget spent: $1, budget spent: $1 more)"},
		{"a suffix without its colon", []string{"tree budget spent: $1 of $1", "budget spent: $1 of $1"}, "no (tree budget spent: $1 of $1, budget spent: $1 of $1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := runnableText(tc.reasons == nil, tc.reasons); got != tc.want {
				t.Errorf("runnableText(%q)\n got %q\nwant %q", tc.reasons, got, tc.want)
			}
		})
	}
}

// TestRowsJSONStreamed: writeRowsJSON writes, a row at a time, the very
// bytes writeJSON writes for the whole slice (encoding/json, indented):
// HTML-escaped characters, nil and empty slices, omitted zero fields,
// floats, no rows at all. Invalid UTF-8 is the one difference (U+FFFD
// itself where encoding/json writes \ufffd, as store.WriteJSON): the same
// value once decoded.
func TestRowsJSONStreamed(t *testing.T) {
	t.Parallel()
	rows := []api.SchedRow{
		{ID: "01JD3K9Q5ZB7X0000000000000", Type: "ralph", Status: "pending", Title: "<b>a & b</b> \u2028 \"q\"",
			Priority: -120, AgeSeconds: 1 << 40, Runnable: true, Reasons: []string{}, ReasonText: nil},
		{ID: "x", Type: "plan", Title: "\ufffd utf-8 日本", Reasons: []string{"global_cap"},
			ReasonText: []string{"global cap 50/50"}, Tier: 2, FairnessKey: "k", KeyUsed: 1e21, Cost: 0.000001, Agent: "codex"},
		{},
	}
	for _, n := range []int{0, 1, len(rows)} {
		var want, got bytes.Buffer
		if err := writeJSON(&want, rows[:n]); err != nil {
			t.Fatal(err)
		}
		err := writeRowsJSON(&got, func(row func(*api.SchedRow) error) error {
			for i := range rows[:n] {
				if err := row(&rows[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 { // writeJSON of an empty (non-nil) slice
			want.Reset()
			want.WriteString("[]\n")
		}
		if got.String() != want.String() {
			t.Errorf("%d rows: writeRowsJSON() mismatch\nwant:\n%s\ngot:\n%s", n, want.String(), got.String())
		}
	}
	var got, want []api.SchedRow
	bad := api.SchedRow{Title: "bad \xff utf-8"}
	for _, w := range []struct {
		out  *[]api.SchedRow
		emit func(*bytes.Buffer) error
	}{
		{&want, func(b *bytes.Buffer) error { return writeJSON(b, []api.SchedRow{bad}) }},
		{&got, func(b *bytes.Buffer) error {
			return writeRowsJSON(b, func(row func(*api.SchedRow) error) error { return row(&bad) })
		}},
	} {
		var b bytes.Buffer
		if err := w.emit(&b); err != nil {
			t.Fatal(err)
		}
		if err := stdjson.Unmarshal(b.Bytes(), w.out); err != nil {
			t.Fatalf("invalid UTF-8: %v in %q", err, b.String())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("invalid UTF-8: writeRowsJSON() mismatch once decoded (-want +got):\n%s", diff)
	}

	// An error from the rows is returned, and no closing bracket is written.
	var out bytes.Buffer
	boom := errors.New("boom")
	if err := writeRowsJSON(&out, func(row func(*api.SchedRow) error) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("writeRowsJSON() error = %v, want %v", err, boom)
	}
	if bytes.Contains(out.Bytes(), []byte("]")) {
		t.Errorf("a failed listing printed a complete array: %q", out.String())
	}
}
