package readyset

import (
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// The tree term (scheduler/tree.go) needs, at each decision, the work left
// in every tree of a waiting loop. Walking the waiting loops for it would
// make every decision O(pending); instead the index counts each tree's
// waiting loops by type and profile as they come and go (count), and a
// decision turns the counts into seconds with the learned durations, then
// adds the few running, merging and awaiting loops one by one (treeWork):
// O(trees × types + running). While the tree term is on, the ready groups
// are split by tree as well (groupKey.tree): a group's loops then share
// their tree points, so its order stays created_at, id, and the walk adds
// the group's points to its head's priority.

// workKey is a type and an agent profile ("" for the type's default).
type workKey struct{ typ, agent string }

// treeCount is one tree's waiting loops by type and profile.
type treeCount map[workKey]int

// TreeEnv is what the tree term's estimates need (Env.Tree).
type TreeEnv struct {
	Durations scheduler.Durations      // the learned iteration times
	Fairness  scheduler.FairnessPolicy // its default costs estimate a type never observed
	Now       time.Time                // what a running loop has run is counted at (Decide sets its now)
}

// rootOf returns the id of e's tree's root, as root does with a fresh memo.
func (ix *Index) rootOf(e *entry) string {
	if e.parent == "" {
		return e.id
	}
	cur := e.parent
	for range 1000 {
		n, ok := ix.nodes[cur]
		if !ok || n.parent == "" {
			return cur
		}
		cur = n.parent
	}
	return cur
}

// count adds delta of e to its tree's count.
func (ix *Index) count(e *entry, delta int) {
	k := workKey{e.typ, e.agent}
	tc := ix.trees[e.root]
	if tc == nil {
		if delta <= 0 {
			return
		}
		tc = treeCount{}
		ix.trees[e.root] = tc
	}
	if n := tc[k] + delta; n > 0 {
		tc[k] = n
	} else {
		delete(tc, k)
		if len(tc) == 0 {
			delete(ix.trees, e.root)
		}
	}
}

// putOther keeps l in others while it is unfinished but neither waiting
// nor running (merging, awaiting approval or review): work left in its tree.
func (ix *Index) putOther(l *loop.Loop) {
	if l.Status.Terminal() || l.Status.Waiting() || l.Status == loop.Running {
		delete(ix.others, l.ID)
		return
	}
	ix.others[l.ID] = loop.Loop{ID: l.ID, Type: l.Type, Status: l.Status, Parent: l.Parent, Agent: l.Agent}
}

// fixRoots works every waiting loop's root out again after an ancestor
// appeared or went (O(n), rare: an import, gc, a deletion), moving the
// loops whose root changed to their tree's count and group.
func (ix *Index) fixRoots() {
	if !ix.rootsDirty {
		return
	}
	ix.rootsDirty = false
	for _, n := range ix.nodes {
		e := n.e
		if e == nil {
			continue
		}
		r := ix.rootOf(e)
		if r == e.root {
			continue
		}
		regroup := e.gi >= 0 && ix.w.TreeOn()
		if regroup {
			ix.unready(e)
		}
		ix.count(e, -1)
		e.root = r
		ix.count(e, 1)
		if regroup {
			ix.place(e)
		}
	}
}

// treeWork returns the work left in each tree of a waiting loop
// (scheduler.Snapshot.Trees), nil when env has no TreeEnv (the term is off).
func (ix *Index) treeWork(env *Env) map[string]scheduler.TreeWork {
	te := env.Tree
	if te == nil {
		return nil
	}
	ix.fixRoots()
	out := make(map[string]scheduler.TreeWork, len(ix.trees))
	for root, tc := range ix.trees {
		created := ix.nodes[root].created
		for k, n := range tc {
			scheduler.AddWaiting(out, root, created, k.typ, k.agent, n, te.Durations, te.Fairness)
		}
	}
	memo := map[string]string{}
	for _, m := range []map[string]loop.Loop{ix.running, ix.others} {
		for _, l := range m {
			root := l.ID
			if l.Parent != "" {
				root = ix.root(l.Parent, memo)
			}
			if _, ok := out[root]; ok { // only the trees of waiting loops matter
				scheduler.AddWork(out, root, ix.nodes[root].created, &l, te.Durations, te.Fairness, te.Now)
			}
		}
	}
	return out
}

// leastLeft returns the smallest Left in trees (every tree there has a
// waiting loop: Plan's least), or -1 for none.
func leastLeft(trees map[string]scheduler.TreeWork) float64 {
	least := -1.0
	for _, t := range trees {
		if least < 0 || t.Left < least {
			least = t.Left
		}
	}
	return least
}
