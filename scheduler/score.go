package scheduler

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Weights tune the priority formula (loopr.yml scheduler.priority.*).
type Weights struct {
	AgeBoostPerMinute        int `json:"age_boost_per_minute"`        // added per whole minute since created_at
	AgeBoostMax              int `json:"age_boost_max"`               // cap of the age boost
	DepthBoostPerLevel       int `json:"depth_boost_per_level"`       // added per ancestor
	RetryPenaltyPerIteration int `json:"retry_penalty_per_iteration"` // subtracted per iteration after the first
	RetryPenaltyMax          int `json:"retry_penalty_max"`           // cap of the retry penalty
	// The tree term (tree.go): shortest remaining tree first, bounded by
	// a saturating tree age. 0 turns each part off.
	TreeBoostMax          int `json:"tree_boost_max,omitzero"`            // boost of the tree with the least work left
	TreeAgeBoostPerMinute int `json:"tree_age_boost_per_minute,omitzero"` // added per whole minute since the root was created
	TreeAgeBoostMax       int `json:"tree_age_boost_max,omitzero"`        // cap of the tree age boost
}

// Policy is everything the scheduler is told by configuration. The fields
// after TypeCap are the scheduling policies of seeds 001–003; their zero
// values turn them off, which leaves seed 004's order and gates unchanged.
type Policy struct {
	Base     map[string]int `json:"base"` // base priority per loop type (user types too); unknown type → 0
	Weights  Weights        `json:"weights"`
	MaxLoops int            `json:"max_loops"` // global cap on running loops, counting those already running; <= 0 starts nothing
	TypeCap  map[string]int `json:"type_cap"`  // per-type cap on running loops; missing or 0 = none

	// Tier is the priority tier of each type (seed 002); missing or 0 = none.
	// Higher tiers are ordered first, and at most N loops of tier N run at
	// once, all types of the tier together (reason tier_cap).
	Tier map[string]int `json:"tier,omitempty"`
	// ConflictGroup is the conflict group of each type; missing or "" = none.
	// Two loops conflict when their types share a group and the loops share
	// a non-empty conflict_key: one waits while the other runs (reason conflict).
	ConflictGroup map[string]string `json:"conflict_group,omitempty"`
	// OwnerCap is the most loops each owner may run at once
	// (quotas.<owner>.max_running); missing or 0 = none (reason quota).
	OwnerCap map[string]int `json:"owner_cap,omitempty"`
	// Fairness orders loops within a tier by their fairness key's
	// accumulated cost when Enabled.
	Fairness FairnessPolicy `json:"fairness"`
	// Agents maps loops to agent profiles, whose rate limits
	// (Snapshot.Limits) hold back only the loops that run on them.
	Agents Agents `json:"agents,omitzero"`
	// Order, when set, replaces the order of the rows (tier, priority,
	// fairness) with its own, ties in seed 004's order; the gates are
	// unchanged. nil: loopr's order. For reference policies (loopr sim
	// --compare), never from configuration (order.go).
	Order func(a, b *Row) int `json:"-"`
}

// DefaultPolicy returns seed 004's policy: base plan 40, spec 60, phase 80,
// ralph 100; age +1/min up to +50; depth +10/level; retry −5/iteration up to
// −30; at most 50 loops, of which plan 2, spec 5, phase 20, ralph 50.
func DefaultPolicy() Policy {
	return Policy{
		Base: map[string]int{loop.Plan: 40, loop.Spec: 60, loop.Phase: 80, loop.Ralph: 100},
		Weights: Weights{
			AgeBoostPerMinute:        1,
			AgeBoostMax:              50,
			DepthBoostPerLevel:       10,
			RetryPenaltyPerIteration: 5,
			RetryPenaltyMax:          30,
		},
		MaxLoops: 50,
		TypeCap:  map[string]int{loop.Plan: 2, loop.Spec: 5, loop.Phase: 20, loop.Ralph: 50},
	}
}

// Score is a loop's priority and the terms it is made of, so that every
// number a user sees can be traced (the TUI's why pane, `loopr debug scheduler`).
//
//	Priority = Base + AgeBoost + DepthBoost − RetryPenalty + TreeBoost + TreeAgeBoost
type Score struct {
	Priority     int `json:"priority"`
	Base         int `json:"base"`
	AgeMinutes   int `json:"age_minutes"`
	AgeBoost     int `json:"age_boost"`
	Depth        int `json:"depth"`
	DepthBoost   int `json:"depth_boost"`
	Iteration    int `json:"iteration"`
	RetryPenalty int `json:"retry_penalty"` // subtracted; 0 or positive
	// The tree term (tree.go), when the snapshot knows the loop's tree:
	// the estimated seconds of work left in it and in the tree with the
	// least, and the minutes since its root was created.
	TreeLeft       float64 `json:"tree_left,omitzero"`
	TreeLeast      float64 `json:"tree_least,omitzero"`
	TreeBoost      int     `json:"tree_boost,omitzero"`
	TreeAgeMinutes int     `json:"tree_age_minutes,omitzero"`
	TreeAgeBoost   int     `json:"tree_age_boost,omitzero"`
}

// ScoreOf computes l's priority at now (SPEC §4, seed 004):
//
//	priority = base(type) + min(age_minutes × age_boost_per_minute, age_boost_max)
//	         + depth × depth_boost_per_level
//	         − min(max(iteration−1, 0) × retry_penalty_per_iteration, retry_penalty_max)
//
// age_minutes is whole minutes since created_at, rounded down, and 0 for a
// created_at in the future. depth is l.Depth, cached on the record when the
// loop was created: the scheduler never walks parents.
func ScoreOf(l *loop.Loop, now time.Time, p Policy) Score {
	return score(l, now, p.Base[l.Type], p.Weights)
}

func score(l *loop.Loop, now time.Time, base int, w Weights) Score {
	s := Score{Base: base, Depth: l.Depth, Iteration: l.Iteration}
	if age := now.Sub(l.CreatedAt); age > 0 {
		s.AgeMinutes = int(age / time.Minute)
	}
	s.AgeBoost = ageBoost(s.AgeMinutes, w.AgeBoostPerMinute, w.AgeBoostMax)
	s.DepthBoost = s.Depth * w.DepthBoostPerLevel
	s.RetryPenalty = min(max(s.Iteration-1, 0)*w.RetryPenaltyPerIteration, w.RetryPenaltyMax)
	s.Priority = s.Base + s.AgeBoost + s.DepthBoost - s.RetryPenalty
	return s
}

// Explain spells the score out the way the TUI's why pane shows it:
//
//	priority 111 = base 100 + age 1 (1 min × 1, max 50) + depth 30 (3 × 10) − retry 20 ((5−1) × 5, max 30)
//
// With the tree term on (either tree weight > 0) it goes on:
//
//	… + tree 30 (least left 12m ÷ this tree's 24m × 60) + tree age 20 (40 min × 1, max 60)
func (s Score) Explain(w Weights) string {
	out := fmt.Sprintf("priority %d = base %d + age %d (%d min × %d, max %d) + depth %d (%d × %d) − retry %d ((%d−1) × %d, max %d)",
		s.Priority, s.Base,
		s.AgeBoost, s.AgeMinutes, w.AgeBoostPerMinute, w.AgeBoostMax,
		s.DepthBoost, s.Depth, w.DepthBoostPerLevel,
		s.RetryPenalty, s.Iteration, w.RetryPenaltyPerIteration, w.RetryPenaltyMax)
	if w.TreeBoostMax > 0 || w.TreeAgeBoostMax > 0 {
		out += fmt.Sprintf(" + tree %d (least left %s ÷ this tree's %s × %d) + tree age %d (%d min × %d, max %d)",
			s.TreeBoost, Seconds(s.TreeLeast), Seconds(s.TreeLeft), w.TreeBoostMax,
			s.TreeAgeBoost, s.TreeAgeMinutes, w.TreeAgeBoostPerMinute, w.TreeAgeBoostMax)
	}
	return out
}

// Seconds formats an estimate of work for a person: 45s, 12m, 3h05m.
func Seconds(sec float64) string {
	d := time.Duration(max(sec, 0) * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	default:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}

// ageBoost is min(minutes × perMinute, most) without overflow: a huge
// per-minute weight saturates at most instead of wrapping negative.
func ageBoost(minutes, perMinute, most int) int {
	if minutes <= 0 || perMinute <= 0 {
		return min(0, most)
	}
	if minutes > most/perMinute {
		return most
	}
	return min(minutes*perMinute, most)
}
