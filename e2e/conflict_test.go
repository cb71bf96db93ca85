package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// conflictAgent plans one phase of two tasks that both append to NOTES.md:
// whichever merges second conflicts on every iteration.
const conflictAgent = `#!/bin/sh
cat >/dev/null
case "$LOOPR_LOOP_TYPE" in
` + onePhase + `
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: One\nDo it.\n\n### Task 2: Two\nDo it too.\n' >"$LOOPR_ARTIFACT" ;;
*)     echo "work of $LOOPR_LOOP_ID, iteration $LOOPR_ITERATION" >>NOTES.md ;;
esac
`

// onePhase are the case arms of a scripted agent's plan and spec loops:
// a plan of one spec of one phase.
const onePhase = `plan)  printf '# Plan: p\n\n## Specs\n\n### Spec 1: Only spec\nDo it.\n' >"$LOOPR_ARTIFACT" ;;
spec)  printf '# Spec: s\n\n## Phases\n\n### Phase 1: Only phase\nDo it.\n' >"$LOOPR_ARTIFACT" ;;`

// TestRepeatedMergeConflictNeedsYou: with merge.refresh off, a task whose
// branch conflicts with the plan branch the same way on every iteration
// counts toward retry.no_progress_limit like any other repeated failure,
// and lands in needs_human (no_progress) after 3 iterations instead of
// spending all 10. (With refresh on, TestFreshBaseTwoTasksAppend.)
func TestRepeatedMergeConflictNeedsYou(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", conflictAgent)
	r := newRepo(t, freshConfig(t, script, "{max_iterations: 10, validate: []}",
		"merge:\n  refresh: off\n"))
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "notes", "--task", "write notes")
	var loser loop.Loop
	waitEvery(t, 90*time.Second, slowPoll, "one task complete and the other out of pending", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		done, other := 0, 0
		for _, l := range list(t, r) {
			if l.Type != loop.Ralph {
				continue
			}
			switch l.Status {
			case loop.Complete:
				done++
			case loop.NeedsHuman, loop.Failed:
				other++
				loser = l
			}
		}
		return done == 1 && other == 1
	})
	if loser.Status != loop.NeedsHuman || loser.Needs == nil || loser.Needs.Reason != loop.NeedsNoProgress || loser.Iteration != 3 {
		t.Fatalf("the conflicting task: status %s needs %+v iteration %d/%d; want needs_human (no_progress) at 3/10\n%s",
			loser.Status, loser.Needs, loser.Iteration, loser.MaxIterations, describe(list(t, r)))
	}
	if !strings.Contains(loser.Needs.Detail, "conflicts in NOTES.md") {
		t.Errorf("needs.detail %q does not name the conflict", loser.Needs.Detail)
	}
}
