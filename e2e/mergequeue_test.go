package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/loop"
)

// queueConfig is treeConfig for `agent.sh queue` with the merge queue on:
// merge.validate is testdata/mergecheck.sh, merge.batch is batch.
func queueConfig(t *testing.T, batch int) string {
	t.Helper()
	return treeConfig(t, 5, validateCmd(t), "queue") + fmt.Sprintf(`merge:
  validate: [%q]
  batch: %d
`, "sh "+abs(t, "testdata/mergecheck.sh"), batch)
}

// waitTreeDone waits until the 6 loops of agent.sh queue's tree are
// complete and nothing is left to run.
func waitTreeDone(t *testing.T, r repo, d *daemonProc) {
	t.Helper()
	waitEvery(t, 120*time.Second, slowPoll, "the tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] == 6
	})
}

// ralphs returns the ralph loops of loops by title.
func ralphs(loops []loop.Loop) map[string]loop.Loop {
	out := map[string]loop.Loop{}
	for _, l := range loops {
		if l.Type == loop.Ralph {
			out[l.Title] = l
		}
	}
	return out
}

// planBranch returns the branch of the one plan among loops.
func planBranch(t *testing.T, loops []loop.Loop) string {
	t.Helper()
	for _, l := range loops {
		if l.Type == loop.Plan && l.Branch != "" {
			return l.Branch
		}
	}
	t.Fatalf("no plan with a branch:\n%s", describe(loops))
	return ""
}

// checkFirstParents runs mergecheck.sh on every commit of branch's
// first-parent line, each in a checkout of its own: none may fail. It
// returns the commits.
func checkFirstParents(t *testing.T, r repo, branch string) []string {
	t.Helper()
	commits := strings.Fields(r.git(t, "rev-list", "--first-parent", branch))
	for _, c := range commits {
		// A copy of the commit's tree, not a worktree: the daemon may be
		// adding and removing worktrees meanwhile.
		dir := t.TempDir()
		archive := fmt.Sprintf("git -C %q archive --format=tar %s | tar -x -C %q", r.dir, c, dir)
		if out, err := exec.Command("sh", "-c", archive).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", archive, err, out)
		}
		cmd := exec.Command("sh", abs(t, "testdata/mergecheck.sh"))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LOOPR_E2E_MERGE_MARK=", "LOOPR_E2E_MERGE_GATE=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("commit %s on %s's first-parent line fails merge.validate: %v\n%s", c, branch, err, out)
		}
	}
	return commits
}

// checkEvidence asserts that l, a complete task, has the evidence of its
// validate in its worktree on its commit, and of the merge.validate that
// admitted it, on a commit of the plan branch's first-parent line.
func checkEvidence(t *testing.T, r repo, l loop.Loop, firstParents []string) {
	t.Helper()
	var wt, merge int
	for _, e := range l.Evidence {
		switch {
		case e.Where == loop.WhereWorktree && e.ExitCode == 0 && e.Commit == l.Commit && e.Commit != "" && strings.Contains(e.Command, "validate.sh"):
			wt++
		case e.Where == loop.WhereMerge && e.ExitCode == 0 && strings.Contains(e.Command, "mergecheck.sh") && containsStr(firstParents, e.Commit):
			merge++
		}
	}
	if wt != 1 || merge != 1 {
		t.Errorf("task %q: evidence %+v (commit %s); want its validate in its worktree on its commit and the merge.validate that admitted it on the plan branch", l.Title, l.Evidence, l.Commit)
	}
	if out := ok(t, r.dir, "show", l.ID); !strings.Contains(out, "evidence:") || !strings.Contains(out, "mergecheck.sh") {
		t.Errorf("loopr show %s does not print the evidence:\n%s", l.ID, out)
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestMergeQueueCatchesSemanticConflict: Alpha and Gamma each pass their
// own validate, but their first versions break merge.validate together.
// Whichever reaches the plan branch second is caught before the branch
// moves and sent back with merge.validate's output in its next prompt; its
// second version lands. Every commit on the plan branch's first-parent
// line passes merge.validate, and every complete task has its evidence.
func TestMergeQueueCatchesSemanticConflict(t *testing.T) {
	t.Parallel()
	r := newRepo(t, queueConfig(t, 2))
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "clash", "--task", "three tasks, two of which clash")
	waitTreeDone(t, r, d)
	loops := list(t, r)
	tasks := ralphs(loops)
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Fatalf("loop %s %q is %s, want complete:\n%s", l.ID, l.Title, l.Status, describe(loops))
		}
	}
	alpha, gamma := tasks["Alpha"], tasks["Gamma"]
	late, early := gamma, alpha
	if alpha.Iteration > gamma.Iteration {
		late, early = alpha, gamma
	}
	if early.Iteration != 1 || late.Iteration != 2 || tasks["Beta"].Iteration != 1 {
		t.Fatalf("iterations: Alpha %d, Beta %d, Gamma %d; want the later of Alpha and Gamma sent back once, the others at 1:\n%s",
			alpha.Iteration, tasks["Beta"].Iteration, gamma.Iteration, describe(loops))
	}
	if p := iterFile(r, late.ID, 2, "prompt.md"); !strings.Contains(p, "merge.validate failed") || !strings.Contains(p, "they clash") {
		t.Errorf("%s's second prompt lacks merge.validate's failure and output:\n%s", late.Title, p)
	}
	branch := planBranch(t, loops)
	firstParents := checkFirstParents(t, r, branch)
	for _, l := range tasks {
		checkEvidence(t, r, l, firstParents)
	}
	sentBack := false
	for _, e := range journal(t, stopCleanly(t, r, d)) {
		if e.Loop == late.ID && e.From == loop.Merging && e.To == loop.Pending && strings.Contains(e.Message, "merge.validate failed") {
			sentBack = true
		}
	}
	if !sentBack {
		t.Errorf("the journal has no merging → pending of %s for merge.validate", late.Title)
	}
	for _, f := range []string{"alpha.flag", "gamma.flag"} {
		if got := r.git(t, "show", branch+":"+f); got != "v1" && got != "v2" {
			t.Errorf("%s on the plan branch = %q", f, got)
		}
	}
}

// TestPassIsNeverRerunAfterMerging: the daemon is SIGKILLed while the
// merge queue validates the first passed task (its merge.validate held
// open) and the other two wait merging behind it. After a restart every
// task lands with no new agent run: one agent start per loop, one
// pending → running per task, and merge.validate ran in both daemons.
func TestPassIsNeverRerunAfterMerging(t *testing.T) {
	t.Parallel()
	r := newRepo(t, queueConfig(t, 1))
	tmp := t.TempDir()
	starts, mark, gate := filepath.Join(tmp, "starts"), filepath.Join(tmp, "mark"), filepath.Join(tmp, "gate")
	env := []string{"LOOPR_E2E_STARTS=" + starts, "LOOPR_E2E_MERGE_MARK=" + mark, "LOOPR_E2E_MERGE_GATE=" + gate, "LOOPR_E2E_NO_CLASH=1"}
	d := startDaemonEnv(t, r, env...)
	ok(t, r.dir, "add", "--type", "plan", "--title", "durable", "--task", "three tasks")
	waitEvery(t, 120*time.Second, slowPoll, "three tasks merging, the first one's merge.validate held open", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		n := 0
		for _, l := range list(t, r) {
			if l.Type == loop.Ralph && l.Status == loop.Merging {
				n++
			}
		}
		b, _ := os.ReadFile(mark)
		return n == 3 && strings.HasPrefix(string(b), "1 ")
	})
	d.crash(t)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemonEnv(t, r, env...)
	waitTreeDone(t, r, d2)
	loops := list(t, r)
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		count[strings.Fields(line)[0]]++
	}
	for _, l := range loops {
		if l.Status != loop.Complete || l.Iteration != 1 || count[l.ID] != 1 {
			t.Errorf("%s %q: %s at iteration %d after %d agent starts; want complete at 1 after 1", l.Type, l.Title, l.Status, l.Iteration, count[l.ID])
		}
	}
	marks, _ := os.ReadFile(mark)
	if !strings.Contains(string(marks), "1 ") || !strings.Contains(string(marks), "\n2 ") {
		t.Errorf("merge.validate runs by daemon %q; want runs by daemon 1 (killed) and daemon 2", marks)
	}
	branch := planBranch(t, loops)
	firstParents := checkFirstParents(t, r, branch)
	for _, l := range ralphs(loops) {
		checkEvidence(t, r, l, firstParents)
		if got := r.git(t, "show", branch+":out/"+l.ID+".txt"); !strings.Contains(got, "iteration 1") {
			t.Errorf("task %q's file on the plan branch = %q", l.Title, got)
		}
	}
	runs := map[string]int{}
	for _, e := range journal(t, stopCleanly(t, r, d2)) {
		if e.Kind == loop.EventTransition && e.To == loop.Running {
			runs[e.Loop]++
		}
	}
	for _, l := range ralphs(loops) {
		if runs[l.ID] != 1 {
			t.Errorf("task %q ran %d times (pending → running), want 1", l.Title, runs[l.ID])
		}
	}
}

// cleanAgent leaves an ignored file on iteration 1, which its task's
// validate accepts, and a tracked one after.
const cleanAgent = `#!/bin/sh
cat >/dev/null
mkdir -p out
echo "notes of iteration $LOOPR_ITERATION" >>notes.md
if [ "$LOOPR_ITERATION" = 1 ]; then
	echo generated >"out/$LOOPR_LOOP_ID.gen"
else
	echo committed >"out/$LOOPR_LOOP_ID.txt"
fi
`

// TestValidateInClean: with validate_in: clean, a pass that depends on a
// file the agent left out of the commit (an ignored one) fails in the
// fresh checkout of the commit and is sent back saying so; the next
// iteration, which commits what it needs, passes in both places, and the
// evidence names both.
func TestValidateInClean(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte(cleanAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	validate := `test -f out/$LOOPR_LOOP_ID.gen || test -f out/$LOOPR_LOOP_ID.txt`
	r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  preset: command
  command: ["sh", %q]
loops:
  ralph: {max_iterations: 5, validate: [%q], validate_in: clean}
storage:
  disk_quota_min_gb: 0
`, script, validate))
	if err := os.WriteFile(filepath.Join(r.dir, ".gitignore"), []byte("*.gen\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git(t, "add", ".gitignore")
	r.git(t, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "commit", "-q", "-m", "ignore generated files")
	d := startDaemon(t, r)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "clean", "--task", "make it pass", "--json"), &l)
	id := l.ID
	waitEvery(t, 60*time.Second, slowPoll, "the task to finish", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		l = show(t, r, id)
		return l.Status.Terminal()
	})
	if l.Status != loop.Complete || l.Iteration != 2 {
		t.Fatalf("task %s at iteration %d (reason %q); want complete at 2", l.Status, l.Iteration, l.Reason)
	}
	if p := iterFile(r, l.ID, 2, "prompt.md"); !strings.Contains(p, "validate_in: clean") || !strings.Contains(p, "not in a fresh checkout") {
		t.Errorf("the second prompt does not say the clean checkout failed:\n%s", p)
	}
	if log := iterFile(r, l.ID, 1, "validation-clean.log"); !strings.Contains(log, "exit 1") {
		t.Errorf("iteration 1's validation-clean.log = %q, want the failing run", log)
	}
	where := map[string]bool{}
	for _, e := range l.Evidence {
		if e.ExitCode == 0 && e.Commit == l.Commit && e.Commit != "" {
			where[e.Where] = true
		}
	}
	if !where[loop.WhereWorktree] || !where[loop.WhereClean] {
		t.Errorf("evidence %+v (commit %s); want passing runs in the worktree and the clean checkout, on the commit", l.Evidence, l.Commit)
	}
}

// TestMergeFinishedByAnotherWorker: two daemons share an etcd store and
// the repository (two homes). The one whose merge queue validates the
// first passed task (merge.validate held open) is SIGKILLed; the other,
// once the dead worker's etcd lock lapses, lands every task: no agent runs
// twice, and merge.validate ran on both workers.
func TestMergeFinishedByAnotherWorker(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	storeYML := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: /loopr/queue\nworker:\n  lease_ttl_secs: 4\n", srv.Endpoint())
	r := newRepo(t, queueConfig(t, 1)+storeYML)
	tmp := t.TempDir()
	starts, mark, gate := filepath.Join(tmp, "starts"), filepath.Join(tmp, "mark"), filepath.Join(tmp, "gate")
	env := []string{"LOOPR_E2E_STARTS=" + starts, "LOOPR_E2E_MERGE_MARK=" + mark, "LOOPR_E2E_MERGE_GATE=" + gate, "LOOPR_E2E_NO_CLASH=1"}
	daemons := []*daemonProc{startDaemonEnv(t, r, env...), startDaemonHome(t, r, filepath.Join(tmp, "b"), env...)}
	waitFor(t, 15*time.Second, "two workers registered", func() bool {
		c := status(t, r).Cluster
		return c != nil && len(c.Workers) == 2
	})
	ok(t, r.dir, "add", "--type", "plan", "--title", "shared", "--task", "three tasks")
	var validating *daemonProc
	waitEvery(t, 120*time.Second, slowPoll, "three tasks merging, one worker's merge.validate held open", func() bool {
		for _, d := range daemons {
			if d.exited() {
				t.Fatalf("daemon %d exited:\n%s", d.n, tail(d.output(), 40))
			}
		}
		n := 0
		for _, l := range list(t, r) {
			if l.Type == loop.Ralph && l.Status == loop.Merging {
				n++
			}
		}
		b, _ := os.ReadFile(mark)
		for _, d := range daemons {
			if strings.HasPrefix(string(b), fmt.Sprintf("%d ", d.n)) {
				validating = d
			}
		}
		return n == 3 && validating != nil
	})
	validating.crash(t)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := daemons[0]
	if other == validating {
		other = daemons[1]
	}
	waitTreeDone(t, r, other)
	count := map[string]int{}
	b, _ := os.ReadFile(starts)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		count[strings.Fields(line)[0]]++
	}
	loops := list(t, r)
	for _, l := range loops {
		if l.Iteration != 1 || count[l.ID] != 1 {
			t.Errorf("%s %q at iteration %d after %d agent starts; want 1 and 1", l.Type, l.Title, l.Iteration, count[l.ID])
		}
	}
	if marks, _ := os.ReadFile(mark); !strings.Contains(string(marks), fmt.Sprintf("%d ", other.n)) {
		t.Errorf("merge.validate runs by daemon %q; want runs by the surviving daemon %d too", marks, other.n)
	}
	branch := planBranch(t, loops)
	firstParents := checkFirstParents(t, r, branch)
	for _, l := range ralphs(loops) {
		checkEvidence(t, r, l, firstParents)
	}
}
