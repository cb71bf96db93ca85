package mergequeue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/sandbox"
)

func TestMain(m *testing.M) {
	// Hermetic git, as in gitflow's tests.
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	argv := append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"}, args...)
	out, err := exec.Command("git", argv...).CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// fixture is a repository with the plan branch loopr/plan and a branch
// per item made from it, each adding its own file.
type fixture struct {
	repo  *gitflow.Repo
	into  string
	items []Item
}

func newFixture(tb testing.TB, names ...string) fixture {
	tb.Helper()
	root := tb.TempDir()
	git(tb, root, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("hi\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	git(tb, root, "add", "-A")
	git(tb, root, "commit", "-q", "-m", "initial")
	git(tb, root, "branch", "loopr/plan")
	r, err := gitflow.Open(root, "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	f := fixture{repo: r, into: "loopr/plan"}
	for _, n := range names {
		b := "loopr/" + n
		git(tb, root, "branch", b, "loopr/plan")
		wt := filepath.Join(tb.TempDir(), n)
		git(tb, root, "worktree", "add", "-q", wt, b)
		if err := os.WriteFile(filepath.Join(wt, n+".txt"), []byte(n+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		git(tb, wt, "add", "-A")
		git(tb, wt, "commit", "-q", "-m", "work of "+n)
		f.items = append(f.items, Item{ID: n, Branch: b, Commit: git(tb, root, "rev-parse", b), Iteration: 1})
	}
	return f
}

// sink records settlements for the real queue's tests.
type sink struct {
	mu       sync.Mutex
	landed   []string
	heads    []string
	evidence [][]loop.Evidence
	rejected map[string]string // id → the failing attempt's reason, or the conflict
}

func (s *sink) Landed(items []Item, a Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range items {
		s.landed = append(s.landed, it.ID)
	}
	s.heads = append(s.heads, a.Head)
	s.evidence = append(s.evidence, a.Evidence)
}

func (s *sink) Rejected(it Item, conflict error, failed *Attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejected == nil {
		s.rejected = map[string]string{}
	}
	if conflict != nil {
		s.rejected[it.ID] = conflict.Error()
	} else {
		s.rejected[it.ID] = failed.Reason + "\n" + failed.Output
	}
}

// TestQueueSemanticConflict: a and c pass alone and break merge.validate
// together; batched with b, the queue lands a and b, sends c back with the
// validation's output, and every commit on the plan branch's first-parent
// line passes merge.validate.
func TestQueueSemanticConflict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "a", "b", "c")
	check := `if test -e a.txt && test -e c.txt; then echo "a and c clash"; exit 1; fi`
	q := &Queue{Git: f.repo, Runner: &runner.Runner{}}
	s := &sink{}
	var fenced [][]string
	st, err := q.Run(t.Context(), Plan{
		Into: f.into, Batch: 8, Validate: []string{check},
		Items: func() ([]Item, error) { return f.items, nil },
		Fence: func(_ context.Context, items []Item) error {
			var ids []string
			for _, it := range items {
				ids = append(ids, it.ID)
			}
			fenced = append(fenced, ids)
			return nil
		},
		Sink: s,
	})
	if err != nil {
		t.Fatalf("Run() = %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, s.landed); diff != "" {
		t.Errorf("landed mismatch (-want +got):\n%s", diff)
	}
	if got := s.rejected["c"]; !strings.Contains(got, "exited 1") || !strings.Contains(got, "a and c clash") {
		t.Errorf("c's rejection = %q; want the command's exit and output", got)
	}
	if diff := cmp.Diff([][]string{{"a", "b"}}, fenced); diff != "" {
		t.Errorf("fenced mismatch (-want +got):\n%s", diff)
	}
	// Tries: a+b+c fails, a+b lands, c alone is known to fail: 2 runs.
	if st.Validations != 2 || st.Landed != 2 || st.Rejected != 1 {
		t.Errorf("Run() stats = %+v; want 2 validations, 2 landed, 1 rejected", st)
	}
	root := f.repo.Root
	for _, c := range strings.Fields(git(t, root, "rev-list", "--first-parent", "loopr/plan")) {
		wt := filepath.Join(t.TempDir(), "check")
		git(t, root, "worktree", "add", "-q", "--detach", wt, c)
		if out, err := exec.Command("sh", "-c", "cd "+wt+" && "+check).CombinedOutput(); err != nil {
			t.Errorf("commit %s on the plan branch fails merge.validate: %s", c, out)
		}
	}
	if len(s.evidence) != 1 || len(s.evidence[0]) != 1 || s.evidence[0][0].Commit != s.heads[0] || s.evidence[0][0].Where != loop.WhereMerge {
		t.Errorf("landing evidence = %+v (head %v); want merge.validate on the head", s.evidence, s.heads)
	}
	if got := git(t, root, "rev-parse", "loopr/plan"); got != s.heads[0] {
		t.Errorf("plan branch at %s, want the landed head %s", got, s.heads[0])
	}
}

// TestQueueFenceStopsLanding: a fence that refuses moves nothing and
// settles nothing.
func TestQueueFenceStopsLanding(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "a")
	before := git(t, f.repo.Root, "rev-parse", "loopr/plan")
	s := &sink{}
	lost := errors.New("a loop was cancelled")
	_, err := (&Queue{Git: f.repo, Runner: &runner.Runner{}}).Run(t.Context(), Plan{
		Into: f.into, Batch: 1,
		Items: func() ([]Item, error) { return f.items, nil },
		Fence: func(context.Context, []Item) error { return lost },
		Sink:  s,
	})
	if !errors.Is(err, lost) || len(s.landed)+len(s.rejected) != 0 {
		t.Errorf("Run() = %v, settled %v %v; want the fence's error and nothing settled", err, s.landed, s.rejected)
	}
	if got := git(t, f.repo.Root, "rev-parse", "loopr/plan"); got != before {
		t.Errorf("plan branch moved to %s", got)
	}
}

// TestQueueConflictWithTip: a branch that conflicts with the plan branch
// is sent back with the conflict, costing no validation run.
func TestQueueConflictWithTip(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "a")
	root := f.repo.Root
	wt := filepath.Join(t.TempDir(), "plan")
	git(t, root, "worktree", "add", "-q", wt, "loopr/plan")
	if err := os.WriteFile(filepath.Join(wt, "a.txt"), []byte("the plan's own a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, wt, "add", "-A")
	git(t, wt, "commit", "-q", "-m", "plan adds a.txt")
	git(t, root, "worktree", "remove", wt)
	s := &sink{}
	st, err := (&Queue{Git: f.repo, Runner: &runner.Runner{}}).Run(t.Context(), Plan{
		Into: f.into, Batch: 4, Validate: []string{"true"},
		Items: func() ([]Item, error) { return f.items, nil }, Sink: s,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.rejected["a"]; !strings.Contains(got, "conflicts in a.txt") || st.Validations != 0 {
		t.Errorf("rejection of a = %q after %d validations; want the conflict in a.txt and none", got, st.Validations)
	}
}

func ExampleDrain() {
	var tip []string
	try := func(batch []Item) (Attempt, error) {
		a := Attempt{Validated: true}
		for i, it := range batch {
			a.Merged = append(a.Merged, i)
			if it.ID == "t3" {
				a.Reason = "validate `make test` exited 2"
			}
		}
		if a.Reason == "" {
			a.Passed = true
			for _, it := range batch {
				tip = append(tip, it.ID)
			}
		}
		return a, nil
	}
	var its []Item
	for i := range 6 {
		its = append(its, Item{ID: fmt.Sprintf("t%d", i)})
	}
	st, _ := Drain(its, 4, try, printSink{})
	fmt.Println(tip, st.Validations, "validation runs")
	// Output:
	// sent back t3: validate `make test` exited 2
	// [t0 t1 t2 t4 t5] 4 validation runs
}

type printSink struct{}

func (printSink) Landed([]Item, Attempt) {}
func (printSink) Rejected(it Item, _ error, a *Attempt) {
	fmt.Printf("sent back %s: %s\n", it.ID, a.Reason)
}

// TestEnvIsAllowlisted: merge.validate starts from the Plan's environment
// (the default profile's), else the daemon's base set, and is told what it
// validates; the daemon's other variables never reach it.
func TestEnvIsAllowlisted(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "planted-merge-token")
	q := &Queue{}
	merged := []Item{{Branch: "loopr/a-1"}, {Branch: "loopr/b-2"}}
	for _, p := range []Plan{{Into: "loopr/plan-1"}, {Into: "loopr/plan-1", Env: []string{"PATH=/bin", "PROJECT_MODE=merge"}}} {
		env := strings.Join(q.env(p, "abc123", merged), "\n")
		if strings.Contains(env, "planted-merge-token") || !strings.Contains(env, "PATH=") ||
			!strings.Contains(env, "LOOPR_MERGE_BRANCHES=loopr/a-1 loopr/b-2") || !strings.Contains(env, "LOOPR_MERGE_COMMIT=abc123") {
			t.Errorf("env(%q) =\n%s\nwant PATH and LOOPR_MERGE_*, not the daemon's GITHUB_TOKEN", p.Env, env)
		}
		if p.Env != nil && !strings.Contains(env, "PROJECT_MODE=merge") {
			t.Errorf("env(%q) lacks the plan's PROJECT_MODE:\n%s", p.Env, env)
		}
	}
}

// TestQueueValidateSandboxed: with Plan.Sandbox (the default profile's,
// bwrap, network none), merge.validate — the merged agents' code — runs
// sandboxed: what it writes outside the merge worktree reaches nothing,
// and the batch still lands. Without the sandbox the same command writes
// the file (so the test can tell).
func TestQueueValidateSandboxed(t *testing.T) {
	if err := sandbox.Check(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: .ci/run installs bubblewrap; CI must run this test", err)
		}
		t.Skip(err)
	}
	t.Parallel()
	for _, sandboxed := range []bool{true, false} {
		f := newFixture(t, "a")
		outside := filepath.Join(t.TempDir(), "escaped")
		r := &runner.Runner{}
		p := Plan{
			Into: f.into, Batch: 8, Validate: []string{"echo out > " + outside + " 2>/dev/null; true"},
			Items: func() ([]Item, error) { return f.items, nil },
			Sink:  &sink{},
		}
		if sandboxed {
			pol := sandbox.Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
				Preset: "command", Workspace: f.repo.Root, State: f.repo.Home}
			p.Sandbox = func(dir string, env []string) (func([]string) ([]string, error), func(), error) {
				return r.CheckSandbox(runner.Settings{Sandbox: pol}, loop.Loop{ID: "01PLAN"}, dir, env)
			}
		}
		st, err := (&Queue{Git: f.repo, Runner: r}).Run(t.Context(), p)
		if err != nil || st.Landed != 1 {
			t.Fatalf("sandboxed=%v: Run() = %+v, %v; want a landing", sandboxed, st, err)
		}
		_, statErr := os.Stat(outside)
		if wrote := statErr == nil; wrote == sandboxed {
			t.Errorf("sandboxed=%v: merge.validate wrote outside its worktree: %v", sandboxed, wrote)
		}
	}
}
