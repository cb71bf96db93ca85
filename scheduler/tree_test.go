package scheduler

import (
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Two trees' tasks of the same type and depth: seed order (the older
// first) with the tree term off; the tree with less work left first with
// it on; and the old tree first again once its saturating age exceeds the
// tree boost.
func TestTreeTermOrdersSmallestTreeFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	task := func(id, root string, at time.Time) Candidate {
		return Candidate{Loop: &loop.Loop{ID: id, Type: loop.Ralph, Status: loop.Pending, Parent: root + "-p", Depth: 3,
			Iteration: 1, CreatedAt: at}, ParentStatus: loop.Complete, Root: root}
	}
	s := Snapshot{Waiting: []Candidate{task("big-1", "big", t0), task("small-1", "small", t0.Add(time.Second))},
		Running: map[string]int{}}
	d := Durations{loop.Ralph: 600}
	fp := FairnessPolicy{}
	s.Trees = map[string]TreeWork{}
	for i := range 8 {
		AddWork(s.Trees, "big", t0, &loop.Loop{Type: loop.Ralph, Status: loop.Pending, ID: string(rune('a' + i))}, d, fp, t0)
	}
	AddWork(s.Trees, "small", t0.Add(time.Second), &loop.Loop{Type: loop.Ralph, Status: loop.Pending}, d, fp, t0)
	p := DefaultPolicy()
	p.MaxLoops = 1
	now := t0.Add(2 * time.Minute)
	if got := Plan(s, now, p).Start; len(got) != 1 || got[0] != "big-1" {
		t.Fatalf("tree term off: started %v, want the older big-1 (seed order)", got)
	}
	p.Weights.TreeBoostMax, p.Weights.TreeAgeBoostPerMinute, p.Weights.TreeAgeBoostMax = 80, 1, 90
	dec := Plan(s, now, p)
	if len(dec.Start) != 1 || dec.Start[0] != "small-1" {
		t.Fatalf("tree term on: started %v, want small-1; rows %+v", dec.Start, dec.Rows)
	}
	if r := dec.Rows[0]; r.Score.TreeBoost != 80 || r.Score.TreeLeft != 600 {
		t.Errorf("small tree's score %+v: want tree boost 80 of 600s left", r.Score)
	}
	if r := dec.Rows[1]; r.Score.TreeBoost != 10 {
		t.Errorf("big tree's boost %d, want 80 × 600/4800 = 10", r.Score.TreeBoost)
	}
	// Both trees age together, but the big tree's loops are older: once
	// both ages saturate the tie goes back to created_at — and the big
	// tree, 70 behind on the boost, catches up only when its age is
	// ahead by 70: here the small tree was submitted 100 minutes later.
	s.Trees["small"] = TreeWork{Left: 600, Submitted: t0.Add(100 * time.Minute)}
	s.Waiting[1].Loop.CreatedAt = t0.Add(100 * time.Minute)
	if got := Plan(s, t0.Add(101*time.Minute), p).Start; len(got) != 1 || got[0] != "big-1" {
		t.Errorf("after 101 min the big tree's age (90) should outrank the new small tree's boost: started %v", got)
	}
}

// TestHugeAgeWeightsSaturate: an age weight per minute so large that
// minutes × weight overflows gives the term's maximum, not a wrapped
// negative boost that would starve the oldest tree (and loop) instead.
func TestHugeAgeWeightsSaturate(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(10 * time.Minute)
	huge := int(^uint(0)>>1) / 3
	w := Weights{TreeBoostMax: 20, TreeAgeBoostPerMinute: huge, TreeAgeBoostMax: 960}
	if got := TreePoints(TreeWork{Left: 100, Submitted: t0}, 100, now, w); got != 20+960 {
		t.Errorf("TreePoints = %d, want %d", got, 20+960)
	}
	p := DefaultPolicy()
	p.Weights.AgeBoostPerMinute, p.Weights.AgeBoostMax = huge, 500
	s := ScoreOf(&loop.Loop{ID: "a", Type: loop.Ralph, Status: loop.Pending, Iteration: 1, CreatedAt: t0}, now, p)
	if s.AgeBoost != 500 {
		t.Errorf("AgeBoost = %d, want 500", s.AgeBoost)
	}
}
