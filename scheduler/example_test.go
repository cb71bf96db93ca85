package scheduler_test

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

// The `loopr debug scheduler` table of seed 004, rebuilt from a snapshot.
func ExamplePlan() {
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	pending := func(id string, typ loop.Type, age time.Duration, depth, iteration int) *loop.Loop {
		return &loop.Loop{ID: id, Type: typ, Status: loop.Pending, Parent: "p-" + id, Depth: depth,
			Iteration: iteration, CreatedAt: now.Add(-age)}
	}
	snap := scheduler.Snapshot{
		Waiting: []scheduler.Candidate{
			{Loop: pending("1737802000", loop.Plan, 50*time.Minute, 0, 1), ParentStatus: loop.Running},
			{Loop: pending("1737802500", loop.Phase, 30*time.Minute, 2, 1), ParentStatus: loop.Complete},
			{Loop: pending("1737802700", loop.Ralph, 1*time.Minute, 3, 5), ParentStatus: loop.Complete},
			{Loop: pending("1737802800", loop.Ralph, 5*time.Minute, 3, 1), ParentStatus: loop.Complete},
		},
		Running: map[string]int{loop.Ralph: 4, loop.Phase: 2, loop.Spec: 1},
	}
	d := scheduler.Plan(snap, now, scheduler.DefaultPolicy())

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tRUNNABLE")
	for _, r := range d.Rows {
		runnable := "yes"
		if !r.Runnable {
			runnable = "no (" + r.Reasons[0].Text + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%dm\t%d\t%d\t%s\n", r.Loop.ID, r.Loop.Type, r.Score.Priority,
			r.Score.AgeMinutes, r.Score.Depth, r.Score.Iteration, runnable)
	}
	w.Flush()
	fmt.Printf("start %v; waiting %d, eligible %d, running %d, slots %d\n", d.Start, d.Waiting, d.Eligible, d.Running, d.Slots)
	// Output:
	// ID          TYPE   PRIORITY  AGE  DEPTH  ITER  RUNNABLE
	// 1737802800  ralph  135       5m   3      1     yes
	// 1737802500  phase  130       30m  2      1     yes
	// 1737802700  ralph  111       1m   3      5     yes
	// 1737802000  plan   90        50m  0      1     no (parent incomplete (running))
	// start [1737802800 1737802500 1737802700]; waiting 4, eligible 3, running 7, slots 43
}

// Capacity reasons carry their numbers. A full type cap does not hold back
// lower loops of other types, and during the rate-limit recovery ramp only
// one loop starts per plan.
func ExamplePlan_capacity() {
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	mk := func(id string, typ loop.Type, age time.Duration) scheduler.Candidate {
		return scheduler.Candidate{Loop: &loop.Loop{ID: id, Type: typ, Status: loop.Pending, Iteration: 1, CreatedAt: now.Add(-age)}}
	}
	p := scheduler.DefaultPolicy()
	p.MaxLoops = 12
	p.TypeCap[loop.Phase] = 8
	snap := scheduler.Snapshot{
		Waiting:   []scheduler.Candidate{mk("phase-1", loop.Phase, 30*time.Minute), mk("ralph-1", loop.Ralph, 2*time.Minute), mk("ralph-2", loop.Ralph, time.Minute), mk("plan-1", loop.Plan, time.Hour)},
		Running:   map[string]int{loop.Phase: 8, loop.Ralph: 1},
		RateLimit: ratelimit.State{Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(29 * time.Second)},
	}
	for _, r := range scheduler.Plan(snap, now, p).Rows {
		fmt.Printf("%-8s %3d  runnable=%-5v %v\n", r.Loop.ID, r.Score.Priority, r.Runnable, r.Reasons)
	}
	// Output:
	// phase-1  110  runnable=false [type cap phase 8/8]
	// ralph-1  102  runnable=true  []
	// ralph-2  101  runnable=false [rate-limit recovery: one start per poll]
	// plan-1    90  runnable=false [rate-limit recovery: one start per poll]
}

func ExampleScoreOf() {
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	p := scheduler.DefaultPolicy()
	for _, l := range []*loop.Loop{
		{ID: "A", Type: loop.Ralph, Depth: 3, Iteration: 1, CreatedAt: now.Add(-5 * time.Minute)},
		{ID: "B", Type: loop.Phase, Depth: 2, Iteration: 1, CreatedAt: now.Add(-30 * time.Minute)},
		{ID: "C", Type: loop.Ralph, Depth: 3, Iteration: 5, CreatedAt: now.Add(-1 * time.Minute)},
	} {
		s := scheduler.ScoreOf(l, now, p)
		fmt.Printf("Loop %s: Base: %d + Age: %d + Depth: %d + Retry: -%d = %d\n",
			l.ID, s.Base, s.AgeBoost, s.DepthBoost, s.RetryPenalty, s.Priority)
	}
	// Output:
	// Loop A: Base: 100 + Age: 5 + Depth: 30 + Retry: -0 = 135
	// Loop B: Base: 80 + Age: 30 + Depth: 20 + Retry: -0 = 130
	// Loop C: Base: 100 + Age: 1 + Depth: 30 + Retry: -20 = 111
}

func ExampleScore_Explain() {
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	p := scheduler.DefaultPolicy()
	l := &loop.Loop{ID: "01JD3K", Type: loop.Ralph, Depth: 3, Iteration: 5, CreatedAt: now.Add(-time.Minute)}
	fmt.Println(scheduler.ScoreOf(l, now, p).Explain(p.Weights))
	// Output:
	// priority 111 = base 100 + age 1 (1 min × 1, max 50) + depth 30 (3 × 10) − retry 20 ((5−1) × 5, max 30)
}
