package loopmgr

import (
	"context"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := Fingerprint("validate `go test ./...` exited 1",
		"Iteration 2 of 10 failed.\n--- FAIL: TestX (0.03s)\n    /tmp/TestX123/a_test.go:12: got 41, want 42\nat 2026-11-25T09:12:01Z commit 3f9a2c1d")
	same := Fingerprint("validate `go test ./...` exited 1",
		"Iteration 3 of 10 failed.\n--- FAIL: TestX (0.05s)\n    /tmp/TestX987/a_test.go:12: got 43, want 44\nat 2026-11-25T10:00:59Z commit 77be01ff0")
	other := Fingerprint("validate `go test ./...` exited 1",
		"Iteration 3 of 10 failed.\n--- FAIL: TestY (0.05s)\n    /tmp/TestY987/b_test.go:12: undefined: Foo")
	otherCmd := Fingerprint("validate `go vet ./...` exited 1",
		"Iteration 2 of 10 failed.\n--- FAIL: TestX (0.03s)\n    /tmp/TestX123/a_test.go:12: got 41, want 42\nat 2026-11-25T09:12:01Z commit 3f9a2c1d")
	agentA := Fingerprint("agent exited 1", `{"type":"result","session_id":"3f0c2a9e-4b1d-4c2e-9a7f-0d1e2f3a4b5c","id":"msg_01XyZAbc9QwErTy","request_id":"req_011CSabc123def","error":"overloaded","duration_ms":5123}`)
	agentB := Fingerprint("agent exited 1", `{"type":"result","session_id":"9a8b7c6d-1e2f-4a3b-8c9d-ef0123456789","id":"msg_01PqRsTuv4LmNoP","request_id":"req_011CSxyz789ghi","error":"overloaded","duration_ms":912}`)
	agentC := Fingerprint("agent exited 1", `{"type":"result","session_id":"9a8b7c6d-1e2f-4a3b-8c9d-ef0123456789","id":"msg_01PqRsTuv4LmNoP","request_id":"req_011CSxyz789ghi","error":"invalid_request","duration_ms":912}`)
	if agentA != agentB || agentB == agentC {
		t.Errorf("structured agent output: same error with other ids %s vs %s (want equal), other error %s (want different)", agentA, agentB, agentC)
	}
	if base != same {
		t.Errorf("the same failure with other numbers, paths, times and hashes: fingerprints %s and %s differ", base, same)
	}
	if base == other || base == otherCmd {
		t.Errorf("different failures share fingerprint %s", base)
	}
}

func TestStallsAndRepeatsPark(t *testing.T) {
	t.Parallel()
	stalled := runner.Result{Outcome: runner.Failed, Stalled: true, Reason: "stalled: no output or file change for 10m", Feedback: "no output"}
	failed := func(s string) runner.Result {
		return runner.Result{Outcome: runner.Failed, Reason: "validate `go test` exited 1", Feedback: s}
	}
	for _, tc := range []struct {
		name      string
		limit     int
		results   []runner.Result // by iteration; the last repeats
		status    loop.Status
		reason    loop.NeedsReason
		iteration int
	}{
		{"two stalls in a row", 0, []runner.Result{stalled}, loop.NeedsHuman, loop.NeedsStalled, 2},
		{"stalls not in a row", 0, []runner.Result{stalled, failed("x"), stalled, {Outcome: runner.Passed}}, loop.Complete, "", 4},
		{"the same failure three times", 3, []runner.Result{failed("FAIL at 0x1f2e3d4c5b in /tmp/a1/x.go:12 after 3.2s")}, loop.NeedsHuman, loop.NeedsNoProgress, 3},
		{"the same failure, detection off", 0, []runner.Result{failed("FAIL")}, loop.Failed, "", 5},
		{"the same failure up to max_iterations", 3, []runner.Result{failed("FAIL: TestA"), failed("FAIL: TestB"), failed("FAIL: TestC"), failed("FAIL: TestD"), failed("FAIL: TestD")}, loop.Failed, "", 5},
		{"the third same failure is the last iteration", 3, []runner.Result{failed("FAIL: TestA"), failed("FAIL: TestB"), failed("FAIL")}, loop.Failed, "", 5},
		{"different failures", 3, []runner.Result{failed("FAIL: TestA"), failed("FAIL: TestB"), failed("FAIL: TestC"), failed("FAIL: TestD"), failed("FAIL: TestE")}, loop.Failed, "", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *config.Config) { c.Retry.NoProgressLimit = tc.limit; c.Retry.BackoffBaseSecs = 0 },
				func(_ context.Context, j runner.Job) runner.Result {
					return tc.results[min(j.Loop.Iteration, len(tc.results))-1]
				})
			h.start()
			l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 5})
			h.waitFor(string(tc.status), func() bool { return h.status(l.ID) == tc.status })
			got := h.get(l.ID)
			if got.Iteration != tc.iteration {
				t.Errorf("iteration %d; want %d", got.Iteration, tc.iteration)
			}
			if tc.reason == "" {
				if got.Needs != nil {
					t.Errorf("needs %+v; want none", got.Needs)
				}
				return
			}
			if got.Needs == nil || got.Needs.Reason != tc.reason || got.Needs.Detail == "" {
				t.Fatalf("needs %+v; want reason %s with a detail", got.Needs, tc.reason)
			}
			if !strings.Contains(got.Feedback, tc.results[0].Reason) {
				t.Errorf("feedback %q lacks the failure for the next prompt", got.Feedback)
			}
		})
	}
}

func TestQuestionKeepsTheIterationAndTheAnswerReachesTheNextRun(t *testing.T) {
	t.Parallel()
	var h *harness
	h = newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		if j.Loop.Answer == "" {
			return runner.Result{Outcome: runner.Failed, Reason: "the agent asked a question", Question: "Which port?"}
		}
		if j.Loop.Answer != "9090" || j.Loop.Iteration != 1 {
			return runner.Result{Outcome: runner.Failed, Reason: "wrong answer " + j.Loop.Answer}
		}
		return runner.Result{Outcome: runner.Passed}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 3})
	h.waitFor("needs_human", func() bool { return h.status(l.ID) == loop.NeedsHuman })
	got := h.get(l.ID)
	if got.Iteration != 1 || got.Needs == nil || got.Needs.Reason != loop.NeedsQuestion || got.Needs.Detail != "Which port?" {
		t.Fatalf("after the question: iteration %d needs %+v", got.Iteration, got.Needs)
	}
	if _, err := h.svc.Act(l.ID, api.ActionAnswer, api.ActionRequest{Answer: "9090"}); err != nil {
		t.Fatal(err)
	}
	h.mgr.Wake()
	h.waitFor("complete", func() bool { return h.status(l.ID) == loop.Complete })
	if got := h.get(l.ID); got.Answer != "" || got.Iteration != 1 || h.fake.count() != 2 {
		t.Errorf("after the answered run: answer %q iteration %d runs %d; want cleared, 1, 2", got.Answer, got.Iteration, h.fake.count())
	}
}
