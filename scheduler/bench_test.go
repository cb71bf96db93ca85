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

func BenchmarkPlanPolicies(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
			s := benchSnapshot(n)
			p := fullPolicy(&s)
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

// TestPlanScale guards against accidentally quadratic planning: 100k waiting
// loops plan in tens of milliseconds (see BenchmarkPlan), so the generous
// bound below holds under the race detector on a loaded machine, while an
// O(n²) step would take minutes.
func TestPlanScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k loops")
	}
	s := benchSnapshot(100_000)
	start := time.Now()
	d := scheduler.Plan(s, now, scheduler.DefaultPolicy())
	took := time.Since(start)
	t.Logf("Plan(100k) took %v", took)
	if took > 5*time.Second {
		t.Errorf("Plan(100k) took %v, want well under a second", took)
	}
	if d.Waiting != 100_000 || len(d.Start) != 5 {
		t.Errorf("Plan(100k) Waiting %d, started %d; want 100000, 5", d.Waiting, len(d.Start))
	}

	// Every policy on: the fair walk is a merge of the keys' runs, O(log
	// keys) per row, not a re-sort per admission.
	p := fullPolicy(&s)
	start = time.Now()
	d = scheduler.Plan(s, now, p)
	took = time.Since(start)
	t.Logf("Plan(100k, every policy) took %v", took)
	if took > 5*time.Second {
		t.Errorf("Plan(100k, every policy) took %v, want well under a second", took)
	}
	if d.Waiting != 100_000 || len(d.Start) != 5 {
		t.Errorf("Plan(100k, every policy) Waiting %d, started %d; want 100000, 5", d.Waiting, len(d.Start))
	}
}
