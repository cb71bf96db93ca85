package scheduler_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// owned returns l with an owner, a conflict key and a fairness key.
func owned(l *loop.Loop, owner, conflictKey, fairnessKey string) *loop.Loop {
	l.Owner, l.ConflictKey, l.FairnessKey = owner, conflictKey, fairnessKey
	return l
}

func running(id, typ, owner, conflictKey string) *loop.Loop {
	return &loop.Loop{ID: id, Type: typ, Status: loop.Running, Owner: owner, ConflictKey: conflictKey}
}

// reasonsByID maps each row's id to its reasons (nil when it starts).
func reasonsByID(d scheduler.Decision) map[string][]scheduler.Reason {
	out := map[string][]scheduler.Reason{}
	for _, r := range d.Rows {
		out[r.Loop.ID] = r.Reasons
	}
	return out
}

// TestPlanPolicies checks tiers, conflicts and quotas: the order, who
// starts, and every reason with its text.
func TestPlanPolicies(t *testing.T) {
	t.Parallel()
	type reasons = map[string][]scheduler.Reason
	tests := []struct {
		name      string
		waiting   []*loop.Loop
		active    []*loop.Loop
		policy    func(*scheduler.Policy)
		wantOrder []string
		wantStart []string
		want      reasons
	}{
		{
			name: "a higher tier orders first whatever the priority",
			waiting: []*loop.Loop{
				mk("r1", loop.Ralph, 10*time.Minute, 3, 1), // 140
				mk("rev1", "review", 0, 0, 1),              // 10, tier 2
				mk("pl1", loop.Plan, 0, 0, 1),              // 40, tier 1
			},
			policy: func(p *scheduler.Policy) {
				p.Base["review"] = 10
				p.Tier = map[string]int{"review": 2, loop.Plan: 1}
			},
			wantOrder: []string{"rev1", "pl1", "r1"},
			wantStart: []string{"rev1", "pl1", "r1"},
			want:      reasons{"rev1": nil, "pl1": nil, "r1": nil},
		},
		{
			name: "tier N runs at most N loops, all its types together",
			waiting: []*loop.Loop{
				mk("rev1", "review", 3*time.Minute, 0, 1),
				mk("lint1", "lint", 2*time.Minute, 0, 1),
				mk("rev2", "review", 1*time.Minute, 0, 1),
				mk("r1", loop.Ralph, 0, 3, 1),
			},
			active: []*loop.Loop{running("lint0", "lint", "", "")},
			policy: func(p *scheduler.Policy) {
				p.Tier = map[string]int{"review": 2, "lint": 2}
			},
			wantOrder: []string{"rev1", "lint1", "rev2", "r1"},
			wantStart: []string{"rev1", "r1"},
			want: reasons{
				"rev1":  nil,
				"lint1": {{scheduler.TierCap, "tier 2 cap 2/2"}},
				"rev2":  {{scheduler.TierCap, "tier 2 cap 2/2"}},
				"r1":    nil,
			},
		},
		{
			name: "a conflicting loop waits for the running holder and blocks nobody",
			waiting: []*loop.Loop{
				owned(mk("r1", loop.Ralph, 3*time.Minute, 3, 1), "", "repo1", ""),
				owned(mk("r2", loop.Ralph, 2*time.Minute, 3, 1), "", "repo2", ""),
				owned(mk("r3", loop.Ralph, 1*time.Minute, 3, 1), "", "repo2", ""),
				owned(mk("rev1", "review", 0, 0, 1), "", "repo1", ""), // another group
				owned(mk("r4", loop.Ralph, 0, 3, 1), "", "", ""),      // no key: no conflict
			},
			active: []*loop.Loop{running("r0", loop.Ralph, "", "repo1")},
			policy: func(p *scheduler.Policy) {
				p.ConflictGroup = map[string]string{loop.Ralph: "code", "review": "docs"}
			},
			wantOrder: []string{"r1", "r2", "r3", "r4", "rev1"},
			wantStart: []string{"r2", "r4", "rev1"},
			want: reasons{
				"r1":   {{scheduler.Conflict, "conflict code/repo1: held by r0 (running)"}},
				"r2":   nil,
				"r3":   {{scheduler.Conflict, "conflict code/repo2: held by r2 (starting)"}},
				"r4":   nil,
				"rev1": nil,
			},
		},
		{
			name: "types of one group conflict with each other",
			waiting: []*loop.Loop{
				owned(mk("r1", loop.Ralph, 0, 3, 1), "", "db", ""),
				owned(mk("rev1", "review", 0, 0, 1), "", "db", ""),
			},
			policy: func(p *scheduler.Policy) {
				p.ConflictGroup = map[string]string{loop.Ralph: "code", "review": "code"}
			},
			wantOrder: []string{"r1", "rev1"},
			wantStart: []string{"r1"},
			want: reasons{
				"r1":   nil,
				"rev1": {{scheduler.Conflict, "conflict code/db: held by r1 (starting)"}},
			},
		},
		{
			name: "an owner's quota counts its running and admitted loops",
			waiting: []*loop.Loop{
				owned(mk("a1", loop.Ralph, 4*time.Minute, 3, 1), "alice", "", ""),
				owned(mk("b1", loop.Ralph, 3*time.Minute, 3, 1), "bob", "", ""),
				owned(mk("a2", loop.Ralph, 2*time.Minute, 3, 1), "alice", "", ""),
				owned(mk("n1", loop.Ralph, 1*time.Minute, 3, 1), "", "", ""),
				owned(mk("b2", loop.Ralph, 0, 3, 1), "bob", "", ""),
			},
			active: []*loop.Loop{running("a0", loop.Ralph, "alice", "")},
			policy: func(p *scheduler.Policy) {
				p.OwnerCap = map[string]int{"alice": 2, "bob": 1}
			},
			wantOrder: []string{"a1", "b1", "a2", "n1", "b2"},
			wantStart: []string{"a1", "b1", "n1"},
			want: reasons{
				"a1": nil,
				"b1": nil,
				"a2": {{scheduler.Quota, "quota alice 2/2"}},
				"n1": nil,
				"b2": {{scheduler.Quota, "quota bob 1/1"}},
			},
		},
		{
			name: "every capacity gate at once, in order",
			waiting: []*loop.Loop{
				owned(mk("rev1", "review", 0, 0, 1), "alice", "repo1", ""),
			},
			active: []*loop.Loop{running("rev0", "review", "alice", "repo1")},
			policy: func(p *scheduler.Policy) {
				p.MaxLoops = 1
				p.TypeCap["review"] = 1
				p.Tier = map[string]int{"review": 1}
				p.OwnerCap = map[string]int{"alice": 1}
				p.ConflictGroup = map[string]string{"review": "git"}
			},
			wantOrder: []string{"rev1"},
			want: reasons{"rev1": {
				{scheduler.GlobalCap, "global cap 1/1"},
				{scheduler.TypeCap, "type cap review 1/1"},
				{scheduler.TierCap, "tier 1 cap 1/1"},
				{scheduler.Quota, "quota alice 1/1"},
				{scheduler.Conflict, "conflict git/repo1: held by rev0 (running)"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := scheduler.DefaultPolicy()
			tt.policy(&p)
			snap := scheduler.Snapshot{Waiting: ready(tt.waiting...), Active: tt.active, Running: map[string]int{}}
			for _, l := range tt.active {
				snap.Running[l.Type]++
			}
			d := scheduler.Plan(snap, now, p)
			if diff := cmp.Diff(tt.wantOrder, ids(d.Rows)); diff != "" {
				t.Errorf("Plan() order mismatch (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStart, d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() Start mismatch (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, reasonsByID(d)); diff != "" {
				t.Errorf("Plan() reasons mismatch (-want +got)\n%s", diff)
			}
			for _, r := range d.Rows {
				if !r.Eligible() {
					t.Errorf("row %s not eligible with capacity reasons only: %v", r.Loop.ID, r.Reasons)
				}
			}
		})
	}
}

// fairPolicy is the default policy with fairness on and every loop costing 10.
func fairPolicy() scheduler.Policy {
	p := scheduler.DefaultPolicy()
	p.Fairness = scheduler.FairnessPolicy{Enabled: true, Alpha: 0.3, IdleTTL: time.Hour,
		DefaultCost: map[string]float64{loop.Ralph: 10, loop.Plan: 10, loop.Spec: 10, loop.Phase: 10}}
	return p
}

// TestPlanFairness checks the fair order: lowest accumulated cost first,
// re-evaluated after each admission, with estimated costs from hints,
// learned costs and defaults.
func TestPlanFairness(t *testing.T) {
	t.Parallel()
	seen := now.Add(-time.Minute)
	tests := []struct {
		name      string
		waiting   []scheduler.Candidate
		state     map[string]scheduler.KeyUsage
		policy    func(*scheduler.Policy)
		wantOrder []string
		wantStart []string
		wantRows  [][3]any // key, key used when reached, cost
	}{
		{
			name: "the key that used least goes first, whatever the priority",
			waiting: ready(
				owned(mk("a1", loop.Ralph, 30*time.Minute, 3, 1), "", "", "A"),
				owned(mk("b1", loop.Ralph, 0, 0, 1), "", "", "B"),
			),
			state:     map[string]scheduler.KeyUsage{"A": {Used: 100, Seen: seen}, "B": {Used: 20, Seen: seen}},
			wantOrder: []string{"b1", "a1"},
			wantStart: []string{"b1", "a1"},
			wantRows:  [][3]any{{"B", 20.0, 10.0}, {"A", 100.0, 10.0}},
		},
		{
			name: "each admission charges its key and re-orders the rest",
			waiting: ready(
				owned(mk("a1", loop.Ralph, 5*time.Minute, 3, 1), "", "", "A"),
				owned(mk("a2", loop.Ralph, 4*time.Minute, 3, 1), "", "", "A"),
				owned(mk("a3", loop.Ralph, 3*time.Minute, 3, 1), "", "", "A"),
				owned(mk("b1", loop.Ralph, 2*time.Minute, 3, 1), "", "", "B"),
				owned(mk("b2", loop.Ralph, 1*time.Minute, 3, 1), "", "", "B"),
			),
			policy:    func(p *scheduler.Policy) { p.MaxLoops = 4 },
			wantOrder: []string{"a1", "b1", "a2", "b2", "a3"},
			wantStart: []string{"a1", "b1", "a2", "b2"},
			wantRows:  [][3]any{{"A", 0.0, 10.0}, {"B", 0.0, 10.0}, {"A", 10.0, 10.0}, {"B", 10.0, 10.0}, {"A", 20.0, 10.0}},
		},
		{
			name: "the cost hint, then the learned cost, then the default",
			waiting: ready(
				owned(with(mk("a1", loop.Ralph, 3*time.Minute, 3, 1), func(l *loop.Loop) { l.CostHint = 100 }), "", "", "A"),
				owned(mk("a2", loop.Ralph, 2*time.Minute, 3, 1), "", "", "A"),
				owned(mk("b1", loop.Ralph, 1*time.Minute, 3, 1), "", "", "B"),
				owned(mk("b2", loop.Ralph, 0, 3, 1), "", "", "B"),
			),
			state:     map[string]scheduler.KeyUsage{"B": {Used: 0, Seen: seen, Cost: map[string]float64{loop.Ralph: 45}}},
			wantOrder: []string{"a1", "b1", "b2", "a2"},
			wantStart: []string{"a1", "b1", "b2", "a2"},
			wantRows:  [][3]any{{"A", 0.0, 100.0}, {"B", 0.0, 45.0}, {"B", 45.0, 45.0}, {"A", 100.0, 10.0}},
		},
		{
			name: "a new key and an idle key start at the lowest known cost",
			waiting: ready(
				owned(mk("a1", loop.Ralph, 3*time.Minute, 3, 1), "", "", "A"),
				owned(mk("n1", loop.Ralph, 2*time.Minute, 3, 1), "", "", "NEW"),
				owned(mk("i1", loop.Ralph, 1*time.Minute, 3, 1), "", "", "IDLE"),
				owned(mk("c1", loop.Ralph, 0, 3, 1), "", "", "C"),
			),
			state: map[string]scheduler.KeyUsage{
				"A":    {Used: 500, Seen: seen},
				"C":    {Used: 300, Seen: seen},
				"IDLE": {Used: 9000, Seen: now.Add(-2 * time.Hour), Cost: map[string]float64{loop.Ralph: 1}},
			},
			policy:    func(p *scheduler.Policy) { p.MaxLoops = 1 },
			wantOrder: []string{"n1", "i1", "c1", "a1"}, // at 300 all three: by priority (age)
			wantStart: []string{"n1"},
			wantRows:  [][3]any{{"NEW", 300.0, 10.0}, {"IDLE", 300.0, 10.0}, {"C", 300.0, 10.0}, {"A", 500.0, 10.0}},
		},
		{
			name: "the key is the fairness key, else the root, else the loop itself",
			waiting: []scheduler.Candidate{
				{Loop: child(mk("s1", loop.Spec, 3*time.Minute, 1, 1), "P1"), ParentStatus: loop.Complete, Root: "P1"},
				{Loop: child(mk("r1", loop.Ralph, 2*time.Minute, 3, 1), "PH2"), ParentStatus: loop.Complete, Root: "P2"},
				{Loop: child(owned(mk("r2", loop.Ralph, 1*time.Minute, 3, 1), "", "", "team"), "PH2"), ParentStatus: loop.Complete, Root: "P2"},
				{Loop: mk("pl3", loop.Plan, 0, 0, 1)},
			},
			state: map[string]scheduler.KeyUsage{
				"P1": {Used: 1, Seen: seen}, "P2": {Used: 2, Seen: seen}, "team": {Used: 3, Seen: seen}, "pl3": {Used: 4, Seen: seen},
			},
			wantOrder: []string{"s1", "r1", "r2", "pl3"},
			wantStart: []string{"s1", "r1", "r2", "pl3"},
			wantRows:  [][3]any{{"P1", 1.0, 10.0}, {"P2", 2.0, 10.0}, {"team", 3.0, 10.0}, {"pl3", 4.0, 10.0}},
		},
		{
			name: "tiers come before fairness",
			waiting: ready(
				owned(mk("a1", "review", 0, 0, 1), "", "", "A"),
				owned(mk("b1", loop.Ralph, 0, 3, 1), "", "", "B"),
			),
			state:     map[string]scheduler.KeyUsage{"A": {Used: 1000, Seen: seen}},
			policy:    func(p *scheduler.Policy) { p.Tier = map[string]int{"review": 1} },
			wantOrder: []string{"a1", "b1"},
			wantStart: []string{"a1", "b1"},
			wantRows:  [][3]any{{"A", 1000.0, 60.0}, {"B", 1000.0, 10.0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := fairPolicy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			d := scheduler.Plan(scheduler.Snapshot{Waiting: tt.waiting, Fairness: scheduler.Fairness{Keys: tt.state}}, now, p)
			if diff := cmp.Diff(tt.wantOrder, ids(d.Rows)); diff != "" {
				t.Errorf("Plan() order mismatch (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStart, d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() Start mismatch (-want +got)\n%s", diff)
			}
			var rows [][3]any
			for _, r := range d.Rows {
				rows = append(rows, [3]any{r.Key, r.KeyUsed, r.Cost})
			}
			if diff := cmp.Diff(tt.wantRows, rows); diff != "" {
				t.Errorf("Plan() rows key/used/cost mismatch (-want +got)\n%s", diff)
			}
			if len(d.Charges) != len(d.Start) {
				t.Fatalf("Plan() %d charges for %d starts", len(d.Charges), len(d.Start))
			}
			for i, c := range d.Charges {
				if c.ID != d.Start[i] {
					t.Errorf("Charges[%d] = %s, Start[%d] = %s", i, c.ID, i, d.Start[i])
				}
			}
		})
	}
}

// TestPlanFairnessOffKeepsSeedOrder: with fairness off, keys, costs and the
// learned state change nothing: the decision is seed 004's.
func TestPlanFairnessOffKeepsSeedOrder(t *testing.T) {
	t.Parallel()
	loops := func() []scheduler.Candidate {
		return ready(
			owned(mk("a1", loop.Ralph, 5*time.Minute, 3, 1), "", "", "A"),
			owned(mk("a2", loop.Ralph, 4*time.Minute, 3, 1), "", "", "A"),
			owned(with(mk("b1", loop.Phase, 30*time.Minute, 2, 1), func(l *loop.Loop) { l.CostHint = 5 }), "", "", "B"),
			owned(mk("b2", loop.Plan, 50*time.Minute, 0, 1), "", "", "B"),
		)
	}
	seed := scheduler.Plan(scheduler.Snapshot{Waiting: loops()}, now, scheduler.DefaultPolicy())
	p := fairPolicy()
	p.Fairness.Enabled = false
	state := scheduler.Fairness{Keys: map[string]scheduler.KeyUsage{"A": {Used: 1e6, Seen: now}}}
	got := scheduler.Plan(scheduler.Snapshot{Waiting: loops(), Fairness: state}, now, p)
	if diff := cmp.Diff(seed, got); diff != "" {
		t.Errorf("Plan() with fairness off mismatch (-want +got)\n%s", diff)
	}
	if want := []string{"a1", "a2", "b1", "b2"}; !cmp.Equal(want, ids(got.Rows)) {
		t.Errorf("Plan() order = %v, want seed 004's %v", ids(got.Rows), want)
	}
}

// TestFairnessState checks the learned state: charges, the EMA of observed
// wall time, the floor for new and idle keys, and eviction.
func TestFairnessState(t *testing.T) {
	t.Parallel()
	p := scheduler.FairnessPolicy{Enabled: true, Alpha: 0.3, IdleTTL: time.Hour, DefaultCost: map[string]float64{loop.Ralph: 60}}
	var f scheduler.Fairness
	if got := f.Floor(now, p.IdleTTL); got != 0 {
		t.Errorf("Floor() of nothing = %v, want 0", got)
	}
	if got := f.Estimate(loop.Ralph, "A", 0, now, p); got != 60 {
		t.Errorf("Estimate() before anything = %v, want the default 60", got)
	}
	if got := f.Estimate("review", "A", 0, now, p); got != scheduler.DefaultCost {
		t.Errorf("Estimate() of a type without default = %v, want %v", got, scheduler.DefaultCost)
	}
	if got := f.Estimate(loop.Ralph, "A", 7, now, p); got != 7 {
		t.Errorf("Estimate() with a hint = %v, want 7", got)
	}

	f.Charge(scheduler.Charge{Key: "A", Cost: 60, Floor: 0}, now, p)
	f.Charge(scheduler.Charge{Key: "A", Cost: 60, Floor: 999}, now, p) // known: the floor does not apply
	f.Charge(scheduler.Charge{Key: "B", Cost: 10, Floor: 100}, now, p)
	if got, want := [2]float64{f.Keys["A"].Used, f.Keys["B"].Used}, [2]float64{120, 110}; got != want {
		t.Errorf("Used after charges = %v, want %v", got, want)
	}
	if got := f.Floor(now, p.IdleTTL); got != 110 {
		t.Errorf("Floor() = %v, want 110", got)
	}

	// EMA: 0.3 × 30 + 0.7 × 60 = 51, then 0.3 × 30 + 0.7 × 51 = 44.7.
	f.Observe(loop.Ralph, "A", 30*time.Second, now, p)
	if got := f.Estimate(loop.Ralph, "A", 0, now, p); got != 51 {
		t.Errorf("Estimate() after one run of 30s = %v, want 51", got)
	}
	snapshot := f.Clone()
	f.Observe(loop.Ralph, "A", 30*time.Second, now, p)
	if got := f.Estimate(loop.Ralph, "A", 0, now, p); got < 44.69 || got > 44.71 {
		t.Errorf("Estimate() after two runs of 30s = %v, want 44.7", got)
	}
	if got := snapshot.Keys["A"].Cost[loop.Ralph]; got != 51 {
		t.Errorf("Clone() shares state: %v, want 51", got)
	}

	// An hour later both keys are idle: forgotten, and a charge starts over.
	later := now.Add(time.Hour)
	if _, ok := f.Lookup("A", later, p.IdleTTL); ok {
		t.Error("Lookup() of an idle key: found")
	}
	if got := f.Estimate(loop.Ralph, "A", 0, later, p); got != 60 {
		t.Errorf("Estimate() of an idle key = %v, want the default 60", got)
	}
	f.Charge(scheduler.Charge{Key: "B", Cost: 10, Floor: 5}, later, p)
	if got := f.Keys["B"].Used; got != 15 {
		t.Errorf("Used of a returning key = %v, want floor 5 + 10", got)
	}
	if n := f.Evict(later, p.IdleTTL); n != 1 || len(f.Keys) != 1 {
		t.Errorf("Evict() removed %d, left %v; want A removed", n, f.Keys)
	}
	if n := f.Evict(later.Add(100*time.Hour), 0); n != 0 {
		t.Errorf("Evict() with no TTL removed %d", n)
	}
}
