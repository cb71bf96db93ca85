package loopmgr

import (
	"testing"

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
