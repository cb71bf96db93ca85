package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/workspace"
)

// Tests of the commands over the daemon's batch, retention and statistics
// routes: add --file, gc, stats; and add's time flags through the daemon.

// runDaemon runs a daemon for p in this process until the test ends.
func runDaemon(t *testing.T, p workspace.Paths) {
	t.Helper()
	cfg, err := config.Load(p.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Paths: p, Config: cfg, Version: "cli-test", Ready: func(int) { close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon.Run() = %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("daemon.Run() = %v", err)
	}
}

// in runs loopr in workspace p.
func in(p workspace.Paths, args ...string) (int, string, string) {
	return run(append([]string{"--home", p.Home, "--config", p.Config}, args...)...)
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAddFile(t *testing.T) {
	t.Parallel()
	for _, viaDaemon := range []bool{false, true} {
		name := "store"
		if viaDaemon {
			name = "daemon"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := testWorkspace(t)
			if viaDaemon {
				runDaemon(t, p)
			}
			file := writeFile(t, t.TempDir(), "loops.yaml", `# three loops, one bad
- {type: ralph, task: "Fix the flaky login test", owner: alice, runnable_at: 2030-01-01T00:00:00Z}
- type: dragon
  title: not a type
- type: ralph
  title: Review the API
  in: 1h
  deadline: 2030-01-02T00:00:00Z
  max_iterations: 7
`)
			code, out, errs := in(p, "add", "--file", file)
			if code != 1 || strings.TrimSpace(errs) != "loopr: 1 of 3 loops not created" {
				t.Errorf("add --file = exit %d, stderr %q; want exit 1 naming the refused count", code, errs)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			if len(lines) != 5 {
				t.Fatalf("add --file printed %d lines, want a header, 3 items and a summary:\n%s", len(lines), out)
			}
			id := `[0-9a-z]{8}` // the short id
			for i, re := range []string{
				`^ITEM  LINE  RESULT   ID +TYPE +TITLE / ERROR$`,
				`^0     2     created  ` + id + `  ralph +Fix the flaky login test$`,
				`^1     3     error    - +dragon +type: unknown type "dragon" \(known: plan, spec, phase, ralph\)$`,
				`^2     5     created  ` + id + `  ralph +Review the API$`,
				`^2 created, 1 failed$`,
			} {
				if !regexp.MustCompile(re).MatchString(lines[i]) {
					t.Errorf("line %d = %q, want match %s", i, lines[i], re)
				}
			}
			code, out, _ = in(p, "list", "--json")
			var loops []loop.Loop
			if err := json.Unmarshal([]byte(out), &loops); code != 0 || err != nil || len(loops) != 2 {
				t.Fatalf("list after add --file = exit %d, %d loops, %v; want 2", code, len(loops), err)
			}
			if l := loops[0]; l.Owner != "alice" || !l.RunnableAt.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("item 0 = owner %q runnable_at %v", l.Owner, l.RunnableAt)
			}
			if l := loops[1]; l.MaxIterations != 7 || !l.Deadline.Equal(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)) ||
				l.RunnableAt.Before(time.Now().Add(50*time.Minute)) {
				t.Errorf("item 2 = max_iterations %d deadline %v runnable_at %v; want 7, 2030-01-02, in an hour", l.MaxIterations, l.Deadline, l.RunnableAt)
			}

			// --json: a result per item with its line.
			ok := writeFile(t, t.TempDir(), "ok.yaml", "- {type: ralph, task: one, runnable_at: 2030-01-01T00:00:00Z}\n- {type: spec, task: two, parent: nope}\n")
			code, out, _ = in(p, "add", "--file", ok, "--json")
			var res []struct {
				Line  int            `json:"line"`
				Index int            `json:"index"`
				ID    string         `json:"id"`
				Error *api.ErrorBody `json:"error"`
			}
			if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || len(res) != 2 {
				t.Fatalf("add --file --json = exit %d, %v:\n%s", code, err, out)
			}
			if res[0].Line != 1 || res[0].ID == "" || res[1].Index != 1 || res[1].Line != 2 || res[1].Error == nil ||
				res[1].Error.Code != api.CodeNotFound || res[1].Error.Message != "parent: loop nope: not found" {
				t.Errorf("add --file --json = %+v", res)
			}
		})
	}
}

// TestAddFileInvalid: a file that cannot be read as loops is exit 2 with
// file, line and key, and creates nothing.
func TestAddFileInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "- type: ralph\n  tyep: spec\n", "loops.yaml:2: [0].tyep: unknown key (known: type, parent, task, title, max_iterations, runnable_at, in, deadline, fairness_key, conflict_key, cost_hint, owner, agent, budget_usd, budget_tokens, fanout)"},
		{"not a list", "type: ralph\n", "loops.yaml:1: want a YAML list of loops (- type: ralph …), got a mapping"},
		{"item not a mapping", "- ralph\n", `loops.yaml:1: [0]: want a mapping (type: …, task: …), got "ralph"`},
		{"bad integer", "- {type: ralph, task: x}\n- {type: ralph, task: y, max_iterations: many}\n", `loops.yaml:2: [1].max_iterations: want an integer, got "many"`},
		{"bad time", "- type: ralph\n  task: x\n  deadline: tomorrow\n", `loops.yaml:3: [0].deadline: "tomorrow" is not an RFC 3339 time (e.g. 2026-01-25T12:00:00Z)`},
		{"bad duration", "- type: ralph\n  task: x\n  in: soon\n", `loops.yaml:3: [0].in: "soon" is not a duration like 10m or 1h30m`},
		{"both times", "- type: ralph\n  task: x\n  in: 10m\n  runnable_at: 2030-01-01T00:00:00Z\n", "loops.yaml:4: [0]: runnable_at and in: give one, not both"},
		{"duplicate", "- type: ralph\n  type: spec\n", "loops.yaml:2: [0].type: duplicate key (first at line 1)"},
		{"nested", "- type: ralph\n  task: [a, b]\n", "loops.yaml:2: [0].task: want a value, got a list"},
		{"negative budget", "- {type: ralph, task: x, budget_usd: -2}\n", `loops.yaml:1: [0].budget_usd: want a number >= 0, got "-2"`},
		{"text tokens", "- {type: ralph, task: x, budget_tokens: lots}\n", `loops.yaml:1: [0].budget_tokens: want an integer, got "lots"`},
		{"empty", "# nothing\n", "loops.yaml: empty: want a YAML list of loops"},
		{"empty list", "[]\n", "loops.yaml:1: empty list: want at least one loop"},
		{"syntax", "- type: ralph\n\ttask: x\n", "loops.yaml:2: invalid YAML: found a tab character that violates indentation"},
	}
	p := testWorkspace(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			file := writeFile(t, t.TempDir(), "loops.yaml", tt.yaml)
			code, out, errs := in(p, "add", "--file", file)
			if code != 2 || strings.TrimSpace(errs) != "loopr: "+tt.want || out != "" {
				t.Errorf("add --file = exit %d, stdout %q, stderr %q\nwant exit 2, loopr: %s", code, out, errs, tt.want)
			}
		})
	}
	if code, _, errs := in(p, "add", "--file", "x.yaml", "--type", "ralph"); code != 2 || !strings.Contains(errs, "--file and --type") {
		t.Errorf("add --file --type = exit %d %q; want exit 2", code, errs)
	}
	if code, out, _ := in(p, "list", "--json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("after invalid files, list = %q; want no loops", out)
	}
}

// TestAddTimesThroughTheDaemon: --at, --in and --deadline reach the daemon,
// and a deadline that passes while the loop waits expires it, with the
// transition in the journal.
func TestAddTimesThroughTheDaemon(t *testing.T) {
	t.Parallel()
	p := testWorkspace(t)
	runDaemon(t, p)
	if st := statusOf(t, p); !st.Daemon {
		t.Fatal("status: no daemon")
	}
	add := func(args ...string) loop.Loop {
		t.Helper()
		code, out, errs := in(p, append([]string{"add", "--type", "ralph", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("add %v = exit %d: %s", args, code, errs)
		}
		var l loop.Loop
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	at := add("--task", "at", "--at", "2031-05-01T10:00:00+02:00")
	if !at.RunnableAt.Equal(time.Date(2031, 5, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("--at through the daemon: runnable_at %v", at.RunnableAt)
	}
	before := time.Now()
	inOne := add("--task", "in", "--in", "1h")
	if d := inOne.RunnableAt.Sub(before); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("--in 1h through the daemon: runnable_at %v is %s after now", inOne.RunnableAt, d)
	}
	deadline := time.Now().Add(400 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	doomed := add("--task", "doomed", "--in", "1h", "--deadline", deadline)

	var l loop.Loop
	for end := time.Now().Add(10 * time.Second); ; {
		code, out, _ := in(p, "show", doomed.ID, "--json")
		if code == 0 && json.Unmarshal([]byte(out), &l) == nil && l.Status == loop.Expired {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("loop with a passed deadline is %s after 10s, want expired", l.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.HasPrefix(l.Reason, "deadline ") || !strings.HasSuffix(l.Reason, " passed while pending") {
		t.Errorf("expired loop reason = %q", l.Reason)
	}
}

// TestGCAndStats: loopr gc --dry-run lists, loopr gc removes, loopr stats
// summarises — on the store, then through a daemon.
func TestGCAndStats(t *testing.T) {
	t.Parallel()
	p := testWorkspace(t)
	old := time.Now().Add(-40 * 24 * time.Hour).UTC().Truncate(time.Second)
	recs := []loop.Loop{
		{ID: "gone1", Type: loop.Ralph, Status: loop.Complete, Title: "old work", Iteration: 2, MaxIterations: 3, CreatedAt: old, UpdatedAt: old, FinishedAt: old},
		{ID: "gone2", Type: loop.Ralph, Status: loop.Failed, Title: "old failure", Iteration: 3, MaxIterations: 3, CreatedAt: old, UpdatedAt: old, FinishedAt: old},
		{ID: "stays", Type: loop.Ralph, Status: loop.Complete, Title: "recent", Iteration: 1, MaxIterations: 3, CreatedAt: old, UpdatedAt: time.Now().UTC().Truncate(time.Second), FinishedAt: time.Now().UTC().Truncate(time.Second)},
	}
	var jl strings.Builder
	for _, l := range recs {
		b, _ := json.Marshal(l)
		jl.Write(append(b, '\n'))
	}
	file := writeFile(t, t.TempDir(), "old.jsonl", jl.String())
	if code, _, errs := in(p, "import", file); code != 0 {
		t.Fatalf("import = exit %d: %s", code, errs)
	}

	code, out, errs := in(p, "stats")
	if code != 0 {
		t.Fatalf("stats = exit %d: %s", code, errs)
	}
	for _, want := range []string{"daemon      not running", "loops       3 kept; 1 completed in the last hour, 1 in the last day",
		"success     66.7% (2 complete, 1 failed)", "ralph  3      0        2         1       1.5"} {
		if !strings.Contains(out, want) {
			t.Errorf("stats without a daemon lacks %q:\n%s", want, out)
		}
	}

	code, out, errs = in(p, "gc", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "would remove 2 loops that finished before ") || !strings.Contains(out, "gone1") || !strings.Contains(out, "gone2") || strings.Contains(out, "stays") {
		t.Errorf("gc --dry-run = exit %d %s:\n%s", code, errs, out)
	}
	code, out, _ = in(p, "gc", "--json")
	var res api.GCResult
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Removed) != 2 || res.DryRun {
		t.Fatalf("gc --json = exit %d %v: %s", code, err, out)
	}
	if code, out, _ := in(p, "gc"); code != 0 || !strings.HasPrefix(out, "nothing to remove: no finished loop is older than 30 days") {
		t.Errorf("second gc = exit %d %q", code, out)
	}
	if code, _, errs := in(p, "gc", "--days", "0"); code != 2 || !strings.Contains(errs, "--days: must be at least 1") {
		t.Errorf("gc --days 0 = exit %d %q; want exit 2", code, errs)
	}

	runDaemon(t, p)
	code, out, _ = in(p, "gc", "--days", "1", "--dry-run")
	if code != 0 || !strings.HasPrefix(out, "nothing to remove") {
		t.Errorf("gc through the daemon = exit %d %q", code, out)
	}
	code, out, errs = in(p, "stats")
	if code != 0 {
		t.Fatalf("stats through the daemon = exit %d: %s", code, errs)
	}
	for _, re := range []string{`daemon +up \d+s \(since `, `success +100\.0% \(1 complete, 0 failed\)`, `throughput +(-|0\.0/h) \(0 completions in \d+s\)`,
		`rate limit +0 hits, work blocked 0s; not backing off now`, `tick +(p50 .* ticks\)|no ticks yet)`, `dispatch +no starts yet`,
		`TYPE +LOOPS +RUNNING +COMPLETE +FAILED +MEAN ITER +STARTS +COMPLETIONS +FAILURES`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("stats through the daemon lacks %s:\n%s", re, out)
		}
	}
	code, out, _ = in(p, "stats", "--json")
	var st api.Stats
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || !st.Daemon || st.Total != 1 {
		t.Errorf("stats --json = exit %d %v %+v", code, err, st)
	}
	if diff := cmp.Diff([]string{"plan", "spec", "phase", "ralph"}, typesOf(st)); diff != "" {
		t.Errorf("stats types mismatch (-want +got):\n%s", diff)
	}
}

func typesOf(st api.Stats) []string {
	var out []string
	for _, t := range st.Types {
		out = append(out, t.Type)
	}
	return out
}
