package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
plan)  printf '# Plan: p\n\n## Specs\n\n### Spec 1: Only spec\nDo it.\n' >"$LOOPR_ARTIFACT" ;;
spec)  printf '# Spec: s\n\n## Phases\n\n### Phase 1: Only phase\nDo it.\n' >"$LOOPR_ARTIFACT" ;;
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: One\nDo it.\n\n### Task 2: Two\nDo it too.\n' >"$LOOPR_ARTIFACT" ;;
*)     echo "work of $LOOPR_LOOP_ID, iteration $LOOPR_ITERATION" >>NOTES.md ;;
esac
`

// TestRepeatedMergeConflictNeedsYou: with merge.refresh off, a task whose
// branch conflicts with the plan branch the same way on every iteration
// counts toward retry.no_progress_limit like any other repeated failure,
// and lands in needs_human (no_progress) after 3 iterations instead of
// spending all 10. (With refresh on, TestFreshBaseTwoTasksAppend.)
func TestRepeatedMergeConflictNeedsYou(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte(conflictAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	agent, _ := json.Marshal([]string{"sh", script})
	r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
  no_progress_limit: 3
agent:
  preset: command
  command: %s
loops:
  plan: {require_approval: false}
  ralph: {max_iterations: 10, validate: []}
merge:
  refresh: off
storage:
  disk_quota_min_gb: 0
`, agent))
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
