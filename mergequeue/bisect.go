package mergequeue

import (
	"slices"

	"github.com/loopr-dev/loopr/loop"
)

// Item is one passed loop whose branch waits to land on its plan branch.
type Item struct {
	ID     string // the loop
	Branch string // its branch, for messages
	Commit string // the commit that passed: what is merged
	// Iteration is the loop's iteration that passed; the records the
	// queue writes are for it only.
	Iteration int
}

// Attempt is what one try of a batch found.
type Attempt struct {
	Merged  []int         // batch indexes merged onto the tip (and validated together)
	Already []int         // batch indexes the plan branch already holds
	Failed  map[int]error // batch indexes that could not be merged (a conflict)
	// Validated: merge.validate ran on the merged ones (false when there
	// are no commands, or nothing merged).
	Validated bool
	// Passed: the merged ones validated and the plan branch moved to
	// Head. False with Merged set: validation failed, Reason and Output
	// say how, and nothing moved.
	Passed   bool
	Head     string
	Reason   string          // one line: the command that failed and how
	Output   string          // the end of its output
	Evidence []loop.Evidence // merge.validate's commands, on Head
	// Suspend: a before_merge hook with on_error: suspend refused it
	// (Plan.Before): its loop waits for a person.
	Suspend bool
}

// Try merges batch onto the plan branch's tip, validates the result and,
// when it passes, lands it. An error means nothing is known (git failed,
// the branch moved, the lease is gone): the drain stops there and what it
// has not settled waits for the next one.
type Try func(batch []Item) (Attempt, error)

// Sink records what a drain settles, as it settles it.
type Sink interface {
	// Landed: items are on the plan branch, admitted by a (the Evidence
	// and Head of a) passing attempt, or found there already (a zero
	// Attempt).
	Landed(items []Item, a Attempt)
	// Rejected: item is sent back to its loop: it conflicts with the plan
	// branch (conflict set), or breaks merge.validate (failed, the attempt
	// that showed it, which may have held others too).
	Rejected(item Item, conflict error, failed *Attempt)
}

// Stats counts what a drain did.
type Stats struct {
	Trials      int // attempts (merges tried)
	Validations int // attempts that ran merge.validate
	Landed      int
	Rejected    int
	// IsolatedAt is the validation run after which the last breaker was
	// known (0: no breaker).
	IsolatedAt int
}

// Drain lands items, in order, in batches of at most n (Bors style): a
// batch that validates lands whole; one that fails is split in halves,
// the first half tried on its own, until each breaker is found, and only
// breakers are sent back. When the first half of a failing batch lands
// whole, the second half is known to fail on the new tip and is split
// without being tried as a whole; when it does not, the second half goes
// back to the head of the queue, to be batched again. A candidate that
// conflicts with the tip alone is sent back; one that conflicts only with
// a candidate merged before it in the same try is tried again later, at
// the head of a batch. Drain returns at the first error of try; items not
// yet settled are left as they are (for the next drain).
func Drain(items []Item, n int, try Try, sink Sink) (Stats, error) {
	d := &drain{queue: append([]Item(nil), items...), pos: make(map[string]int, len(items)), n: max(n, 1), try: try, sink: sink}
	for i, it := range items {
		d.pos[it.ID] = i
	}
	for len(d.queue) > 0 && d.err == nil {
		k := min(d.n, len(d.queue))
		batch := d.queue[:k:k]
		d.queue = d.queue[k:]
		d.settle(batch)
	}
	return d.stats, d.err
}

type drain struct {
	queue []Item
	pos   map[string]int // each item's place in the original order
	n     int
	try   Try
	sink  Sink
	stats Stats
	err   error
}

// settle tries batch and settles what it can; it reports whether every
// item of batch landed.
func (d *drain) settle(batch []Item) bool {
	if d.err != nil {
		return false
	}
	a, err := d.try(batch)
	d.stats.Trials++
	if a.Validated {
		d.stats.Validations++
	}
	if err != nil {
		d.err = err
		return false
	}
	if len(a.Already) > 0 {
		d.land(pick(batch, a.Already), Attempt{})
	}
	var later []Item
	for i, it := range batch {
		ferr, failed := a.Failed[i]
		if !failed {
			continue
		}
		if firstMerged(a.Merged) > i {
			d.reject(it, ferr, nil) // conflicts with the tip itself
		} else {
			later = append(later, it)
		}
	}
	d.requeue(later)
	merged := pick(batch, a.Merged)
	switch {
	case len(merged) == 0:
		return len(a.Failed) == 0
	case a.Passed:
		d.land(merged, a)
		return len(a.Failed) == 0
	}
	d.bisect(merged, &a)
	return false
}

// bisect settles items, known to fail together on the current tip (bad
// showed it): one item is the breaker; of more, the first half is tried
// on its own.
func (d *drain) bisect(items []Item, bad *Attempt) {
	if len(items) == 1 {
		d.reject(items[0], nil, bad)
		return
	}
	half := (len(items) + 1) / 2
	left, right := items[:half:half], items[half:]
	if d.settle(left) {
		d.bisect(right, bad) // the tip holds left now, and left+right failed
	} else {
		d.requeue(right) // unknown: left may hold every breaker
	}
}

func (d *drain) land(items []Item, a Attempt) {
	d.stats.Landed += len(items)
	d.sink.Landed(items, a)
}

func (d *drain) reject(it Item, conflict error, failed *Attempt) {
	d.stats.Rejected++
	if failed != nil {
		d.stats.IsolatedAt = d.stats.Validations
	}
	d.sink.Rejected(it, conflict, failed)
}

// requeue puts items back into the queue, which stays in the original
// order: they were ahead of everything still in it.
func (d *drain) requeue(items []Item) {
	if len(items) == 0 {
		return
	}
	d.queue = append(append([]Item(nil), items...), d.queue...)
	slices.SortStableFunc(d.queue, func(a, b Item) int { return d.pos[a.ID] - d.pos[b.ID] })
}

// firstMerged is the lowest merged index, or a huge one when none merged.
func firstMerged(merged []int) int {
	first := int(^uint(0) >> 1)
	for _, i := range merged {
		first = min(first, i)
	}
	return first
}

// pick returns batch's items at idx, in order.
func pick(batch []Item, idx []int) []Item {
	out := make([]Item, 0, len(idx))
	for _, i := range idx {
		out = append(out, batch[i])
	}
	return out
}
