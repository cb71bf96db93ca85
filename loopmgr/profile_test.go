package loopmgr

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// profiles adds an agent profile codex (preset codex) that the default
// profile falls back to when fallback is true.
func profiles(fallback bool) func(*config.Config) {
	return func(c *config.Config) {
		a := config.DefaultAgent()
		a.Preset = "codex"
		c.Agents = map[string]config.Agent{"codex": a}
		if fallback {
			c.Agent.Fallback = []string{"codex"}
		}
		c.RateLimit.InitialBackoffSecs = 60
		c.RateLimit.MaxBackoffSecs = 60
	}
}

// onClaude reports whether an iteration ran on the claude preset (the
// default profile; codex is the other).
func onClaude(j runner.Job) bool { return j.Settings.Preset == "claude" }

func TestLimitedProfileBlocksOnlyItsLoops(t *testing.T) {
	t.Parallel()
	h := newHarness(t, profiles(false), func(_ context.Context, j runner.Job) runner.Result {
		if onClaude(j) {
			return runner.Result{Outcome: runner.RateLimited, RateLimitAfter: time.Hour}
		}
		return runner.Result{Outcome: runner.Passed}
	})
	h.start()
	onClaude := h.create(api.CreateRequest{Type: loop.Ralph, Task: "on claude"})
	h.waitFor("claude limited", func() bool { return h.limit(config.DefaultProfile).Blocked(time.Now()) })
	onCodex := h.create(api.CreateRequest{Type: loop.Ralph, Task: "on codex", Agent: "codex"})
	h.waitFor("the codex loop completes", func() bool { return h.status(onCodex.ID) == loop.Complete })
	if got := h.get(onClaude.ID); got.Status != loop.Pending || got.Iteration != 1 || got.RateLimitStreak != 1 {
		t.Errorf("claude loop: status %s iteration %d streak %d, want pending 1 1", got.Status, got.Iteration, got.RateLimitStreak)
	}
	if h.limit("codex").Hits != 0 {
		t.Errorf("codex state %+v: want untouched", h.limit("codex"))
	}
	why, err := h.svc.Why(onClaude.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(why.Row.ReasonText, ";"), "agent default rate limited for") {
		t.Errorf("why reasons %v: want the rate_limited reason to name the profile", why.Row.ReasonText)
	}
}

func TestFallbackTakesTheNextIteration(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ran []string
	h := newHarness(t, profiles(true), func(_ context.Context, j runner.Job) runner.Result {
		mu.Lock()
		ran = append(ran, j.Settings.Agent[0]+"/"+j.Settings.Preset)
		mu.Unlock()
		if onClaude(j) {
			return runner.Result{Outcome: runner.RateLimited, RateLimitAfter: time.Hour}
		}
		return runner.Result{Outcome: runner.Passed}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	h.waitFor("complete", func() bool { return h.status(l.ID) == loop.Complete })
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"claude/claude", "codex/codex"}; strings.Join(ran, " ") != strings.Join(want, " ") {
		t.Errorf("iterations ran on %v, want %v", ran, want)
	}
	if got := h.get(l.ID); got.Iteration != 1 || got.RateLimitStreak != 0 {
		t.Errorf("iteration %d streak %d, want 1 0 (the limit spent nothing; the pass reset the streak)", got.Iteration, got.RateLimitStreak)
	}
	// The journal says which agent ran the iteration the fallback took.
	var msgs []string
	if err := h.st.View(func(tx *store.Tx) error {
		evs, err := tx.Events(l.ID)
		for _, ev := range evs {
			msgs = append(msgs, ev.Message)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(msgs, func(m string) bool {
		return strings.HasPrefix(m, "iteration 1 started on agent ") && strings.Contains(m, "is rate limited")
	}) {
		t.Errorf("events %q: none says the fallback agent ran the iteration", msgs)
	}
}

func TestTransientRetriesThenFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.Retry.TransientMax = 2; c.Retry.BackoffBaseSecs = 0 },
		func(_ context.Context, j runner.Job) runner.Result {
			return runner.Result{Outcome: runner.Failed, Transient: true, Reason: "API error 529 overloaded"}
		})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 2})
	h.waitFor("failed", func() bool { return h.status(l.ID) == loop.Failed })
	// 2 iterations × (1 + 2 retries) runs.
	if n := h.fake.count(); n != 6 {
		t.Errorf("%d runs, want 6 (each of 2 iterations: one run and 2 transient retries)", n)
	}
	if got := h.get(l.ID); !strings.Contains(got.Reason, "transient provider error, 2 retries spent") {
		t.Errorf("reason %q: want the transient retries named", got.Reason)
	}
}

func TestMaxConsecutiveRateLimitsParks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		c.RateLimit.MaxConsecutive = 3
		c.RateLimit.InitialBackoffSecs = 1
		c.RateLimit.MaxBackoffSecs = 1
		c.RateLimit.RecoveryPeriodSecs = 0
	}, func(_ context.Context, j runner.Job) runner.Result {
		return runner.Result{Outcome: runner.RateLimited, RateLimitUntil: time.Now().Add(-time.Second)} // a reset already past
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	h.waitFor("parked", func() bool { return h.status(l.ID) == loop.Failed })
	got := h.get(l.ID)
	if got.Iteration != 1 || got.RateLimitStreak != 3 || !strings.Contains(got.Reason, "rate limited 3 times in a row") {
		t.Errorf("iteration %d streak %d reason %q", got.Iteration, got.RateLimitStreak, got.Reason)
	}
	if n := h.fake.count(); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
	// A reset starts the count again.
	if _, err := h.svc.Act(l.ID, api.ActionReset, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := h.get(l.ID); got.RateLimitStreak != 0 || got.TransientRetries != 0 {
		t.Errorf("after reset: streak %d transient %d, want 0 0", got.RateLimitStreak, got.TransientRetries)
	}
	h.mgr.Wake()
	h.waitFor("parked again after 3 more", func() bool { return h.fake.count() == 6 && h.status(l.ID) == loop.Failed })
}

func TestUsageSumsOnTheRecord(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		mu.Lock()
		defer mu.Unlock()
		n++
		start := time.Now()
		res := runner.Result{Outcome: runner.Failed, Reason: "tests fail", AgentStart: start, AgentEnd: start.Add(1500 * time.Millisecond),
			Usage: loop.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 1000, CostUSD: 0.25}}
		switch n {
		case 2:
			res.Outcome, res.RateLimitAfter = runner.RateLimited, time.Millisecond
			res.RateLimitUntil = time.Now()
		case 3:
			res.Outcome = runner.Passed
		}
		return res
	})
	h.cfg.RateLimit.InitialBackoffSecs, h.cfg.RateLimit.RecoveryPeriodSecs = 1, 0
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	h.waitFor("complete", func() bool { return h.status(l.ID) == loop.Complete })
	got := h.get(l.ID).Usage
	want := loop.Usage{InputTokens: 300, OutputTokens: 30, CacheReadTokens: 3000, CostUSD: 0.75, AgentSeconds: 4.5}
	if got != want {
		t.Errorf("usage %+v, want %+v (failed, rate-limited and passed runs all count)", got, want)
	}
	var today loop.Usage
	h.st.View(func(tx *store.Tx) (err error) { today, err = control.UsageToday(tx, time.Now()); return err })
	if today != want {
		t.Errorf("usage today %+v, want %+v", today, want)
	}
}

func TestBudgetStopsTheTreeAndRaisingResumes(t *testing.T) {
	t.Parallel()
	// Each failure reads differently: three alike would be no progress.
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		return runner.Result{Outcome: runner.Failed, Reason: "not yet: " + words[j.Loop.Iteration%len(words)], Usage: loop.Usage{CostUSD: 0.6}}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", Budget: loop.Budget{USD: 1}, MaxIterations: 10})
	h.waitFor("needs_human", func() bool { return h.status(l.ID) == loop.NeedsHuman })
	got := h.get(l.ID)
	if got.Needs == nil || got.Needs.Reason != loop.NeedsBudget || got.Iteration != 3 || h.fake.count() != 2 {
		t.Fatalf("needs %+v iteration %d runs %d: want budget after 2 runs ($1.20 of $1.00)", got.Needs, got.Iteration, h.fake.count())
	}
	if !strings.Contains(got.Needs.Detail, "$1.20 of $1.00") {
		t.Errorf("detail %q", got.Needs.Detail)
	}
	usd := 1.5
	res, err := h.svc.SetBudget(l.ID, api.BudgetRequest{USD: &usd})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Resumed) != 1 || res.Resumed[0] != l.ID {
		t.Errorf("resumed %v, want [%s]", res.Resumed, l.ID)
	}
	h.mgr.Wake()
	h.waitFor("needs_human again", func() bool { return h.status(l.ID) == loop.NeedsHuman && h.fake.count() == 3 })
	if got := h.get(l.ID); got.Usage.CostUSD < 1.79 || !strings.Contains(got.Needs.Detail, "of $1.50") {
		t.Errorf("usage %+v needs %+v", got.Usage, got.Needs)
	}
}

func TestLongLimitNeedsHuman(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) { c.RateLimit.NotifyAfterSecs = 60 }, func(_ context.Context, j runner.Job) runner.Result {
		return runner.Result{Outcome: runner.Passed}
	})
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	// The default profile is limited for a week (a weekly limit).
	now := time.Now()
	err := h.st.Update(func(tx *store.Tx) error {
		return control.SaveLimits(tx, map[string]ratelimit.State{config.DefaultProfile: {Hits: 1, Since: now, LastHit: now, BackoffUntil: now.Add(7 * 24 * time.Hour)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFor("needs_human", func() bool { return h.status(l.ID) == loop.NeedsHuman })
	if got := h.get(l.ID); got.Needs == nil || got.Needs.Reason != loop.NeedsLimit || !strings.Contains(got.Needs.Detail, "agent default limited") {
		t.Fatalf("needs %+v", got.Needs)
	}
	// The limit ends (a person switched accounts and cleared it): back to pending, and it runs.
	err = h.st.Update(func(tx *store.Tx) error {
		return control.SaveLimits(tx, map[string]ratelimit.State{})
	})
	if err != nil {
		t.Fatal(err)
	}
	h.waitFor("complete", func() bool { h.mgr.Wake(); return h.status(l.ID) == loop.Complete })
}

// TestCancelledRunStillCounts: a run a user cancels still spent what its
// agent reported.
func TestCancelledRunStillCounts(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	h := newHarness(t, nil, func(ctx context.Context, j runner.Job) runner.Result {
		close(started)
		<-ctx.Done()
		return runner.Result{Outcome: runner.Cancelled, Usage: loop.Usage{CostUSD: 0.4, OutputTokens: 7}}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	<-started
	if _, err := h.svc.Act(l.ID, api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	h.mgr.Stop([]string{l.ID})
	h.waitFor("the usage recorded", func() bool { return h.get(l.ID).Usage.CostUSD == 0.4 })
	if got := h.get(l.ID); got.Status != loop.Cancelled || got.Usage.OutputTokens != 7 {
		t.Errorf("status %s usage %+v", got.Status, got.Usage)
	}
}
