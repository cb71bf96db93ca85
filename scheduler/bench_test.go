package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// benchSnapshot builds n waiting loops the way a large workspace looks: mostly
// ralphs, 10% blocked by an incomplete parent, some in backoff, and running
// loops close to every cap.
func benchSnapshot(n int) scheduler.Snapshot {
	r := rand.New(rand.NewPCG(uint64(n), 4))
	types := []loop.Type{loop.Ralph, loop.Ralph, loop.Ralph, loop.Ralph, loop.Ralph, loop.Ralph, loop.Ralph, loop.Phase, loop.Phase, loop.Spec}
	s := scheduler.Snapshot{
		Waiting: make([]scheduler.Candidate, n),
		Running: map[string]int{loop.Plan: 1, loop.Spec: 4, loop.Phase: 18, loop.Ralph: 22}, // 45 of 50
	}
	for i := range n {
		typ := types[r.IntN(len(types))]
		if i%50 == 0 {
			typ = loop.Plan
		}
		l := &loop.Loop{
			ID:            fmt.Sprintf("%012d", i),
			Type:          typ,
			Status:        loop.Pending,
			Parent:        fmt.Sprintf("parent-%d", i/10),
			Depth:         1 + r.IntN(3),
			Iteration:     1 + r.IntN(4),
			MaxIterations: 100,
			CreatedAt:     now.Add(-time.Duration(r.IntN(7200)) * time.Second),
		}
		c := scheduler.Candidate{Loop: l, ParentStatus: loop.Complete}
		if i%10 == 3 {
			c.ParentStatus = loop.Running // 10% blocked by their parent
		}
		if i%20 == 7 {
			l.RunnableAt = now.Add(time.Duration(1+r.IntN(60)) * time.Second)
		}
		s.Waiting[i] = c
	}
	return s
}

func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
			s := benchSnapshot(n)
			p := scheduler.DefaultPolicy()
			b.ReportAllocs()
			var d scheduler.Decision
			for b.Loop() {
				d = scheduler.Plan(s, now, p)
			}
			if len(d.Start) != 5 {
				b.Fatalf("started %d, want 5 (45 of 50 running)", len(d.Start))
			}
		})
	}
}

// fullPolicy turns every policy on: fairness over one key per 100 loops
// (1 000 keys at 100k), two tiers, conflict groups and owner quotas.
func fullPolicy(s *scheduler.Snapshot) scheduler.Policy {
	p := scheduler.DefaultPolicy()
	p.Fairness = scheduler.FairnessPolicy{Enabled: true, Alpha: 0.3, IdleTTL: time.Hour}
	p.Tier = map[string]int{loop.Phase: 30, loop.Ralph: 40}
	p.ConflictGroup = map[string]string{loop.Ralph: "code"}
	p.OwnerCap = map[string]int{"alice": 3, "bob": 3}
	s.Fairness.Keys = map[string]scheduler.KeyUsage{}
	for i, c := range s.Waiting {
		l := c.Loop
		s.Waiting[i].Root = fmt.Sprintf("root-%d", i/100)
		if i%3 == 0 {
			l.ConflictKey = fmt.Sprintf("file-%d", i%500)
		}
		l.Owner = []string{"", "alice", "bob"}[i%3]
		if i%200 == 0 {
			s.Fairness.Keys[s.Waiting[i].Root] = scheduler.KeyUsage{Used: float64(i % 7000), Seen: now}
		}
	}
	return p
}

// treePolicy turns the tree term on (issue 25's starting weights) over one
// tree per 1 000 loops, each loop's work added to its tree as control does.
func treePolicy(s *scheduler.Snapshot) scheduler.Policy {
	p := scheduler.DefaultPolicy()
	p.Weights.TreeBoostMax, p.Weights.TreeAgeBoostPerMinute, p.Weights.TreeAgeBoostMax = 100, 1, 120
	s.Trees = map[string]scheduler.TreeWork{}
	d := scheduler.Durations{loop.Ralph: 300, loop.Phase: 600}
	for i := range s.Waiting {
		c := &s.Waiting[i]
		c.Root = fmt.Sprintf("root-%d", i/1000)
		scheduler.AddWork(s.Trees, c.Root, now.Add(-time.Duration(i/1000)*time.Minute), c.Loop, d, p.Fairness, now)
	}
	return p
}

// BenchmarkPlanTree is BenchmarkPlan with the tree term on.
func BenchmarkPlanTree(b *testing.B) { benchPlan(b, treePolicy) }

func BenchmarkPlanPolicies(b *testing.B) { benchPlan(b, fullPolicy) }

// benchPlan times Plan over benchSnapshot at three sizes under policy.
func benchPlan(b *testing.B, policy func(*scheduler.Snapshot) scheduler.Policy) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
			s := benchSnapshot(n)
			p := policy(&s)
			b.ReportAllocs()
			var d scheduler.Decision
			for b.Loop() {
				d = scheduler.Plan(s, now, p)
			}
			if len(d.Start) != 5 {
				b.Fatalf("started %d, want 5 (45 of 50 running)", len(d.Start))
			}
		})
	}
}

// TestPlanScale guards against accidentally quadratic planning: Plan over
// 100k waiting loops must cost about ten times Plan over 10k (n log n:
// ×12.5), not a hundred (n²). Both are timed in the same run, the best of
// a few, so the ratio holds on a loaded machine where absolute times do
// not; how fast Plan is belongs to BenchmarkPlan.
func TestPlanScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k loops")
	}
	small, large := benchSnapshot(10_000), benchSnapshot(100_000)
	for _, tc := range []struct {
		name   string
		policy func(*scheduler.Snapshot) scheduler.Policy
	}{
		{"default policy", func(*scheduler.Snapshot) scheduler.Policy { return scheduler.DefaultPolicy() }},
		// Every policy on: the fair walk is a merge of the keys' runs,
		// O(log keys) per row, not a re-sort per admission.
		{"every policy", fullPolicy},
		// The tree term: one map lookup per row more.
		{"tree term", treePolicy},
	} {
		best := func(s scheduler.Snapshot, runs int) (time.Duration, scheduler.Decision) {
			var d scheduler.Decision
			fastest := time.Duration(1<<63 - 1)
			for range runs {
				start := time.Now()
				d = scheduler.Plan(s, now, tc.policy(&s))
				fastest = min(fastest, time.Since(start))
			}
			return fastest, d
		}
		t10, _ := best(small, 5)
		t100, d := best(large, 3)
		t.Logf("%s: Plan(10k) %v, Plan(100k) %v: ×%.1f", tc.name, t10, t100, float64(t100)/float64(t10))
		if t100 > 40*t10 {
			t.Errorf("%s: Plan(100k) took %v, %.0f× Plan(10k)'s %v; want about 10× (n log n), not 100× (n²)",
				tc.name, t100, float64(t100)/float64(t10), t10)
		}
		if d.Waiting != 100_000 || len(d.Start) != 5 {
			t.Errorf("%s: Plan(100k) Waiting %d, started %d; want 100000, 5", tc.name, d.Waiting, len(d.Start))
		}
	}
}
