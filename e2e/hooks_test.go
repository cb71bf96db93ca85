package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Lifecycle hooks (issue 23) against the real daemon, git and processes;
// the agent is testdata/agent.sh in queue mode, which appends one line to
// $LOOPR_E2E_STARTS each time it starts.

// hookConfig is treeConfig's configuration with extra top-level YAML.
func hookConfig(t *testing.T, extra string) string {
	t.Helper()
	return treeConfig(t, 3, validateCmd(t), "queue") + extra
}

// agentStarts counts the lines agent.sh appended to the file at path (0
// when it does not exist): one per agent start.
func agentStarts(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestHookBeforeRunBlocks: a failing before_run (on_error: block) starts
// no agent and spends no iteration, however often it fails; the loop
// waits, `loopr why` says which hook failed with its last line, and once
// the hook passes the loop runs and completes at its first iteration.
func TestHookBeforeRunBlocks(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	starts, flag := filepath.Join(tmp, "starts"), filepath.Join(tmp, "db-up")
	r := newRepo(t, hookConfig(t, `hooks:
  before_run:
    run: ["echo checking the db", "test -f \"$LOOPR_E2E_FLAG\" || { echo 'the db is down' >&2; exit 3; }"]
`))
	d := startDaemonEnv(t, r, "LOOPR_E2E_STARTS="+starts, "LOOPR_E2E_FLAG="+flag)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Write the file", "--json"), &l)

	waitEvery(t, 90*time.Second, slowPoll, "the hook to fail three times in a row", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		got := show(t, r, l.ID)
		if got.Iteration != 1 || got.Status.Terminal() || got.Status == loop.NeedsHuman {
			t.Fatalf("behind a failing before_run: %s at iteration %d (reason %q); want iteration 1, waiting", got.Status, got.Iteration, got.Reason)
		}
		return strings.Contains(ok(t, r.dir, "events", l.ID), "(3 in a row): no agent started, no iteration spent")
	})
	if n := agentStarts(t, starts); n != 0 {
		t.Fatalf("%d agents started behind a failing before_run; want 0", n)
	}
	why := ok(t, r.dir, "why", l.ID)
	if !strings.Contains(why, "hook before_run failed") || !strings.Contains(why, "the db is down") {
		t.Errorf("loopr why does not say which hook holds the loop, with its last line:\n%s", why)
	}
	log := filepath.Join(r.home, "loops", l.ID, "iterations", "001", "hooks", "before_run.log")
	if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "checking the db") {
		t.Errorf("the hook's log %s: %v\n%s", log, err, b)
	}

	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got loop.Loop
	waitFor(t, 90*time.Second, "the loop to complete once the hook passes", func() bool {
		got = show(t, r, l.ID)
		return got.Status.Terminal()
	})
	if got.Status != loop.Complete || got.Iteration != 1 || got.Reason != "" {
		t.Errorf("once the hook passed: %s at iteration %d (reason %q); want complete at iteration 1, no reason", got.Status, got.Iteration, got.Reason)
	}
	if n := agentStarts(t, starts); n != 1 {
		t.Errorf("%d agent starts; want 1", n)
	}
}

// TestHookSuspend: a failing hook with on_error: suspend parks the loop in
// needs_human with reason hook; `loopr answer` resumes it.
func TestHookSuspend(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	starts, flag := filepath.Join(tmp, "starts"), filepath.Join(tmp, "ok")
	r := newRepo(t, hookConfig(t, `hooks:
  before_run: {run: ["test -f \"$LOOPR_E2E_FLAG\" || { echo 'fix the fixture'; exit 1; }"], on_error: suspend}
`))
	startDaemonEnv(t, r, "LOOPR_E2E_STARTS="+starts, "LOOPR_E2E_FLAG="+flag)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Write the file", "--json"), &l)
	var got loop.Loop
	waitFor(t, 90*time.Second, "the loop to need a person", func() bool {
		got = show(t, r, l.ID)
		return got.Status == loop.NeedsHuman || got.Status.Terminal()
	})
	if got.Needs == nil || got.Needs.Reason != loop.NeedsHook || !strings.Contains(got.Needs.Detail, "fix the fixture") || got.Iteration != 1 {
		t.Fatalf("after a suspending hook: %s, needs %+v, iteration %d; want needs_human (hook) with the hook's output at iteration 1", got.Status, got.Needs, got.Iteration)
	}
	if n := agentStarts(t, starts); n != 0 {
		t.Errorf("%d agents started; want 0", n)
	}
	if out := ok(t, r.dir, "status"); !strings.Contains(out, "hook") {
		t.Errorf("loopr status does not show the reason hook:\n%s", out)
	}
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, r.dir, "answer", l.ID, "fixed it")
	waitFor(t, 90*time.Second, "the answered loop to complete", func() bool {
		got = show(t, r, l.ID)
		return got.Status.Terminal()
	})
	if got.Status != loop.Complete || got.Iteration != 1 {
		t.Errorf("answered: %s at iteration %d (reason %q); want complete at iteration 1", got.Status, got.Iteration, got.Reason)
	}
}

// TestHookEnvWarnAndWorktreeCopy: in a plan tree, every new worktree gets
// the workspace's gitignored .env (worktree.copy); what is not a regular
// file of the workspace is refused and journaled; a failing hook with
// on_error: warn is journaled and the tree completes; every hook gets its
// LOOPR_* variables, CI=true, GIT_TERMINAL_PROMPT=0 and PWD, and no
// BASH_ENV.
func TestHookEnvWarnAndWorktreeCopy(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	starts, seen := filepath.Join(tmp, "starts"), filepath.Join(tmp, "seen")
	r := newRepo(t, hookConfig(t, `hooks:
  before_run:
    on_error: warn
    run:
      - printf '%s|%s|%s|%s|%s|%s|%s|%s|%s|%s\n' "$LOOPR_LOOP_ID" "$LOOPR_WORKTREE" "$LOOPR_BRANCH" "$LOOPR_PLAN_BRANCH" "$LOOPR_HOOK" "$CI" "$GIT_TERMINAL_PROMPT" "$PWD" "${BASH_ENV-unset}" "$(cat .env)" >> "$LOOPR_E2E_SEEN"
      - echo 'only a warning'; exit 1
worktree:
  copy: [".env", "escape", "pipe", "missing.yml"]
`))
	if err := os.WriteFile(filepath.Join(r.dir, ".env"), []byte("SECRET=42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, ".gitignore"), []byte(".env\nescape\npipe\n.loopr/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git(t, "add", ".gitignore")
	r.git(t, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "commit", "-q", "--no-verify", "-m", "ignore")
	if err := os.Symlink("/etc/passwd", filepath.Join(r.dir, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(r.dir, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonEnv(t, r, "LOOPR_E2E_STARTS="+starts, "LOOPR_E2E_SEEN="+seen, "LOOPR_E2E_NO_CLASH=1", "BASH_ENV="+filepath.Join(tmp, "rc"))
	loops := runAgentTree(t, r, d)
	if len(loops) != 6 {
		t.Fatalf("%d loops; want 6:\n%s", len(loops), describe(loops))
	}
	planBranch, plan := "", loop.Loop{}
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("loop %s %s is %s (%s); want complete despite the warning hook", l.Type, l.ID, l.Status, l.Reason)
		}
		if l.Type == loop.Plan {
			planBranch, plan = l.Branch, l
		}
	}
	byLoop := map[string][]string{}
	b, _ := os.ReadFile(seen)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 10 {
			t.Fatalf("hook line %q: want 10 fields", line)
		}
		byLoop[f[0]] = f
	}
	for _, l := range loops {
		f, ok := byLoop[l.ID]
		if !ok {
			t.Errorf("no before_run ran for %s %s", l.Type, l.ID)
			continue
		}
		want := []string{l.ID, l.Workdir, l.Branch, planBranch, "before_run", "true", "0", l.Workdir, "unset", "SECRET=42"}
		if strings.Join(f, "|") != strings.Join(want, "|") || !strings.HasPrefix(l.Workdir, filepath.Join(r.home, "worktrees")) {
			t.Errorf("%s's hook saw\n  %q\nwant\n  %q", l.Type, f, want)
		}
	}
	events := ok(t, r.dir, "events", plan.ID)
	for _, want := range []string{
		"hook before_run failed: `echo 'only a warning'; exit 1`: exit status 1 (last line: only a warning); on_error warn",
		"worktree.copy: copied .env; not copied: escape: leads out of the workspace",
		"pipe: not a regular file", "missing.yml: no such file in the workspace",
	} {
		if !strings.Contains(events, want) {
			t.Errorf("the plan's journal lacks %q:\n%s", want, events)
		}
	}
	if n := agentStarts(t, starts); n != 6 {
		t.Errorf("%d agent starts; want 6 (one per loop)", n)
	}
}

// TestConfigCheckHooks: `loopr config check` runs sh -n on each hook
// command and names the ones that do not parse by line and key (exit 2);
// a hook's bad setting is refused by every command.
func TestConfigCheckHooks(t *testing.T) {
	t.Parallel()
	r := plainDir(t, `storage: {disk_quota_min_gb: 0}
loops:
  ralph: {validate: ["true"]}
hooks:
  before_run:
    run:
      - echo fine
      - 'if true; then echo'
  after_merge: {run: ["echo (", "echo ok"]}
`)
	res := run(t, r.dir, "", "config", "check")
	if res.code != 2 || !strings.Contains(res.stderr, "loopr.yml:8: hooks.before_run.run[1]: sh -n: ") ||
		!strings.Contains(res.stderr, "loopr.yml:9: hooks.after_merge.run[0]: sh -n: ") || strings.Contains(res.stderr, "hooks.before_run.run[0]") {
		t.Errorf("config check on bad hooks: exit %d\nstdout %s\nstderr %s\nwant exit 2 naming lines 8 and 9", res.code, res.stdout, res.stderr)
	}
	bad := plainDir(t, "hooks:\n  before_run: {run: [make], on_error: ignore}\n")
	res = run(t, bad.dir, "", "config", "check")
	if want := `loopr.yml:2: hooks.before_run.on_error: unknown value "ignore" (want block, warn or suspend)`; res.code != 2 || !strings.Contains(res.stderr, want) {
		t.Errorf("config check: exit %d, stderr %q; want 2 and %q", res.code, res.stderr, want)
	}
}

// TestHookMergeAndLifecycle: before_merge refusing a task's first merge
// sends it back as a failing merge.validate would (an iteration spent, the
// hook's output as feedback), then it lands; after_merge runs once per
// landed task; after_create runs once per new worktree, not per
// iteration; before_remove runs before each worktree goes.
func TestHookMergeAndLifecycle(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	starts, marks, seen := filepath.Join(tmp, "starts"), filepath.Join(tmp, "marks"), filepath.Join(tmp, "seen")
	r := newRepo(t, hookConfig(t, `hooks:
  after_create: {run: ["echo \"after_create $LOOPR_LOOP_ID\" >> \"$LOOPR_E2E_SEEN\""]}
  before_merge: {run: ["echo \"before_merge $LOOPR_LOOP_ID\" >> \"$LOOPR_E2E_SEEN\"", "! mkdir \"$LOOPR_E2E_MARKS/$LOOPR_LOOP_ID\" 2>/dev/null || { echo 'smoke test failed'; exit 1; }"]}
  after_merge: {run: ["echo \"after_merge $LOOPR_LOOP_ID\" >> \"$LOOPR_E2E_SEEN\""]}
  before_remove: {run: ["echo \"before_remove $LOOPR_LOOP_ID\" >> \"$LOOPR_E2E_SEEN\"; test -d \"$LOOPR_WORKTREE\""]}
`))
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemonEnv(t, r, "LOOPR_E2E_STARTS="+starts, "LOOPR_E2E_SEEN="+seen, "LOOPR_E2E_MARKS="+marks, "LOOPR_E2E_NO_CLASH=1")
	loops := runAgentTree(t, r, d)
	// after_merge and before_remove run after the records say complete.
	count := map[string]int{}
	waitFor(t, 60*time.Second, "every worktree's before_remove", func() bool {
		b, _ := os.ReadFile(seen)
		clear(count)
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			count[line]++
			if strings.HasPrefix(line, "before_remove ") {
				n++
			}
		}
		return n >= len(loops)
	})
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("%s %s is %s (%s); want complete", l.Type, l.ID, l.Status, l.Reason)
		}
		if n := count["after_create "+l.ID]; n != 1 {
			t.Errorf("after_create ran %d times for %s %s; want once", n, l.Type, l.ID)
		}
		if n := count["before_remove "+l.ID]; n != 1 {
			t.Errorf("before_remove ran %d times for %s %s; want once", n, l.Type, l.ID)
		}
		if l.Type != loop.Ralph {
			continue
		}
		if l.Iteration != 2 || count["before_merge "+l.ID] != 2 || count["after_merge "+l.ID] != 1 {
			t.Errorf("task %s: iteration %d, before_merge %d, after_merge %d; want 2, 2, 1 (its first merge refused)",
				l.ID, l.Iteration, count["before_merge "+l.ID], count["after_merge "+l.ID])
		}
		if ev := ok(t, r.dir, "events", l.ID); !strings.Contains(ev, "hook before_merge failed") || !strings.Contains(ev, "smoke test failed") {
			t.Errorf("task %s's journal does not say the hook refused its merge:\n%s", l.ID, ev)
		}
	}
	if n := agentStarts(t, starts); n != 9 {
		t.Errorf("%d agent starts; want 9 (plan, spec, phase, 3 tasks twice)", n)
	}
}

// TestHookAfterCreateAndAfterRunBlock: a failing after_create (block)
// removes the new worktree and spends nothing: the next attempt makes it
// anew and runs the hook again. A failing after_run (block) fails the
// iteration it follows, with the hook's output in the next prompt's
// feedback.
func TestHookAfterCreateAndAfterRunBlock(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	starts, marks, seen := filepath.Join(tmp, "starts"), filepath.Join(tmp, "marks"), filepath.Join(tmp, "seen")
	r := newRepo(t, hookConfig(t, `hooks:
  after_create: {run: ["echo \"after_create $LOOPR_LOOP_ID\" >> \"$LOOPR_E2E_SEEN\"", "! mkdir \"$LOOPR_E2E_MARKS/create\" 2>/dev/null || { echo 'npm ci failed'; exit 1; }"]}
  after_run: {run: ["! mkdir \"$LOOPR_E2E_MARKS/run\" 2>/dev/null || { echo 'the service did not stop'; exit 1; }"]}
`))
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	startDaemonEnv(t, r, "LOOPR_E2E_STARTS="+starts, "LOOPR_E2E_SEEN="+seen, "LOOPR_E2E_MARKS="+marks)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Write the file", "--json"), &l)
	var got loop.Loop
	waitFor(t, 90*time.Second, "the loop to complete", func() bool {
		got = show(t, r, l.ID)
		return got.Status.Terminal()
	})
	if got.Status != loop.Complete || got.Iteration != 2 {
		t.Errorf("%s at iteration %d (reason %q); want complete at iteration 2 (after_run failed the first)", got.Status, got.Iteration, got.Reason)
	}
	if n := agentStarts(t, starts); n != 2 {
		t.Errorf("%d agent starts; want 2 (none behind the failed after_create)", n)
	}
	if got.Base.Commit == "" || got.Branch == "" {
		t.Errorf("branch %q base %+v; want both recorded although the first worktree was removed", got.Branch, got.Base)
	}
	b, _ := os.ReadFile(seen)
	if n := strings.Count(string(b), "after_create "+l.ID); n != 2 {
		t.Errorf("after_create ran %d times; want 2 (the worktree made anew after it failed)", n)
	}
	ev := ok(t, r.dir, "events", l.ID)
	for _, want := range []string{"hook after_create failed", "npm ci failed", "iteration 1 failed: hook after_run failed", "the service did not stop"} {
		if !strings.Contains(ev, want) {
			t.Errorf("the journal lacks %q:\n%s", want, ev)
		}
	}
	prompt, err := os.ReadFile(filepath.Join(r.home, "loops", l.ID, "iterations", "002", "prompt.md"))
	if err != nil || !strings.Contains(string(prompt), "the service did not stop") {
		t.Errorf("iteration 2's prompt lacks the after_run hook's output (%v)", err)
	}
}
