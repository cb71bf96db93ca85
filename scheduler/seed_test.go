package scheduler_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// now is the fixed instant every test evaluates at.
var now = time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)

// mk builds a pending loop created age ago.
func mk(id string, typ loop.Type, age time.Duration, depth, iteration int) *loop.Loop {
	return &loop.Loop{
		ID: id, Type: typ, Status: loop.Pending, Depth: depth,
		Iteration: iteration, MaxIterations: 100,
		CreatedAt: now.Add(-age), UpdatedAt: now.Add(-age),
	}
}

// child sets l's parent.
func child(l *loop.Loop, parent string) *loop.Loop {
	l.Parent = parent
	return l
}

// ready wraps loops as candidates whose dependencies are satisfied.
func ready(ls ...*loop.Loop) []scheduler.Candidate {
	cs := make([]scheduler.Candidate, len(ls))
	for i, l := range ls {
		cs[i] = scheduler.Candidate{Loop: l}
		if l.Parent != "" {
			cs[i].ParentStatus = loop.Complete
		}
	}
	return cs
}

func ids(rows []scheduler.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Loop.ID
	}
	return out
}

func priorities(rows []scheduler.Row) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = r.Score.Priority
	}
	return out
}

// TestScoreOfSeedExamples checks every priority worked out in seed 004.
func TestScoreOfSeedExamples(t *testing.T) {
	t.Parallel()
	p := scheduler.DefaultPolicy()
	tests := []struct {
		name string
		loop *loop.Loop
		want scheduler.Score
	}{
		// Example Priority Calculation.
		{"Loop A: ralph 5m depth 3 iter 1", mk("A", loop.Ralph, 5*time.Minute, 3, 1),
			scheduler.Score{Priority: 135, Base: 100, AgeMinutes: 5, AgeBoost: 5, Depth: 3, DepthBoost: 30, Iteration: 1}},
		{"Loop B: phase 30m depth 2 iter 1", mk("B", loop.Phase, 30*time.Minute, 2, 1),
			scheduler.Score{Priority: 130, Base: 80, AgeMinutes: 30, AgeBoost: 30, Depth: 2, DepthBoost: 20, Iteration: 1}},
		{"Loop C: ralph 1m depth 3 iter 5", mk("C", loop.Ralph, time.Minute, 3, 5),
			scheduler.Score{Priority: 111, Base: 100, AgeMinutes: 1, AgeBoost: 1, Depth: 3, DepthBoost: 30, Iteration: 5, RetryPenalty: 20}},

		// Scenario 1: new leaf vs old branch.
		{"scenario 1 Ralph-X: new, depth 3", mk("X", loop.Ralph, 0, 3, 1),
			scheduler.Score{Priority: 130, Base: 100, Depth: 3, DepthBoost: 30, Iteration: 1}},
		{"scenario 1 Spec-Y: 40m, depth 1", mk("Y", loop.Spec, 40*time.Minute, 1, 1),
			scheduler.Score{Priority: 110, Base: 60, AgeMinutes: 40, AgeBoost: 40, Depth: 1, DepthBoost: 10, Iteration: 1}},

		// Scenario 2: very old plan vs new ralph.
		{"scenario 2 Plan-A: 50m, max age boost", mk("A", loop.Plan, 50*time.Minute, 0, 1),
			scheduler.Score{Priority: 90, Base: 40, AgeMinutes: 50, AgeBoost: 50, Iteration: 1}},
		{"scenario 2 Plan-A: 50+m stays at the max", mk("A", loop.Plan, 75*time.Minute, 0, 1),
			scheduler.Score{Priority: 90, Base: 40, AgeMinutes: 75, AgeBoost: 50, Iteration: 1}},
		{"scenario 2 Ralph-B: new, depth 3", mk("B", loop.Ralph, 0, 3, 1),
			scheduler.Score{Priority: 130, Base: 100, Depth: 3, DepthBoost: 30, Iteration: 1}},

		// Scenario 3: struggling loop gets deprioritised.
		{"scenario 3 Ralph-X: iteration 7, penalty capped", mk("X", loop.Ralph, 10*time.Minute, 3, 7),
			scheduler.Score{Priority: 110, Base: 100, AgeMinutes: 10, AgeBoost: 10, Depth: 3, DepthBoost: 30, Iteration: 7, RetryPenalty: 30}},
		{"scenario 3 Ralph-Y: fresh", mk("Y", loop.Ralph, 10*time.Minute, 3, 1),
			scheduler.Score{Priority: 140, Base: 100, AgeMinutes: 10, AgeBoost: 10, Depth: 3, DepthBoost: 30, Iteration: 1}},

		// Scenario 4: completing a branch.
		{"scenario 4 Ralph-004: 5m", mk("004", loop.Ralph, 5*time.Minute, 3, 1),
			scheduler.Score{Priority: 135, Base: 100, AgeMinutes: 5, AgeBoost: 5, Depth: 3, DepthBoost: 30, Iteration: 1}},
		{"scenario 4 Ralph-005: 2m", mk("005", loop.Ralph, 2*time.Minute, 3, 1),
			scheduler.Score{Priority: 132, Base: 100, AgeMinutes: 2, AgeBoost: 2, Depth: 3, DepthBoost: 30, Iteration: 1}},

		// test_priority_calculation: ralph, 5 minutes, no parent.
		{"test_priority_calculation", mk("T", loop.Ralph, 5*time.Minute, 0, 1),
			scheduler.Score{Priority: 105, Base: 100, AgeMinutes: 5, AgeBoost: 5, Iteration: 1}},

		// test_age_boost_prevents_starvation.
		{"age cap: young ralph", mk("young", loop.Ralph, 0, 0, 1),
			scheduler.Score{Priority: 100, Base: 100, Iteration: 1}},
		{"age cap: plan 1h old", mk("old", loop.Plan, time.Hour, 0, 1),
			scheduler.Score{Priority: 90, Base: 40, AgeMinutes: 60, AgeBoost: 50, Iteration: 1}},
		{"age cap: plan 2h old still 90", mk("old", loop.Plan, 2*time.Hour, 0, 1),
			scheduler.Score{Priority: 90, Base: 40, AgeMinutes: 120, AgeBoost: 50, Iteration: 1}},

		// Depth-First Behavior tree.
		{"tree Ralph A1a1 depth 3", mk("A1a1", loop.Ralph, 0, 3, 1),
			scheduler.Score{Priority: 130, Base: 100, Depth: 3, DepthBoost: 30, Iteration: 1}},
		{"tree Phase A1a depth 2", mk("A1a", loop.Phase, 0, 2, 1),
			scheduler.Score{Priority: 100, Base: 80, Depth: 2, DepthBoost: 20, Iteration: 1}},
		{"tree Spec A1 depth 1", mk("A1", loop.Spec, 0, 1, 1),
			scheduler.Score{Priority: 70, Base: 60, Depth: 1, DepthBoost: 10, Iteration: 1}},
		{"tree Plan A depth 0", mk("A", loop.Plan, 0, 0, 1),
			scheduler.Score{Priority: 40, Base: 40, Iteration: 1}},

		// Retry penalty ladder from "Fairness and Starvation Prevention".
		{"penalty: second iteration −5", mk("r2", loop.Ralph, 0, 0, 2),
			scheduler.Score{Priority: 95, Base: 100, Iteration: 2, RetryPenalty: 5}},
		{"penalty: fifth iteration −20", mk("r5", loop.Ralph, 0, 0, 5),
			scheduler.Score{Priority: 80, Base: 100, Iteration: 5, RetryPenalty: 20}},
		{"penalty: max −30", mk("r99", loop.Ralph, 0, 0, 99),
			scheduler.Score{Priority: 70, Base: 100, Iteration: 99, RetryPenalty: 30}},

		// Edges.
		{"age floors to whole minutes", mk("f", loop.Ralph, 5*time.Minute+59*time.Second, 0, 1),
			scheduler.Score{Priority: 105, Base: 100, AgeMinutes: 5, AgeBoost: 5, Iteration: 1}},
		{"created in the future clamps to 0", mk("fut", loop.Ralph, -3*time.Minute, 0, 1),
			scheduler.Score{Priority: 100, Base: 100, Iteration: 1}},
		{"unknown type has base 0", mk("u", "review", 0, 1, 1),
			scheduler.Score{Priority: 10, Depth: 1, DepthBoost: 10, Iteration: 1}},
		{"iteration 0 has no penalty", mk("z", loop.Ralph, 0, 0, 0),
			scheduler.Score{Priority: 100, Base: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scheduler.ScoreOf(tt.loop, now, p)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ScoreOf() mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

// TestPlanSeedOrders checks the order (and the starts) of every seed 004
// comparison when the loops are all runnable.
func TestPlanSeedOrders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		loops    []*loop.Loop
		maxLoops int // 0: the default 50
		wantIDs  []string
		wantPrio []int
		wantRun  []string
	}{
		{
			name: "example A, B, C",
			loops: []*loop.Loop{
				mk("C", loop.Ralph, time.Minute, 3, 5),
				mk("A", loop.Ralph, 5*time.Minute, 3, 1),
				mk("B", loop.Phase, 30*time.Minute, 2, 1),
			},
			wantIDs: []string{"A", "B", "C"}, wantPrio: []int{135, 130, 111}, wantRun: []string{"A", "B", "C"},
		},
		{
			name:    "scenario 1: new leaf beats old branch",
			loops:   []*loop.Loop{mk("Spec-Y", loop.Spec, 40*time.Minute, 1, 1), mk("Ralph-X", loop.Ralph, 0, 3, 1)},
			wantIDs: []string{"Ralph-X", "Spec-Y"}, wantPrio: []int{130, 110}, maxLoops: 1, wantRun: []string{"Ralph-X"},
		},
		{
			name:    "scenario 2: new ralph beats very old plan",
			loops:   []*loop.Loop{mk("Plan-A", loop.Plan, 55*time.Minute, 0, 1), mk("Ralph-B", loop.Ralph, 0, 3, 1)},
			wantIDs: []string{"Ralph-B", "Plan-A"}, wantPrio: []int{130, 90}, maxLoops: 1, wantRun: []string{"Ralph-B"},
		},
		{
			name:    "scenario 3: fresh loop beats struggling loop",
			loops:   []*loop.Loop{mk("Ralph-X", loop.Ralph, 10*time.Minute, 3, 7), mk("Ralph-Y", loop.Ralph, 10*time.Minute, 3, 1)},
			wantIDs: []string{"Ralph-Y", "Ralph-X"}, wantPrio: []int{140, 110}, maxLoops: 1, wantRun: []string{"Ralph-Y"},
		},
		{
			name:    "scenario 4: older sibling first",
			loops:   []*loop.Loop{mk("Ralph-005", loop.Ralph, 2*time.Minute, 3, 1), mk("Ralph-004", loop.Ralph, 5*time.Minute, 3, 1)},
			wantIDs: []string{"Ralph-004", "Ralph-005"}, wantPrio: []int{135, 132}, maxLoops: 1, wantRun: []string{"Ralph-004"},
		},
		{
			name: "FIFO within equal priority: created_at, then id",
			loops: []*loop.Loop{
				mk("r-b", loop.Ralph, 5*time.Minute+10*time.Second, 3, 1), // 135
				mk("r-c", loop.Ralph, 5*time.Minute+50*time.Second, 3, 1), // 135, older
				mk("r-a", loop.Ralph, 5*time.Minute+10*time.Second, 3, 1), // 135, same instant as r-b
			},
			wantIDs: []string{"r-c", "r-a", "r-b"}, wantPrio: []int{135, 135, 135}, maxLoops: 2, wantRun: []string{"r-c", "r-a"},
		},
		{
			name:    "age cap: a 2h-old plan still loses to a young ralph",
			loops:   []*loop.Loop{mk("old-plan", loop.Plan, 2*time.Hour, 0, 1), mk("young-ralph", loop.Ralph, 0, 0, 1)},
			wantIDs: []string{"young-ralph", "old-plan"}, wantPrio: []int{100, 90}, maxLoops: 1, wantRun: []string{"young-ralph"},
		},
		{
			name: "depth-first tree",
			loops: []*loop.Loop{
				mk("PlanB", loop.Plan, 0, 0, 1),
				child(mk("SpecA2", loop.Spec, 0, 1, 1), "PlanA"),
				child(mk("PhaseA1b", loop.Phase, 0, 2, 1), "SpecA1"),
				child(mk("RalphA1a1", loop.Ralph, 0, 3, 1), "PhaseA1a"),
				child(mk("PhaseA1a", loop.Phase, 0, 2, 1), "SpecA1"),
				child(mk("SpecA1", loop.Spec, 0, 1, 1), "PlanA"),
				mk("PlanA", loop.Plan, 0, 0, 1),
			},
			wantIDs:  []string{"RalphA1a1", "PhaseA1a", "PhaseA1b", "SpecA1", "SpecA2", "PlanA", "PlanB"},
			wantPrio: []int{130, 100, 100, 70, 70, 40, 40},
			maxLoops: 1, wantRun: []string{"RalphA1a1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := scheduler.DefaultPolicy()
			if tt.maxLoops > 0 {
				p.MaxLoops = tt.maxLoops
			}
			d := scheduler.Plan(scheduler.Snapshot{Waiting: ready(tt.loops...)}, now, p)
			if diff := cmp.Diff(tt.wantIDs, ids(d.Rows)); diff != "" {
				t.Errorf("Plan() order mismatch (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPrio, priorities(d.Rows)); diff != "" {
				t.Errorf("Plan() priorities mismatch (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantRun, d.Start); diff != "" {
				t.Errorf("Plan() starts mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

// TestPlanDebugSchedulerExample reproduces the `loopr debug scheduler` output
// of seed 004: three runnable rows and a plan blocked by its parent.
func TestPlanDebugSchedulerExample(t *testing.T) {
	t.Parallel()
	ralph135 := child(mk("1737802800", loop.Ralph, 5*time.Minute, 3, 1), "p1")
	phase130 := child(mk("1737802500", loop.Phase, 30*time.Minute, 2, 1), "p2")
	ralph111 := child(mk("1737802700", loop.Ralph, time.Minute, 3, 5), "p3")
	// The seed shows this plan at depth 0 yet blocked by a parent: the depth
	// is the cached field, never recomputed from the parent chain.
	plan90 := child(mk("1737802000", loop.Plan, 50*time.Minute, 0, 1), "p0")

	snap := scheduler.Snapshot{Waiting: []scheduler.Candidate{
		{Loop: plan90, ParentStatus: loop.Running},
		{Loop: ralph111, ParentStatus: loop.Complete},
		{Loop: ralph135, ParentStatus: loop.Complete},
		{Loop: phase130, ParentStatus: loop.Complete},
	}}
	got := scheduler.Plan(snap, now, scheduler.DefaultPolicy())

	want := scheduler.Decision{
		Rows: []scheduler.Row{
			{Loop: ralph135, Runnable: true,
				Score: scheduler.Score{Priority: 135, Base: 100, AgeMinutes: 5, AgeBoost: 5, Depth: 3, DepthBoost: 30, Iteration: 1}},
			{Loop: phase130, Runnable: true,
				Score: scheduler.Score{Priority: 130, Base: 80, AgeMinutes: 30, AgeBoost: 30, Depth: 2, DepthBoost: 20, Iteration: 1}},
			{Loop: ralph111, Runnable: true,
				Score: scheduler.Score{Priority: 111, Base: 100, AgeMinutes: 1, AgeBoost: 1, Depth: 3, DepthBoost: 30, Iteration: 5, RetryPenalty: 20}},
			{Loop: plan90,
				Score:   scheduler.Score{Priority: 90, Base: 40, AgeMinutes: 50, AgeBoost: 50, Iteration: 1},
				Reasons: []scheduler.Reason{{Code: scheduler.ParentIncomplete, Text: "parent incomplete (running)"}}},
		},
		Start:    []string{"1737802800", "1737802500", "1737802700"},
		Waiting:  4,
		Eligible: 3,
		Running:  0,
		Slots:    50,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Plan() mismatch (-want +got)\n%s", diff)
	}
}
