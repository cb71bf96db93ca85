package scheduler

import (
	"math"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// The tree term (issue 25). Users wait for whole trees — a plan finished —
// not for single loops. Seed 004's order is FIFO by tree in practice: a
// task always outranks a plan (depth boost), so a plan submitted after
// another first runs when the first tree is nearly done. The tree term is
// shortest-remaining-tree-first, bounded against starvation:
//
//	tree boost = round(tree_boost_max × smallest tree left ÷ this tree left)
//	tree age   = min(tree age minutes × tree_age_boost_per_minute, tree_age_boost_max)
//
// "Tree left" is the estimated seconds of work in the tree's loops that
// exist and are not finished (waiting and running: children not yet
// created are unknown), each estimated by the learned duration of its type
// and agent profile (Durations). The tree with the least work left gets the
// whole boost; one with twice as much, half. The tree's age saturates
// (Slurm's PriorityMaxAge): with tree_age_boost_max ≥ tree_boost_max, an
// old tree's loops eventually outrank every new small tree's loops of their
// type and depth, so no tree waits forever. Both weights 0: seed 004.

// TreeWork is what a Snapshot tells the scheduler of one tree, by root id.
type TreeWork struct {
	// Left is the estimated seconds of work left in the tree's existing,
	// unfinished loops (AddWork).
	Left float64 `json:"left"`
	// Submitted is the root's created_at: the tree's age counts from it.
	Submitted time.Time `json:"submitted"`
}

// Durations is the learned wall time, in seconds, of one iteration by loop
// type ("ralph") and by type and agent profile ("ralph/claude"): an
// exponential moving average the caller keeps (the fairness state's Alpha).
type Durations map[string]float64

// Of returns the estimate for a loop of typ on agent: typ/agent, else typ,
// else fallback.
func (d Durations) Of(typ, agent string, fallback float64) float64 {
	if agent != "" {
		if v, ok := d[typ+"/"+agent]; ok && v > 0 {
			return v
		}
	}
	if v, ok := d[typ]; ok && v > 0 {
		return v
	}
	return fallback
}

// Observe moves the estimates of typ and typ/agent toward wall by alpha
// (0 < alpha ≤ 1; anything else counts as 1). The first observation is
// taken as it is.
func (d Durations) Observe(typ, agent string, wall time.Duration, alpha float64) {
	if !(alpha > 0 && alpha <= 1) {
		alpha = 1
	}
	w := max(wall.Seconds(), 0)
	for _, k := range []string{typ, typ + "/" + agent} {
		if k == typ+"/" && agent == "" {
			continue
		}
		if prev, ok := d[k]; ok {
			d[k] = alpha*w + (1-alpha)*prev
		} else {
			d[k] = w
		}
	}
}

// AddWork adds l's estimated remaining work to trees[root]: the estimate of
// one iteration (d.Of, fallback the type's default cost), less what a
// running loop has already run, never below a tenth of the estimate.
// rootCreated is the root's created_at. Terminal loops add nothing.
func AddWork(trees map[string]TreeWork, root string, rootCreated time.Time, l *loop.Loop, d Durations, p FairnessPolicy, now time.Time) {
	if l == nil || l.Status.Terminal() {
		return
	}
	est := d.Of(l.Type, l.Agent, p.defaultCost(l.Type))
	left := est
	if l.Status == loop.Running && !l.StartedAt.IsZero() {
		left = max(est-now.Sub(l.StartedAt).Seconds(), est/10)
	}
	t := trees[root]
	t.Left += left
	if t.Submitted.IsZero() || rootCreated.Before(t.Submitted) {
		t.Submitted = rootCreated
	}
	trees[root] = t
}

// AddWaiting adds n waiting loops of typ on agent to trees[root]: AddWork
// of each at once, for a caller that counts its waiting loops by type and
// profile (readyset) instead of walking them at each decision.
func AddWaiting(trees map[string]TreeWork, root string, rootCreated time.Time, typ, agent string, n int, d Durations, p FairnessPolicy) {
	if n <= 0 {
		return
	}
	t := trees[root]
	t.Left += float64(n) * d.Of(typ, agent, p.defaultCost(typ))
	if t.Submitted.IsZero() || rootCreated.Before(t.Submitted) {
		t.Submitted = rootCreated
	}
	trees[root] = t
}

// TreeOn reports whether w turns the tree term on: Plan reads
// Snapshot.Trees only then.
func (w Weights) TreeOn() bool { return w.TreeBoostMax > 0 || w.TreeAgeBoostMax > 0 }

// TreePoints is what the tree term adds to the priority of a loop of tree
// tw, least being the smallest Left of the trees with waiting loops: tree
// boost + tree age boost, exactly as Plan adds them.
func TreePoints(tw TreeWork, least float64, now time.Time, w Weights) int {
	var s Score
	treeTerms(&s, tw, true, least, now, w)
	return s.Priority
}

// treeTerms fills s's tree boost and tree age for a loop of tree tw, where
// least is the smallest Left of the trees with waiting loops.
func treeTerms(s *Score, tw TreeWork, ok bool, least float64, now time.Time, w Weights) {
	if !ok {
		return
	}
	s.TreeLeft, s.TreeLeast = tw.Left, least
	if w.TreeBoostMax > 0 {
		switch {
		case tw.Left <= 0 || least >= tw.Left:
			s.TreeBoost = w.TreeBoostMax
		default:
			s.TreeBoost = int(math.Round(float64(w.TreeBoostMax) * least / tw.Left))
		}
	}
	if age := now.Sub(tw.Submitted); age > 0 && !tw.Submitted.IsZero() {
		s.TreeAgeMinutes = int(age / time.Minute)
	}
	s.TreeAgeBoost = ageBoost(s.TreeAgeMinutes, w.TreeAgeBoostPerMinute, w.TreeAgeBoostMax)
	s.Priority += s.TreeBoost + s.TreeAgeBoost
}
