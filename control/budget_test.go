package control_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/store"
)

// TestBudgetGateAndTreeUsage: a tree whose root's budget its descendants
// spent holds back every waiting loop of it with the budget reason (in the
// debug plan and in why), tree usage sums the tree, and SetBudget lifts it.
func TestBudgetGateAndTreeUsage(t *testing.T) {
	t.Parallel()
	svc := newService(t, 0)
	root := rec("r", "", loop.Complete, time.Hour)
	root.Type, root.Budget, root.Usage = loop.Plan, loop.Budget{USD: 1}, loop.Usage{CostUSD: 0.4, InputTokens: 10}
	done := rec("r-001", "r", loop.Complete, time.Minute)
	done.Usage = loop.Usage{CostUSD: 0.7, OutputTokens: 5}
	waiting := rec("r-002", "r", loop.Pending, 0)
	other := rec("o", "", loop.Pending, 0)
	if _, err := svc.Import([]loop.Loop{root, done, waiting, other}); err != nil {
		t.Fatal(err)
	}
	v, err := svc.Scheduler(now)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string][]string{}
	for _, r := range v.Rows {
		reasons[r.ID] = r.ReasonText
	}
	want := map[string][]string{"r-002": {"tree budget spent: $1.10 of $1.00 (root r)"}, "o": {}}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("debug scheduler reasons (-want +got):\n%s", diff)
	}
	why, err := svc.Why("r-002", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(why.Row.Reasons, ","), "budget") {
		t.Errorf("why reasons %v: want budget", why.Row.Reasons)
	}
	tu, err := svc.TreeUsageOf("r")
	if err != nil {
		t.Fatal(err)
	}
	if tu.Loops != 3 || tu.Usage != (loop.Usage{CostUSD: 1.1, InputTokens: 10, OutputTokens: 5}) {
		t.Errorf("tree usage %+v", tu)
	}
	usd := 2.0
	res, err := svc.SetBudget("r", api.BudgetRequest{USD: &usd})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loop.Budget.USD != 2 {
		t.Errorf("budget %+v", res.Loop.Budget)
	}
	if v, _ := svc.Scheduler(now); len(v.Rows) != 2 || !v.Rows[0].Runnable || !v.Rows[1].Runnable {
		t.Errorf("after raising the budget: rows %+v, want both runnable", v.Rows)
	}
	// Lowered below what the tree spent: the waiting loop waits for a person.
	res, err = svc.SetBudget("r", api.BudgetRequest{USD: ptr(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Held) != 1 || res.Held[0] != "r-002" {
		t.Errorf("held %v, want [r-002]", res.Held)
	}
	if l, _ := svc.Get("r-002"); l.Status != loop.NeedsHuman || l.Needs == nil || l.Needs.Reason != loop.NeedsBudget {
		t.Errorf("r-002: %s %+v", l.Status, l.Needs)
	}
	for _, bad := range []api.BudgetRequest{{}, {USD: ptr(-1.0)}, {Tokens: ptr(int64(-1))}} {
		if _, err := svc.SetBudget("r", bad); !control.IsUsage(err) {
			t.Errorf("SetBudget(%+v) = %v, want a usage error", bad, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestLimitsPerProfile: the rate-limit state is kept per agent profile; a
// store written by an older loopr (one shared state) reads as the default
// profile's; status lists each profile.
func TestLimitsPerProfile(t *testing.T) {
	t.Parallel()
	svc := newService(t, 0)
	legacy := ratelimit.State{Hits: 2, BackoffUntil: now.Add(time.Minute), Since: now}
	err := svc.Store.Update(func(tx *store.Tx) error { return tx.SetMeta(control.RateLimitKey, legacy) })
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Status(now)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.ProfileLimit{{Agent: config.DefaultProfile, Hits: 2, Limited: true, ResumeAt: now.Add(time.Minute), Since: now}}
	if diff := cmp.Diff(want, st.Profiles); diff != "" || !st.RateLimited {
		t.Errorf("status profiles (-want +got):\n%s", diff)
	}
	err = svc.Store.Update(func(tx *store.Tx) error {
		return control.SaveLimits(tx, map[string]ratelimit.State{"codex": {Hits: 1, BackoffUntil: now.Add(time.Hour)}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ = svc.Status(now); len(st.Profiles) != 1 || st.Profiles[0].Agent != "codex" {
		t.Errorf("after a save, profiles %+v: want codex alone (the shared key is no longer read)", st.Profiles)
	}
}

// TestNewLoopAgentAndBudget: --agent must name a profile; a root gets the
// tree default budget, a child its type's.
func TestNewLoopAgentAndBudget(t *testing.T) {
	t.Parallel()
	svc := newService(t, 0)
	cfg := svc.Config()
	cfg.Budget = config.Budget{USD: 5}
	ralph := cfg.Loops[loop.Ralph]
	ralph.Budget = config.Budget{Tokens: 1000}
	cfg.Loops[loop.Ralph] = ralph
	cfg.Agents = map[string]config.Agent{"codex": config.DefaultAgent()}
	if _, err := svc.Create(api.CreateRequest{Type: loop.Plan, Task: "x", Agent: "codx"}); err == nil ||
		err.Error() != `--agent: unknown agent profile "codx" (known: default, codex)` {
		t.Errorf("unknown agent: %v", err)
	}
	p, err := svc.Create(api.CreateRequest{Type: loop.Plan, Task: "x", Agent: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Agent != "codex" || p.Budget != (loop.Budget{USD: 5}) {
		t.Errorf("plan agent %q budget %+v", p.Agent, p.Budget)
	}
	r, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Budget != (loop.Budget{Tokens: 1000}) {
		t.Errorf("ralph budget %+v: want loops.ralph.budget", r.Budget)
	}
	r2, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "z", Budget: loop.Budget{USD: 0.5}})
	if err != nil || r2.Budget != (loop.Budget{USD: 0.5}) {
		t.Errorf("explicit budget: %+v %v", r2.Budget, err)
	}
}
