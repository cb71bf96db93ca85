package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// policyWorkspace is a workspace whose loopr.yml is testConfigYAML plus extra.
func policyWorkspace(t *testing.T, extra string) []string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "loopr.yml")
	if err := os.WriteFile(cfg, []byte(testConfigYAML+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--home", filepath.Join(dir, ".loopr"), "--config", cfg}
}

func addJSON(t *testing.T, ws []string, args ...string) loop.Loop {
	t.Helper()
	code, out, errs := run(append(append(slices.Clone(ws), "add", "--json"), args...)...)
	if code != 0 {
		t.Fatalf("loopr add %v = exit %d: %s", args, code, errs)
	}
	var l loop.Loop
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("add --json: %v\n%s", err, out)
	}
	return l
}

func schedAt(t *testing.T, ws []string, at string) map[string]api.SchedRow {
	t.Helper()
	code, out, errs := run(append(slices.Clone(ws), "debug", "scheduler", "--json", "--now", at)...)
	if code != 0 {
		t.Fatalf("debug scheduler = exit %d: %s", code, errs)
	}
	var v []api.SchedRow
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("debug scheduler --json: %v\n%s", err, out)
	}
	rows := map[string]api.SchedRow{}
	for _, r := range v {
		rows[r.ID] = r
	}
	return rows
}

// TestAddDelayedRunsAndDeadlines: --at and --in set runnable_at (reason
// backoff until then), --deadline sets the deadline (reason
// deadline_passed once it is past); the policy flags reach the record.
func TestAddDelayedRunsAndDeadlines(t *testing.T) {
	t.Parallel()
	ws := policyWorkspace(t, "")
	at := addJSON(t, ws, "--type", "ralph", "--task", "later", "--at", "2030-01-01T09:00:00+01:00")
	if want := time.Date(2030, 1, 1, 8, 0, 0, 0, time.UTC); !at.RunnableAt.Equal(want) {
		t.Errorf("--at: runnable_at = %v, want %v", at.RunnableAt, want)
	}
	before := time.Now()
	in := addJSON(t, ws, "--type", "ralph", "--task", "soon", "--in", "10m")
	after := time.Now()
	if ra := in.RunnableAt; ra.Before(before.Add(10*time.Minute).Truncate(time.Second)) || ra.After(after.Add(10*time.Minute)) {
		t.Errorf("--in 10m: runnable_at = %v, want 10m after %v", ra, before)
	}
	dl := addJSON(t, ws, "--type", "ralph", "--task", "urgent", "--deadline", "2030-01-01T00:00:00Z",
		"--owner", "alice", "--key", "team-a", "--conflict-key", "db")
	if want := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC); !dl.Deadline.Equal(want) || dl.Owner != "alice" ||
		dl.FairnessKey != "team-a" || dl.ConflictKey != "db" {
		t.Errorf("--deadline and policy flags: %+v", dl)
	}

	rows := schedAt(t, ws, "2029-12-31T23:00:00Z")
	if r := rows[at.ID]; r.Runnable || !slices.Equal(r.Reasons, []string{"backoff"}) {
		t.Errorf("before --at: %s %v %v; want backoff", at.ID, r.Runnable, r.ReasonText)
	}
	// git.worktrees is false: the ralph loops share the workspace, so "in"
	// (created first) starts and the others wait with no_git.
	if r := rows[dl.ID]; r.Runnable || !slices.Equal(r.Reasons, []string{"no_git"}) {
		t.Errorf("before the deadline: %s %v %v; want only no_git", dl.ID, r.Runnable, r.ReasonText)
	}
	rows = schedAt(t, ws, "2030-01-01T08:00:00Z")
	if r := rows[at.ID]; !r.Runnable {
		t.Errorf("at --at: %s not runnable: %v", at.ID, r.ReasonText)
	}
	if r := rows[dl.ID]; r.Runnable || !slices.Equal(r.Reasons, []string{"deadline_passed", "no_git"}) ||
		r.ReasonText[0] != "deadline passed 00:00:00 (8h ago)" {
		t.Errorf("past the deadline: %s %v; want deadline_passed", dl.ID, r.ReasonText)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--at", "2030-01-01T00:00:00Z", "--in", "1m"}, "--at and --in: give one, not both"},
		{[]string{"--in", "soon"}, `--in: "soon" is not a duration like 10m or 1h30m`},
		{[]string{"--in", "-5m"}, `--in: "-5m" is not a duration like 10m or 1h30m`},
		{[]string{"--at", "tomorrow"}, `--at: "tomorrow" is not an RFC 3339 time`},
		{[]string{"--deadline", "2030-01-01"}, `--deadline: "2030-01-01" is not an RFC 3339 time`},
	} {
		code, _, errs := run(append(append(slices.Clone(ws), "add", "--type", "ralph", "--task", "x"), tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("add %v = exit %d %q; want exit 2 with %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestAddAdmissionLimits: a full queue or an owner's exhausted quota refuses
// `loopr add` with one line and exit 2.
func TestAddAdmissionLimits(t *testing.T) {
	t.Parallel()
	ws := policyWorkspace(t, "admission: {max_pending: 2}\nquotas:\n  alice: {max_pending: 1}\n")
	addJSON(t, ws, "--type", "ralph", "--task", "a", "--owner", "alice")
	code, _, errs := run(append(slices.Clone(ws), "add", "--type", "ralph", "--task", "b", "--owner", "alice")...)
	if code != 2 || errs != "loopr: quota exceeded: owner alice has 1 loops waiting (quotas.alice.max_pending 1)\n" {
		t.Errorf("second loop of alice = exit %d %q", code, errs)
	}
	addJSON(t, ws, "--type", "ralph", "--task", "c")
	code, _, errs = run(append(slices.Clone(ws), "add", "--type", "ralph", "--task", "d")...)
	if code != 2 || !strings.HasPrefix(errs, "loopr: queue full: 2 loops waiting (admission.max_pending 2)") {
		t.Errorf("third loop = exit %d %q", code, errs)
	}
}

// TestAddAfter: --after (repeated or comma-separated, ids or prefixes)
// sets depends_on, and the loop waits with the reason depends_on naming
// the loops it waits for; an unknown id is a usage error (exit 2).
func TestAddAfter(t *testing.T) {
	t.Parallel()
	ws := policyWorkspace(t, "")
	a := addJSON(t, ws, "--type", "ralph", "--task", "first")
	b := addJSON(t, ws, "--type", "ralph", "--task", "second")
	c := addJSON(t, ws, "--type", "ralph", "--task", "third", "--after", a.ID+","+b.ID[:12], "--after", a.ID)
	if want := []string{a.ID, b.ID}; !slices.Equal(c.DependsOn, want) {
		t.Errorf("--after: depends_on = %v, want %v", c.DependsOn, want)
	}
	row := schedAt(t, ws, time.Now().UTC().Format(time.RFC3339))[c.ID]
	if !slices.Contains(row.Reasons, "depends_on") || !strings.Contains(strings.Join(row.ReasonText, ";"), "waits for "+a.ID+" (pending), "+b.ID+" (pending)") {
		t.Errorf("debug scheduler row of %s: reasons %v %q, want depends_on naming %s and %s", c.ID, row.Reasons, row.ReasonText, a.ID, b.ID)
	}
	code, _, errs := run(append(slices.Clone(ws), "add", "--type", "ralph", "--task", "x", "--after", "01ZZZZZZZZZZZZZZZZZZZZZZZZ")...)
	if code != 2 || !strings.Contains(errs, "--after: no loop 01ZZZZZZZZZZZZZZZZZZZZZZZZ") {
		t.Errorf("--after an unknown id: exit %d, stderr %q; want 2 naming it", code, errs)
	}
}
