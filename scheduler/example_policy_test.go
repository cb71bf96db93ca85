package scheduler_test

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// Fair queuing between two plans: plan A's tasks are older (higher
// priority), but A has already used 120 s and B nothing, so B goes first;
// each admission charges 60 s and the order is re-evaluated. A conflict
// keeps a3 waiting while a1 holds the same file.
func ExamplePlan_fairness() {
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	task := func(id, root, conflictKey string, age time.Duration) scheduler.Candidate {
		return scheduler.Candidate{
			Loop: &loop.Loop{ID: id, Type: loop.Ralph, Status: loop.Pending, Parent: "phase-" + root, Depth: 3,
				Iteration: 1, CreatedAt: now.Add(-age), ConflictKey: conflictKey},
			ParentStatus: loop.Complete, Root: root,
		}
	}
	p := scheduler.DefaultPolicy()
	p.MaxLoops = 5
	p.ConflictGroup = map[string]string{loop.Ralph: "code"}
	p.Fairness = scheduler.FairnessPolicy{Enabled: true, Alpha: 0.3, IdleTTL: time.Hour}
	snap := scheduler.Snapshot{
		Waiting: []scheduler.Candidate{
			task("a1", "A", "main.go", 9*time.Minute), task("a2", "A", "", 8*time.Minute), task("a3", "A", "main.go", 7*time.Minute),
			task("b1", "B", "", 2*time.Minute), task("b2", "B", "", time.Minute),
		},
		Fairness: scheduler.Fairness{Keys: map[string]scheduler.KeyUsage{"A": {Used: 120, Seen: now}, "B": {Used: 0, Seen: now}}},
	}
	d := scheduler.Plan(snap, now, p)
	for _, r := range d.Rows {
		verdict := "start"
		if !r.Runnable {
			verdict = r.Reasons[0].Text
		}
		fmt.Printf("%s key %s used %3.0f cost %.0f: %s\n", r.Loop.ID, r.Key, r.KeyUsed, r.Cost, verdict)
	}
	// Output:
	// b1 key B used   0 cost 60: start
	// b2 key B used  60 cost 60: start
	// a1 key A used 120 cost 60: start
	// a2 key A used 180 cost 60: start
	// a3 key A used 240 cost 60: conflict code/main.go: held by a1 (starting)
}
