package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
)

// TestTreeRunsToCompletion drives the real daemon and a scripted agent
// through a whole plan in a git repository (issue 3, item 1): plan → 2
// specs → 4 phases → 8 ralph loops, all complete, one child per artifact
// section, every ralph's file merged onto the plan branch, the user's
// checkout untouched. One task fails validation once and passes on
// iteration 2 with the failure in its second prompt; one agent call answers
// "429 … retry-after: 2", which `loopr status` shows as a shared backoff
// that costs no iteration and during which nothing starts.
func TestTreeRunsToCompletion(t *testing.T) {
	t.Parallel()
	began := time.Now()
	r := newRepo(t, treeConfig(t, 3, validateCmd(t), "tree"))
	before := r.checkout(t)
	d := startDaemon(t, r)

	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Build the e2e widget", "--json"), &plan)

	// Follow `loopr status` until nothing is left to run, keeping what it
	// said while the rate limit lasted; quickly until the backoff is over.
	var limited []api.Status
	backoffOver := false
	every := func() time.Duration {
		if backoffOver {
			return slowPoll()
		}
		return poll
	}
	waitEvery(t, 60*time.Second, every, "the plan tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		st := status(t, r)
		if st.RateLimited {
			limited = append(limited, st)
		}
		backoffOver = len(limited) > 0 && !st.RateLimited
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	loops := list(t, r)
	if gotPlan := checkTree(t, loops); gotPlan.ID != plan.ID {
		t.Fatalf("tree root %s, want the plan %s", gotPlan.ID, plan.ID)
	}

	// The 429: the first spec call. It is visible in status while it lasts,
	// honours retry-after (2s, more than initial_backoff_secs 1), and costs
	// no iteration: the attempt is kept aside in iteration 001.
	raw, err := os.ReadFile(filepath.Join(r.home, "e2e-429", "loop"))
	if err != nil {
		t.Fatalf("the agent never answered 429: %v", err)
	}
	limitedID := strings.TrimSpace(string(raw))
	fi, err := os.Stat(filepath.Join(r.home, "e2e-429", "loop"))
	if err != nil {
		t.Fatal(err)
	}
	hitAt := fi.ModTime()
	var resumeAt time.Time
	if len(limited) == 0 {
		t.Errorf("loopr status never showed rate_limited during the 2s backoff")
	} else {
		st := limited[0]
		resumeAt = st.ResumeAt
		// (Hits may already read 0: a call in flight before the 429 that
		// succeeds resets the count, not the backoff.)
		if resumeAt.IsZero() || !resumeAt.Equal(st.RateLimit.BackoffUntil) {
			t.Errorf("status while rate limited: resume_at %v, rate_limit.backoff_until %v; want the time work resumes in both", resumeAt, st.RateLimit.BackoffUntil)
		}
		if wait := resumeAt.Sub(hitAt); wait < 1900*time.Millisecond || wait > 4*time.Second {
			t.Errorf("resume_at is %s after the 429, want about the 2s of retry-after", wait)
		}
		t.Logf("rate limited: %d status samples showed it, resume_at %s after the 429", len(limited), resumeAt.Sub(hitAt).Round(time.Millisecond))
	}
	rl := show(t, r, limitedID)
	if rl.Type != loop.Spec || rl.Status != loop.Complete || rl.Iteration != 1 {
		t.Errorf("rate-limited loop: %s %s iteration %d; want a complete spec at iteration 1 (a 429 spends no iteration)", rl.Type, rl.Status, rl.Iteration)
	}
	if log := iterFile(r, limitedID, 1, "attempt-1/agent.log"); !strings.Contains(log, "429 Too Many Requests") {
		t.Errorf("iteration 001/attempt-1/agent.log of the rate-limited loop = %q, want the 429 answer kept", log)
	}

	// The fragile task: rejected by validation once, then passed with the
	// failure in its second prompt.
	var fragile loop.Loop
	for _, l := range loops {
		switch {
		case l.Title == "Fragile task":
			if fragile.ID != "" {
				t.Errorf("two fragile tasks: %s and %s", fragile.ID, l.ID)
			}
			fragile = l
		case l.Iteration != 1:
			t.Errorf("loop %s (%s %q) ended at iteration %d, want 1; feedback:\n%s", l.ID, l.Type, l.Title, l.Iteration, l.Feedback)
		}
	}
	if fragile.ID == "" {
		t.Fatalf("no task titled \"Fragile task\":\n%s", describe(loops))
	}
	failure := "e2e-validate: out/" + fragile.ID + ".txt still contains BROKEN"
	if fragile.Iteration != 2 {
		t.Errorf("fragile task ended at iteration %d, want 2", fragile.Iteration)
	}
	if v := iterFile(r, fragile.ID, 1, "validation.log"); !strings.Contains(v, failure) {
		t.Errorf("iteration 1 validation.log lacks %q:\n%s", failure, v)
	}
	if p := iterFile(r, fragile.ID, 1, "prompt.md"); strings.Contains(p, failure) {
		t.Errorf("iteration 1 prompt already holds the failure")
	}
	if p := iterFile(r, fragile.ID, 2, "prompt.md"); !strings.Contains(p, failure) {
		t.Errorf("iteration 2 prompt lacks the failure text %q of iteration 1:\n%s", failure, p)
	}

	// The code: every ralph's file on the plan branch, the fixed version of
	// the fragile one; finished worktrees gone; the user's checkout as it was.
	planBranch := gitflow.BranchName(plan.ID, plan.Title)
	files := strings.Fields(r.git(t, "ls-tree", "-r", "--name-only", planBranch))
	for _, l := range loops {
		if l.Type == loop.Ralph && !slices.Contains(files, "out/"+l.ID+".txt") {
			t.Errorf("out/%s.txt (ralph %q) is not on branch %s: %q", l.ID, l.Title, planBranch, files)
		}
	}
	if got, want := r.git(t, "show", planBranch+":out/"+fragile.ID+".txt"), "done by "+fragile.ID+" iteration 2"; got != want {
		t.Errorf("fragile task's file on the plan branch = %q, want %q", got, want)
	}
	entries, _ := os.ReadDir(filepath.Join(r.home, "worktrees"))
	for _, e := range entries {
		if slices.ContainsFunc(loops, func(l loop.Loop) bool { return l.ID == e.Name() }) {
			t.Errorf("worktree of finished loop %s was not removed", e.Name())
		}
	}
	if after := r.checkout(t); after != before {
		t.Errorf("the user's checkout changed: before %+v, after %+v", before, after)
	}

	s := stopCleanly(t, r, d)
	// The journal: the rate-limit event, and no loop started while the
	// backoff it announced lasted.
	var hit time.Time
	evs := journal(t, s)
	for _, ev := range evs {
		if ev.Kind == loop.EventRateLimit && ev.Loop == limitedID && ev.Iteration == 1 {
			hit = ev.Time
		}
	}
	if hit.IsZero() {
		t.Errorf("no rate_limit event for loop %s in the journal", limitedID)
	} else if !resumeAt.IsZero() {
		for _, ev := range evs {
			if ev.Kind == loop.EventTransition && ev.To == loop.Running && ev.Time.After(hit) && ev.Time.Before(resumeAt) {
				t.Errorf("loop %s started at %s, during the rate-limit backoff %s – %s", ev.Loop, ev.Time, hit, resumeAt)
			}
		}
	}
	t.Logf("wall time %s", time.Since(began).Round(time.Millisecond))
}
