package loopmgr

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/api"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
)

func TestResumeFor(t *testing.T) {
	t.Parallel()
	sess := func(ended string) *loop.Session {
		return &loop.Session{ID: "s-1", Profile: "default", Workdir: "/w/x", Iteration: 2, Ended: ended}
	}
	for _, tc := range []struct {
		desc    string
		s       *loop.Session
		mode    string
		profile string
		workdir string
		want    bool
	}{
		{"no session", nil, config.ResumeInterrupted, "default", "/w/x", false},
		{"a crash left it running", sess(""), config.ResumeInterrupted, "default", "/w/x", true},
		{"interrupted", sess(loop.SessionInterrupted), config.ResumeInterrupted, "default", "/w/x/", true},
		{"rate limited", sess(loop.SessionRateLimited), config.ResumeInterrupted, "default", "/w/x", true},
		{"answered", sess(loop.SessionAsked), config.ResumeInterrupted, "default", "/w/x", true},
		{"failed, interrupted mode", sess(loop.SessionFailed), config.ResumeInterrupted, "default", "/w/x", false},
		{"failed, always", sess(loop.SessionFailed), config.ResumeAlways, "default", "/w/x", true},
		{"passed", sess(loop.SessionPassed), config.ResumeAlways, "default", "/w/x", false},
		{"off", sess(loop.SessionInterrupted), config.ResumeOff, "default", "/w/x", false},
		{"a fallback profile starts fresh", sess(loop.SessionRateLimited), config.ResumeInterrupted, "codex", "/w/x", false},
		{"another worktree", sess(loop.SessionInterrupted), config.ResumeInterrupted, "default", "/w/y", false},
		{"an id that is a flag", &loop.Session{ID: "--evil", Profile: "default", Workdir: "/w/x"}, config.ResumeAlways, "default", "/w/x", false},
	} {
		got := resumeFor(loop.Loop{Session: tc.s}, tc.mode, tc.profile, tc.workdir)
		if (got != nil) != tc.want || got != nil && (got.Session != "s-1" || got.Why != tc.s.Ended) {
			t.Errorf("%s: resumeFor() = %+v, want resume %v", tc.desc, got, tc.want)
		}
	}
}

func TestSessionEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res      runner.Result
		stopping bool
		want     string
	}{
		{runner.Result{Outcome: runner.Passed}, false, loop.SessionPassed},
		{runner.Result{Outcome: runner.RateLimited}, false, loop.SessionRateLimited},
		{runner.Result{Outcome: runner.Cancelled}, true, loop.SessionInterrupted},
		{runner.Result{Outcome: runner.Failed, Stalled: true}, false, loop.SessionInterrupted},
		{runner.Result{Outcome: runner.Failed, Transient: true}, false, loop.SessionInterrupted},
		{runner.Result{Outcome: runner.Failed, Question: "which?"}, false, loop.SessionAsked},
		{runner.Result{Outcome: runner.Failed}, false, loop.SessionFailed},
	} {
		if got := sessionEnded(tc.res, tc.stopping); got != tc.want {
			t.Errorf("sessionEnded(%+v, %v) = %q, want %q", tc.res, tc.stopping, got, tc.want)
		}
	}
}

// TestSessionCarriedBetweenRuns: the session a run reports is on the
// record with how the run ended, and the next run's job resumes it after
// a rate limit and an answer, not after a failure (mode interrupted) nor
// after a reset.
func TestSessionCarriedBetweenRuns(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var resumes []string // each run's Resume: "why:session", or "fresh"
	h := newHarness(t, func(c *config.Config) {
		c.RateLimit.InitialBackoffSecs, c.RateLimit.MaxBackoffSecs, c.RateLimit.RecoveryPeriodSecs = 1, 1, 0
	}, func(_ context.Context, j runner.Job) runner.Result {
		mu.Lock()
		defer mu.Unlock()
		r := "fresh"
		if j.Resume != nil {
			r = j.Resume.Why + ":" + j.Resume.Session
		}
		resumes = append(resumes, r)
		switch len(resumes) {
		case 1:
			return runner.Result{Outcome: runner.RateLimited, Session: "s-1", RateLimitAfter: time.Millisecond}
		case 2:
			return runner.Result{Outcome: runner.Failed, Session: "s-1", Question: "blue or green?", Reason: "asked"}
		case 3:
			return runner.Result{Outcome: runner.Failed, Session: "s-1", Reason: "validate failed", Feedback: "test failed"}
		}
		return runner.Result{Outcome: runner.Failed, Session: "s-2", Reason: "validate failed"}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 2})
	h.waitFor("the question", func() bool { return h.status(l.ID) == loop.NeedsHuman })
	if s := h.get(l.ID).Session; s == nil || s.ID != "s-1" || s.Ended != loop.SessionAsked || s.Profile != config.DefaultProfile || s.Workdir != h.home {
		t.Fatalf("session after the question = %+v, want s-1 asked on the default profile in %s", s, h.home)
	}
	if _, err := h.svc.Act(l.ID, api.ActionAnswer, api.ActionRequest{Answer: "green"}); err != nil {
		t.Fatal(err)
	}
	h.mgr.Wake()
	h.waitFor("parked", func() bool { return h.status(l.ID) == loop.Failed })
	if _, err := h.svc.Act(l.ID, api.ActionReset, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	if s := h.get(l.ID).Session; s != nil {
		t.Errorf("session after a reset = %+v, want none", s)
	}
	h.mgr.Wake()
	h.waitFor("parked again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(resumes) >= 6 && h.status(l.ID) == loop.Failed
	})
	mu.Lock()
	defer mu.Unlock()
	want := []string{"fresh", "rate_limited:s-1", "asked:s-1", "fresh", "fresh", "fresh"}
	if diff := cmp.Diff(want, resumes); diff != "" {
		t.Errorf("the runs' resumes mismatch (-want +got):\n%s", diff)
	}
}
