package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
)

// abuseConfig runs testdata/abuseagent.sh for every type.
func abuseConfig(t *testing.T, maxIterations int) string {
	t.Helper()
	argv, _ := json.Marshal([]string{"sh", abs(t, "testdata/abuseagent.sh")})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  command: %s
  timeout_secs: 20
loops:
  plan: {require_approval: false, max_iterations: %[2]d}
  spec: {max_iterations: %[2]d}
  phase: {max_iterations: %[2]d}
  ralph: {max_iterations: %[2]d, validate: []}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, argv, maxIterations)
}

// starts counts the agent runs of loop id in the agents' log.
func starts(r repo, id string) int {
	b, _ := os.ReadFile(filepath.Join(r.home, "e2e-starts.log"))
	n := 0
	for l := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == id {
			n++
		}
	}
	return n
}

// TestOversizedSectionSpendsIterations: a plan whose one section is over
// the task size limit passed validation, then spawning its children failed
// and the loop was requeued at the same iteration with no backoff, forever
// (~120 agent runs in 20 s on main). The section is now checked while
// validating: each run spends an iteration, the loop parks at
// max_iterations, and the feedback names the size and the limit.
func TestOversizedSectionSpendsIterations(t *testing.T) {
	t.Parallel()
	r := newRepo(t, abuseConfig(t, 3))
	d := startDaemon(t, r)
	var p loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Plan, "--title", "bigsection", "--task", "too big", "--json"), &p)
	waitFor(t, 30*time.Second, "the oversized plan to fail", func() bool {
		if n := starts(r, p.ID); n > 3 {
			t.Fatalf("%d agent starts for a loop with max_iterations 3", n)
		}
		return show(t, r, p.ID).Status.Terminal()
	})
	l := show(t, r, p.ID)
	if l.Status != loop.Failed || l.Iteration != 3 {
		t.Errorf("status %s at iteration %d, want failed at 3 (reason %q)", l.Status, l.Iteration, l.Reason)
	}
	// The section is its heading line and its body: 24 + 300000 bytes.
	want := "section 1 'bigsection' is 300024 bytes; the limit is 262144"
	if !strings.Contains(l.Reason, want) || !strings.Contains(l.Feedback, want) {
		t.Errorf("reason %q / feedback %q do not name the size (%q)", l.Reason, clipS(l.Feedback, 300), want)
	}
	// A second chance to misbehave: no run after the loop parked.
	time.Sleep(2 * time.Second)
	if n := starts(r, p.ID); n != 3 {
		t.Errorf("%d agent starts, want exactly 3 (max_iterations)", n)
	}
	for _, k := range list(t, r) {
		if k.Parent == p.ID {
			t.Errorf("child %s spawned from an oversized artifact", k.ID)
		}
	}
	stopCleanly(t, r, d)
}

func clipS(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestGitAbuseNeverLosesWork: agents that leave a stale index.lock, delete
// their .git file, commit on a detached HEAD or another branch, or commit
// on unrelated history. On main the commit failed or landed elsewhere with
// only a warning, the unchanged branch merged "already up to date", the
// loop completed and its worktree (with the work) was deleted. Now every
// repairable case completes with its file on the plan branch, and the
// unrepairable one fails its iterations with the reason as feedback, its
// work kept (worktree and a ref).
func TestGitAbuseNeverLosesWork(t *testing.T) {
	t.Parallel()
	r := newRepo(t, abuseConfig(t, 2))
	d := startDaemon(t, r)
	modes := []string{"lock", "rmgit", "detach", "branch", "orphan", "clean"}
	plans := map[string]string{}
	for _, m := range modes {
		var p loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", loop.Plan, "--title", m, "--task", "abuse git: "+m, "--json"), &p)
		plans[m] = p.ID
	}
	waitFor(t, 90*time.Second, "every plan tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited\n%s", tail(d.output(), 40))
		}
		return settled(status(t, r))
	})
	all := list(t, r)
	ralphOf := func(plan string) loop.Loop {
		byID := map[string]loop.Loop{}
		for _, l := range all {
			byID[l.ID] = l
		}
		for _, l := range all {
			if l.Type != loop.Ralph {
				continue
			}
			for cur := l; cur.Parent != ""; cur = byID[cur.Parent] {
				if cur.Parent == plan {
					return l
				}
			}
		}
		t.Fatalf("no ralph loop under plan %s:\n%s", plan, describe(all))
		return loop.Loop{}
	}
	for _, m := range modes {
		t.Run(m, func(t *testing.T) {
			rl := ralphOf(plans[m])
			file := gitflow.BranchName(plans[m], m) + ":out/" + rl.ID + ".txt"
			if m == "orphan" {
				// Iteration 1's work went to unrelated history: not on the
				// branch, so the iteration fails, says where the work is,
				// and keeps it; iteration 2 behaves and completes.
				if rl.Status != loop.Complete || rl.Iteration != 2 {
					t.Fatalf("ralph %s at iteration %d, want complete at 2 (reason %q)\n%s", rl.Status, rl.Iteration, rl.Reason, grepLines(d.output(), rl.ID))
				}
				if !strings.Contains(rl.Feedback, "does not descend from "+gitflow.BranchName(rl.ID, rl.Title)) || !strings.Contains(rl.Feedback, "refs/loopr/stray/"+rl.ID) {
					t.Errorf("feedback %q does not say where iteration 1's work went", clipS(rl.Feedback, 600))
				}
				if got := r.git(t, "show", "refs/loopr/stray/"+rl.ID+":out/"+rl.ID+".txt"); got != "done by "+rl.ID {
					t.Errorf("iteration 1's stray work = %q, want it kept", got)
				}
			}
			if want := map[bool]int{true: 2, false: 1}[m == "orphan"]; rl.Status != loop.Complete || rl.Iteration != want {
				t.Fatalf("ralph %s at iteration %d, want complete at %d (reason %q)\n%s", rl.Status, rl.Iteration, want, rl.Reason, grepLines(d.output(), rl.ID))
			}
			// The rule: a complete loop's work is on the plan branch.
			if got := r.git(t, "show", file); got != "done by "+rl.ID {
				t.Errorf("%s = %q, want the agent's work", file, got)
			}
		})
	}
	stopCleanly(t, r, d)
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
