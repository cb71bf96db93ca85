package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// orderAgent is the scripted agent of the issue-21 tests (order between
// siblings, done means done). Every task writes a file named by its title
// and lists, in req/<loop id>, the files it needs: orderValidate fails the
// task while one is missing from its worktree, as a test suite fails on a
// module another task has not merged yet.
//
//	orderAgent seq    a spec of three phases with no **Depends on:** lines
//	                  (Module, Use, Docs), one task each: Use needs
//	                  module.txt, Docs needs module.txt and use.txt.
//	orderAgent deps   one phase of four tasks: two and three take 3 s, four
//	                  says **Depends on:** 2, 3 and needs two.txt and three.txt.
//	orderAgent cancel one phase of three tasks: quick; stuck, which runs
//	                  until it is cancelled; after, which depends on stuck.
const orderAgent = `#!/bin/sh
mode=$1
cat >/dev/null
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case "$LOOPR_LOOP_TYPE" in
plan)
	printf '# Plan: p\n\n## Specs\n\n### Spec 1: Only spec\nDo it.\n' >"$LOOPR_ARTIFACT" ;;
spec)
	if [ "$mode" = seq ]; then
		printf '# Spec: s\n\n## Phases\n\n### Phase 1: Module\nWrite it.\n\n### Phase 2: Use\nUse it.\n\n### Phase 3: Docs\nDescribe it.\n' >"$LOOPR_ARTIFACT"
	else
		printf '# Spec: s\n\n## Phases\n\n### Phase 1: Only phase\nDo it.\n' >"$LOOPR_ARTIFACT"
	fi ;;
phase)
	case $mode in
	seq) printf '# Phase: %s\n\n## Tasks\n\n### Task 1: %s\nDo it.\n' "$title" "$title" >"$LOOPR_ARTIFACT" ;;
	deps) printf '# Phase: f\n\n## Tasks\n\n### Task 1: one\nx\n\n### Task 2: two\nx\n\n### Task 3: three\nx\n\n### Task 4: four\nNeeds two and three.\n\n**Depends on:** 2, 3\n' >"$LOOPR_ARTIFACT" ;;
	cancel) printf '# Phase: f\n\n## Tasks\n\n### Task 1: quick\nx\n\n### Task 2: stuck\nx\n\n### Task 3: after\nx\n\n**Depends on:** stuck\n' >"$LOOPR_ARTIFACT" ;;
	esac ;;
*)
	mkdir -p req
	case $title in
	Use) echo module.txt >"req/$LOOPR_LOOP_ID" ;;
	Docs) printf 'module.txt\nuse.txt\n' >"req/$LOOPR_LOOP_ID" ;;
	two|three) sleep 3 ;;
	four) printf 'two.txt\nthree.txt\n' >"req/$LOOPR_LOOP_ID" ;;
	stuck) echo "stuck forever"; sleep 300 ;;
	esac
	name=$(echo "$title" | tr 'A-Z' 'a-z')
	echo "written by $LOOPR_LOOP_ID at iteration $LOOPR_ITERATION" >"$name.txt" ;;
esac
`

// orderValidate fails a task whose req/<id> names a file its worktree lacks.
const orderValidate = `#!/bin/sh
[ -f "req/$LOOPR_LOOP_ID" ] || exit 0
for f in $(cat "req/$LOOPR_LOOP_ID"); do
	[ -f "$f" ] || { echo "missing $f: the work this task builds on is not here"; exit 1; }
done
`

// orderRepo makes a workspace whose agent is orderAgent in mode.
func orderRepo(t *testing.T, mode string) repo {
	t.Helper()
	dir := t.TempDir()
	agent, validate := filepath.Join(dir, "agent.sh"), filepath.Join(dir, "validate.sh")
	for path, body := range map[string]string{agent: orderAgent, validate: orderValidate} {
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd, _ := json.Marshal([]string{"sh", agent, mode})
	return newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 10
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  preset: command
  command: %s
  timeout_secs: 600
loops:
  plan: {require_approval: false}
  ralph: {max_iterations: 5, validate: [%q]}
storage:
  disk_quota_min_gb: 0
`, cmd, "sh "+validate))
}

// runTree adds a plan and waits until every loop of its tree is settled
// (nothing pending, running or waiting for approval), at most 3 minutes.
func runTree(t *testing.T, r repo, d *daemonProc) []loop.Loop {
	t.Helper()
	ok(t, r.dir, "add", "--type", "plan", "--title", "order", "--task", "build it in order")
	waitEvery(t, 180*time.Second, slowPoll, "the tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		ls := list(t, r)
		return len(ls) > 1 && settled(status(t, r))
	})
	return list(t, r)
}

// failedIterations counts the iterations of ralph loops that did not pass:
// one per iteration past the first, and the last of a loop not complete.
func failedIterations(loops []loop.Loop) int {
	n := 0
	for _, l := range loops {
		if l.Type != loop.Ralph {
			continue
		}
		n += l.Iteration - 1
		if l.Status != loop.Complete {
			n++
		}
	}
	return n
}

// TestSequentialPhasesBuildOnEachOther: a spec's phases, with no
// **Depends on:** line, run one after another (loops.spec.children:
// sequential): phase 2's task starts from a plan branch that has phase
// 1's merged work, so no iteration fails for missing work. On a loopr
// where siblings all start at once, Use and Docs fail on module.txt.
func TestSequentialPhasesBuildOnEachOther(t *testing.T) {
	t.Parallel()
	r := orderRepo(t, "seq")
	d := startDaemon(t, r)
	loops := runTree(t, r, d)
	if n := failedIterations(loops); n != 0 {
		t.Errorf("%d task iterations failed, want 0:\n%s", n, describe(loops))
	}
	phases := map[string]loop.Loop{}
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("loop %s (%s %q) is %s, want complete", l.ID, l.Type, l.Title, l.Status)
		}
		if l.Type == loop.Phase {
			phases[l.Title] = l
		}
	}
	// The record says the order: Use after Module, Docs after Use.
	for title, after := range map[string]string{"Module": "", "Use": "Module", "Docs": "Use"} {
		want := []string(nil)
		if after != "" {
			want = []string{phases[after].ID}
		}
		if got := phases[title].DependsOn; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("phase %s: depends_on %v, want %v (%s)", title, got, want, after)
		}
		if phases[title].SubtreeDoneAt.IsZero() {
			t.Errorf("phase %s: no subtree_done_at", title)
		}
	}
	if use, mod := phases["Use"], phases["Module"]; !use.StartedAt.After(mod.SubtreeDoneAt.Add(-time.Millisecond)) {
		t.Errorf("phase Use started %v, before Module's tasks were done (%v)", use.StartedAt, mod.SubtreeDoneAt)
	}
}

// TestDependsOnLine: a task with **Depends on:** 2, 3 in a phase whose
// tasks start at once (phase: parallel) waits for tasks 2 and 3 and passes
// at its first iteration, with their files; why says after which loops it
// ran.
func TestDependsOnLine(t *testing.T) {
	t.Parallel()
	r := orderRepo(t, "deps")
	d := startDaemon(t, r)
	loops := runTree(t, r, d)
	byTitle := map[string]loop.Loop{}
	for _, l := range loops {
		byTitle[l.Title] = l
	}
	four := byTitle["four"]
	if four.Status != loop.Complete || four.Iteration != 1 {
		t.Fatalf("task four: %s at iteration %d, want complete at 1:\n%s", four.Status, four.Iteration, describe(loops))
	}
	if got, want := fmt.Sprint(four.DependsOn), fmt.Sprint([]string{byTitle["two"].ID, byTitle["three"].ID}); got != want {
		t.Errorf("task four: depends_on %s, want %s", got, want)
	}
	for _, dep := range []string{"two", "three"} {
		if !four.StartedAt.After(byTitle[dep].FinishedAt.Add(-time.Millisecond)) {
			t.Errorf("task four started %v, before task %s finished (%v)", four.StartedAt, dep, byTitle[dep].FinishedAt)
		}
	}
	if one := byTitle["one"]; !one.StartedAt.Before(byTitle["two"].FinishedAt) {
		t.Errorf("task one started %v, after task two finished (%v): a phase's tasks start at once", one.StartedAt, byTitle["two"].FinishedAt)
	}
	if n := failedIterations(loops); n != 0 {
		t.Errorf("%d task iterations failed, want 0:\n%s", n, describe(loops))
	}
}

// TestCancelledLoopCompletesTree: a cancelled loop counts as done for the
// task that depends on it (which starts then, and its journal says so),
// and a tree whose loops are all complete or cancelled is done:
// tree_complete fires, naming the cancelled loop and the branch.
func TestCancelledLoopCompletesTree(t *testing.T) {
	t.Parallel()
	r := orderRepo(t, "cancel")
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "order", "--task", "finish what can be finished")
	var stuck loop.Loop
	waitEvery(t, 120*time.Second, slowPoll, "quick complete and stuck running", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		quick := false
		for _, l := range list(t, r) {
			switch {
			case l.Title == "quick" && l.Status == loop.Complete:
				quick = true
			case l.Title == "stuck" && l.Status == loop.Running:
				stuck = l
			}
		}
		return quick && stuck.ID != ""
	})
	ok(t, r.dir, "cancel", stuck.ID)
	var plan, after loop.Loop
	waitFor(t, 60*time.Second, "every loop complete or cancelled", func() bool {
		all := list(t, r)
		for _, l := range all {
			if !l.Status.Settled() {
				return false
			}
			switch {
			case l.Type == loop.Plan:
				plan = l
			case l.Title == "after":
				after = l
			}
		}
		return true
	})
	s := stopCleanly(t, r, d)
	var msgs []string
	for _, ev := range journal(t, s) {
		if ev.Kind == loop.EventTreeComplete {
			msgs = append(msgs, ev.Message)
		}
	}
	if after.Status != loop.Complete {
		t.Errorf("task after: %s, want complete (its dependency was cancelled)", after.Status)
	}
	noted := false
	for _, ev := range journal(t, s) {
		noted = noted || ev.Loop == after.ID && strings.Contains(ev.Message, "it depends on "+stuck.ID+` "stuck", cancelled: counted as done`)
	}
	if !noted {
		t.Errorf("the journal of task after does not say its dependency was cancelled")
	}
	if len(msgs) != 1 || msgs[0] == "" {
		t.Fatalf("tree_complete events: %q, want one", msgs)
	}
	for _, want := range []string{"plan " + plan.ID + " done", "complete or cancelled (1 cancelled: " + stuck.ID + ` "stuck")`, "is ready to land: loopr land"} {
		if !strings.Contains(msgs[0], want) {
			t.Errorf("tree_complete %q lacks %q", msgs[0], want)
		}
	}
}
