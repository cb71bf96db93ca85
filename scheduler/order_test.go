package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// TestPlanOrder: Policy.Order replaces the order, ties in seed 004's
// order, and leaves the gates alone: a loop its parent holds still waits,
// and the caps count as before. nil keeps seed 004's order.
func TestPlanOrder(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	mk := func(id, typ string) *loop.Loop {
		return &loop.Loop{ID: id, Type: typ, Status: loop.Pending, Iteration: 1, CreatedAt: now.Add(-time.Minute)}
	}
	held := mk("held", loop.Ralph)
	held.Parent = "p"
	snap := scheduler.Snapshot{Running: map[string]int{}, Waiting: []scheduler.Candidate{
		{Loop: mk("r1", loop.Ralph)}, {Loop: mk("r2", loop.Ralph)}, {Loop: mk("plan1", loop.Plan)},
		{Loop: held, ParentStatus: loop.Running}, {Loop: mk("spec1", loop.Spec)},
	}}
	p := scheduler.DefaultPolicy()
	p.MaxLoops = 2
	order := func(d scheduler.Decision) string {
		var ids []string
		for _, r := range d.Rows {
			ids = append(ids, r.Loop.ID)
		}
		return strings.Join(ids, " ") + " | " + strings.Join(d.Start, " ")
	}
	if got, want := order(scheduler.Plan(snap, now, p)), "held r1 r2 spec1 plan1 | r1 r2"; got != want {
		t.Errorf("seed order %q, want %q", got, want)
	}
	// Lowest base first: plans, then specs, then the ralph loops by id.
	p.Order = func(a, b *scheduler.Row) int { return a.Score.Base - b.Score.Base }
	d := scheduler.Plan(snap, now, p)
	if got, want := order(d), "plan1 spec1 held r1 r2 | plan1 spec1"; got != want {
		t.Errorf("Order %q, want %q", got, want)
	}
	for _, r := range d.Rows {
		switch r.Loop.ID {
		case "held":
			if r.Runnable || !r.Has(scheduler.ParentIncomplete) || !r.Has(scheduler.GlobalCap) {
				t.Errorf("held: %+v, want parent_incomplete and global_cap", r.Reasons)
			}
		case "r1", "r2":
			if r.Runnable || !r.Has(scheduler.GlobalCap) {
				t.Errorf("%s: %+v, want global_cap", r.Loop.ID, r.Reasons)
			}
		}
	}
}
