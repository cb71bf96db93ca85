package loopmgr

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// TestAgentSecondsCountedOnce: the runner reports the agent's wall time in
// the usage it wrote to usage.json; the record adds it once, not again
// from the agent's start and end.
func TestAgentSecondsCountedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		start := time.Now()
		return runner.Result{Outcome: runner.Passed, AgentStart: start, AgentEnd: start.Add(1500 * time.Millisecond),
			Usage: loop.Usage{InputTokens: 10, AgentSeconds: 1.5}}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	h.waitFor("complete", func() bool { return h.status(l.ID) == loop.Complete })
	if got := h.get(l.ID).Usage; got != (loop.Usage{InputTokens: 10, AgentSeconds: 1.5}) {
		t.Errorf("usage %+v, want the runner's agent_seconds 1.5 once", got)
	}
}

// TestUnrecordableChargeSpendsTheIteration: when the store refuses every
// transaction that carries an iteration's charge (here today's total is
// unreadable: a corrupt usage_day), the result cannot be recorded, and
// recording the failure with the same charge fails the same way. The
// iteration is spent without the charge instead of being requeued at the
// same iteration for free, which would rerun the agent forever: with
// max_iterations 3 the agent starts 3 times and the loop is parked.
func TestUnrecordableChargeSpendsTheIteration(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		return runner.Result{Outcome: runner.Failed, Reason: "tests fail " + strings.Repeat("!", j.Loop.Iteration),
			Usage: loop.Usage{InputTokens: 100, CostUSD: 0.1}}
	})
	if err := h.st.Update(func(tx *store.Tx) error {
		return tx.SetMeta(control.UsageDayKey, map[string]any{"day": 5, "usage": "garbled"})
	}); err != nil {
		t.Fatal(err)
	}
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 3})
	start := time.Now()
	for h.status(l.ID) != loop.Failed {
		if n := h.fake.count(); n > 3 {
			t.Fatalf("%d agent starts for a loop of max_iterations 3: the iteration is requeued for free (at %d)", n, h.get(l.ID).Iteration)
		}
		if time.Since(start) > testslack.Scale(30*time.Second) {
			t.Fatalf("timed out: loop %s at iteration %d after %d starts", h.status(l.ID), h.get(l.ID).Iteration, h.fake.count())
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := h.get(l.ID)
	if n := h.fake.count(); n != 3 || got.Iteration != 3 {
		t.Errorf("%d starts, iteration %d; want 3 and 3", n, got.Iteration)
	}
	if !strings.Contains(got.Reason, "max_iterations 3 reached") || !strings.Contains(got.Reason, "usage could not be recorded") {
		t.Errorf("reason %q; want max_iterations reached, naming the usage that could not be recorded", got.Reason)
	}
}
