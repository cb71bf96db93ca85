// Package readyset is the scheduler's incremental view of the store: an
// in-memory index of every waiting loop's scheduling fields (never its task
// text), every loop's status and parent, and the running loops, kept in step
// with the store by its followers (store.Follow) and queried once per
// scheduling tick without reading or decoding a single record.
//
// Decide answers exactly what scheduler.Plan would start — the same ids in
// the same order — in time that depends on the loops it looks at, not on
// how many wait. Ready loops are kept in groups of equal type and equal
// static score part (depth boost − retry penalty): within a group the age
// boost, whatever the whole-minute floor and the cap, never rises with
// created_at, so the group's order is created_at then id, which never
// changes, and a heap keeps it. A decision merges the groups' heads by the
// exact priority at now (tier desc, priority desc, created_at asc, id asc),
// admits under the same caps, quotas and conflicts as Plan, and stops when
// the slots are full. Backoffs and deadlines move loops in and out of the
// groups through two time heaps, so nothing is scanned when time passes
// (when the clock goes back, the gates are worked out again once, O(n)).
//
// A loop's depends_on gate reads one flag per dependency (met: its subtree
// is done, or it was cancelled); the index keeps the waiting loops by the
// ids they depend on, so a dependency that becomes met (or goes) places
// them again at once, without a scan.
//
// Where the fast walk cannot be exact cheaply — fair queuing on, an agent
// profile rate limited or in its recovery ramp (Plan picks the fallbacks),
// or a walk that skips too many loops held by quotas, conflicts, spent
// budgets or missing artifacts —
// Decide runs scheduler.Plan over a snapshot of the index instead
// (Snapshot): still no store read, but O(n log n).
//
// Like the scheduler it does no I/O: the caller passes now, the rate-limit
// state and a function that says whether an artifact exists. Its methods
// are safe for concurrent use.
package readyset

import (
	"slices"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// Change is one loop record written (Loop set) or deleted (Loop nil).
type Change struct {
	ID   string
	Loop *loop.Loop
}

// node is what the index knows about every loop: enough for its children's
// parent gate, the depends_on gate of the loops that name it, and the roots
// of fairness keys.
type node struct {
	status loop.Status
	parent string
	met    bool   // loop.(*Loop).DependencyMet: its subtree is done, or it was cancelled
	e      *entry // its scheduling fields while it waits; nil otherwise
	// created is its created_at: a root's is its tree's submission (the
	// tree term's age).
	created time.Time
}

// entry is one waiting (pending, paused or needs_human) loop's scheduling fields.
type entry struct {
	id, typ, parent, title, triggeredBy string
	fairnessKey, conflictKey, owner     string
	agent                               string
	usage                               loop.Usage
	budget                              loop.Budget
	status                              loop.Status
	depth, iteration                    int
	created, runnableAt, deadline       time.Time
	costHint                            float64
	needs                               *loop.Needs // why a needs_human loop waits (shared, never changed)
	deps                                []string    // depends_on

	parentOK bool // no parent, or the parent exists and is complete
	depsOK   bool // every loop of deps is met or does not exist
	orphan   bool // the parent does not exist (in Index.orphans)
	delayed  bool // runnable_at after the index's watermark
	dead     bool // deadline at or before the watermark
	grp      *group
	gi       int    // position in grp's heap; -1: not ready
	di, dli  int    // positions in the delay and deadline heaps; -1: not in them
	ci       int    // position in the index's children list of its parent
	root     string // the id of its tree's root (tree.go), counted in Index.trees
}

// ready reports whether e passes every gate that depends on its own record
// and its parent at the watermark (the artifact is checked by Decide).
func (e *entry) ready() bool {
	return e.status == loop.Pending && e.parentOK && e.depsOK && !e.delayed && !e.dead && !e.budget.Spent(e.usage)
}

// lite returns the loop record the entry stands for, with the fields
// scheduler.Plan and its rows read and no others (no long texts, lease,
// updated_at or max_iterations).
func (e *entry) lite() loop.Loop {
	return loop.Loop{
		ID: e.id, Type: e.typ, Status: e.status, Parent: e.parent, Depth: e.depth,
		TriggeredBy: e.triggeredBy, Title: e.title, Iteration: e.iteration,
		CreatedAt: e.created, RunnableAt: e.runnableAt, Deadline: e.deadline,
		FairnessKey: e.fairnessKey, ConflictKey: e.conflictKey, CostHint: e.costHint, Owner: e.owner,
		Needs: e.needs,
		Agent: e.agent, Usage: e.usage, Budget: e.budget, DependsOn: e.deps,
	}
}

// groupKey identifies a group: a type and the static part of the score.
type groupKey struct {
	typ    string
	static int    // depth × depth boost − retry penalty
	tree   string // the tree's root id while the tree term is on (its points are the tree's): "" off
}

// group holds the ready loops of one groupKey in created_at, id order.
type group struct {
	key groupKey
	h   heapOf
}

func byCreated(a, b *entry) bool {
	if c := a.created.Compare(b.created); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

// Index is the incremental ready state. The zero value is not usable: call New.
type Index struct {
	mu       sync.Mutex
	nodes    map[string]node
	nwaiting int                 // loops with an entry (pending or paused)
	roots    map[*entry]struct{} // the waiting loops without a parent
	children map[string][]*entry // waiting loops by parent id
	// dependents holds the waiting loops by each id of their depends_on:
	// when that loop becomes met (or goes), they are looked at again.
	dependents map[string][]*entry
	running    map[string]loop.Loop
	groups     map[groupKey]*group
	w          scheduler.Weights // the weights the groups were formed with
	t          time.Time         // watermark: delayed and dead are as of t
	delay      heapOf            // entries with runnable_at after t
	dline      heapOf            // entries with a deadline after t
	nready     int
	loading    bool                // Load: heaps are appended to, ordered at the end
	orphans    map[*entry]struct{} // waiting loops whose parent does not exist
	expired    map[*entry]struct{} // waiting loops whose deadline passed at t
	// The tree term's input (tree.go): the waiting loops of each tree
	// counted by type and profile, the merging and awaiting loops (the
	// running ones are in running), and whether some waiting loop's root
	// may have changed (an ancestor appeared or went).
	trees      map[string]treeCount
	others     map[string]loop.Loop
	rootsDirty bool
}

// New returns an empty index whose groups use the weights w.
func New(w scheduler.Weights) *Index {
	ix := &Index{
		nodes: map[string]node{}, children: map[string][]*entry{}, roots: map[*entry]struct{}{},
		dependents: map[string][]*entry{},
		running:    map[string]loop.Loop{}, groups: map[groupKey]*group{}, w: w,
		orphans: map[*entry]struct{}{}, expired: map[*entry]struct{}{},
		trees: map[string]treeCount{}, others: map[string]loop.Loop{},
	}
	ix.delay = heapOf{
		less: func(a, b *entry) bool { return a.runnableAt.Before(b.runnableAt) },
		pos:  func(e *entry) *int { return &e.di },
	}
	ix.dline = heapOf{
		less: func(a, b *entry) bool { return a.deadline.Before(b.deadline) },
		pos:  func(e *entry) *int { return &e.dli },
	}
	return ix
}

// Load fills an empty index with every record: each calls put once per
// record (loops records, waiting of them pending or paused: room to make
// up front). The heaps are built once at the end, in linear time.
func (ix *Index) Load(loops, waiting int, each func(put func(*loop.Loop)) error) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if len(ix.nodes) == 0 {
		ix.nodes = make(map[string]node, loops)
		ix.children = make(map[string][]*entry, waiting/8)
	}
	ix.loading = true
	err := each(ix.put)
	// Records came in any order: a parent may have come after its child,
	// whose root was then worked out short. Once, here, not at the first
	// decision.
	ix.rootsDirty = true
	ix.fixRoots()
	ix.loading = false
	for _, h := range []*heapOf{&ix.delay, &ix.dline} {
		h.init()
	}
	for _, g := range ix.groups {
		g.h.init()
	}
	return err
}

// Apply brings the index up to date with committed changes, in order.
func (ix *Index) Apply(changes []Change) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, c := range changes {
		if c.Loop == nil {
			ix.remove(c.ID)
		} else {
			ix.put(c.Loop)
		}
	}
}

// Len returns how many loops the index knows, and how many of them wait.
func (ix *Index) Len() (loops, waiting int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return len(ix.nodes), ix.nwaiting
}

func (ix *Index) put(l *loop.Loop) {
	old, existed := ix.nodes[l.ID]
	if old.e != nil {
		ix.dropEntry(old.e)
	}
	n := node{status: l.Status, parent: l.Parent, met: l.DependencyMet(), created: l.CreatedAt}
	if !existed && ix.trees[l.ID] != nil {
		ix.rootsDirty = true // loops counted it as a missing root: it has one above it now
	}
	ix.nodes[l.ID] = n // before addEntry: a loop never depends on itself, but its gates read the nodes
	if l.Status.Waiting() {
		n.e = ix.addEntry(l)
		ix.nodes[l.ID] = n
	}
	if l.Status == loop.Running {
		ix.running[l.ID] = loop.Loop{ID: l.ID, Type: l.Type, Status: l.Status, Parent: l.Parent,
			Owner: l.Owner, ConflictKey: l.ConflictKey, FairnessKey: l.FairnessKey, Agent: l.Agent,
			StartedAt: l.StartedAt}
	} else {
		delete(ix.running, l.ID)
	}
	ix.putOther(l)
	if !existed || (old.status == loop.Complete) != (l.Status == loop.Complete) {
		ix.refreshChildren(l.ID)
	}
	if !existed || old.met != n.met {
		ix.refreshDependents(l.ID)
	}
}

func (ix *Index) remove(id string) {
	n, ok := ix.nodes[id]
	if !ok {
		return
	}
	delete(ix.nodes, id)
	if n.e != nil {
		ix.dropEntry(n.e)
	}
	delete(ix.running, id)
	delete(ix.others, id)
	ix.rootsDirty = true // the loops below it, if any, have it as their root now
	ix.refreshChildren(id)
	ix.refreshDependents(id) // gone: long done, it holds no one back
}

// refreshDependents re-evaluates the depends_on gate of the waiting loops
// that name id: it became met, stopped being met, appeared or went.
func (ix *Index) refreshDependents(id string) {
	for _, e := range ix.dependents[id] {
		ix.setDeps(e)
	}
}

// setDeps re-evaluates e's depends_on gate and where it belongs.
func (ix *Index) setDeps(e *entry) {
	e.depsOK = true
	for _, d := range e.deps {
		if n, ok := ix.nodes[d]; ok && !n.met {
			e.depsOK = false
			break
		}
	}
	ix.place(e)
}

// refreshChildren re-evaluates the parent gate of id's waiting children.
func (ix *Index) refreshChildren(id string) {
	for _, c := range ix.children[id] {
		ix.setParent(c)
	}
}

// setParent re-evaluates e's parent gate and where it belongs.
func (ix *Index) setParent(e *entry) {
	if e.parent == "" {
		e.parentOK = true
		return
	}
	p, ok := ix.nodes[e.parent]
	if ok == e.orphan { // the parent appeared or vanished
		if e.orphan = !ok; e.orphan {
			ix.orphans[e] = struct{}{}
		} else {
			delete(ix.orphans, e)
		}
	}
	e.parentOK = ok && p.status == loop.Complete
	ix.place(e)
}

// copyNeeds copies n: the entry must not share what the caller may reuse.
func copyNeeds(n *loop.Needs) *loop.Needs {
	if n == nil {
		return nil
	}
	c := *n
	return &c
}

// staticScore is the part of the score that depends on the record only.
func staticScore(w scheduler.Weights, depth, iteration int) int {
	return depth*w.DepthBoostPerLevel - min(max(iteration-1, 0)*w.RetryPenaltyPerIteration, w.RetryPenaltyMax)
}

func (ix *Index) addEntry(l *loop.Loop) *entry {
	e := &entry{
		id: l.ID, typ: l.Type, parent: l.Parent, title: l.Title, triggeredBy: l.TriggeredBy,
		fairnessKey: l.FairnessKey, conflictKey: l.ConflictKey, owner: l.Owner, status: l.Status,
		depth: l.Depth, iteration: l.Iteration,
		created: l.CreatedAt, runnableAt: l.RunnableAt, deadline: l.Deadline,
		costHint: l.CostHint, needs: copyNeeds(l.Needs), gi: -1, di: -1, dli: -1, ci: -1,
		agent: l.Agent, usage: l.Usage, budget: l.Budget,
	}
	ix.nwaiting++
	if e.parent == "" {
		ix.roots[e] = struct{}{}
	}
	e.root = ix.rootOf(e)
	ix.count(e, 1)
	if e.parent != "" {
		kids := ix.children[e.parent]
		if len(kids) > 0 { // share the siblings' copies of the parent id and its artifact path
			sib := kids[len(kids)-1]
			e.parent = sib.parent
			if e.triggeredBy == sib.triggeredBy {
				e.triggeredBy = sib.triggeredBy
			}
		}
		e.ci = len(kids)
		ix.children[e.parent] = append(kids, e)
	}
	e.delayed = e.runnableAt.After(ix.t)
	if e.delayed {
		ix.pushTo(&ix.delay, e)
	}
	if !e.deadline.IsZero() {
		if e.deadline.After(ix.t) {
			ix.pushTo(&ix.dline, e)
		} else {
			e.dead = true
			ix.expired[e] = struct{}{}
		}
	}
	e.parentOK, e.depsOK = true, true
	if len(l.DependsOn) > 0 {
		e.deps = slices.Clone(l.DependsOn)
		for _, d := range e.deps {
			ix.dependents[d] = append(ix.dependents[d], e)
		}
		for _, d := range e.deps {
			if n, ok := ix.nodes[d]; ok && !n.met {
				e.depsOK = false
				break
			}
		}
	}
	if e.parent != "" {
		ix.setParent(e) // places e
		return e
	}
	ix.place(e)
	return e
}

// pushTo pushes e onto h, or only appends it while loading.
func (ix *Index) pushTo(h *heapOf, e *entry) {
	if ix.loading {
		h.add(e)
		return
	}
	h.push(e)
}

func (ix *Index) dropEntry(e *entry) {
	ix.unready(e)
	if e.di >= 0 {
		ix.delay.remove(e)
	}
	if e.dli >= 0 {
		ix.dline.remove(e)
	}
	if e.ci >= 0 {
		kids := ix.children[e.parent]
		last := len(kids) - 1
		kids[e.ci] = kids[last]
		kids[e.ci].ci = e.ci
		kids[last] = nil
		if last == 0 {
			delete(ix.children, e.parent)
		} else {
			ix.children[e.parent] = kids[:last]
		}
		e.ci = -1
	}
	for _, d := range e.deps {
		ix.dropDependent(d, e)
	}
	if e.orphan {
		delete(ix.orphans, e)
	}
	if e.dead {
		delete(ix.expired, e)
	}
	ix.nwaiting--
	delete(ix.roots, e)
	ix.count(e, -1)
}

// dropDependent takes e out of the dependents of id.
func (ix *Index) dropDependent(id string, e *entry) {
	ds := ix.dependents[id]
	for i := 0; i < len(ds); i++ {
		if ds[i] == e {
			last := len(ds) - 1
			ds[i], ds[last] = ds[last], nil
			ds = ds[:last]
			i--
		}
	}
	if len(ds) == 0 {
		delete(ix.dependents, id)
	} else {
		ix.dependents[id] = ds
	}
}

// place puts e in its group when it is ready and takes it out when not.
func (ix *Index) place(e *entry) {
	switch ready := e.ready(); {
	case ready && e.gi < 0:
		k := groupKey{typ: e.typ, static: staticScore(ix.w, e.depth, e.iteration)}
		if ix.w.TreeOn() {
			k.tree = e.root
		}
		g := ix.groups[k]
		if g == nil {
			g = &group{key: k, h: heapOf{less: byCreated, pos: func(e *entry) *int { return &e.gi }}}
			ix.groups[k] = g
		}
		e.grp = g
		ix.pushTo(&g.h, e)
		ix.nready++
	case !ready && e.gi >= 0:
		ix.unready(e)
	}
}

func (ix *Index) unready(e *entry) {
	if e.gi < 0 {
		return
	}
	g := e.grp
	g.h.remove(e)
	e.grp = nil
	ix.nready--
	if g.h.len() == 0 {
		delete(ix.groups, g.key)
	}
}

// advance moves the watermark to now (not before it): backoffs that ended
// make loops ready, deadlines that passed make them not.
func (ix *Index) advance(now time.Time) {
	if !now.After(ix.t) {
		return
	}
	ix.t = now
	for ix.delay.len() > 0 && !ix.delay.top().runnableAt.After(now) {
		e := ix.delay.pop()
		e.delayed = false
		ix.place(e)
	}
	for ix.dline.len() > 0 && !ix.dline.top().deadline.After(now) {
		e := ix.dline.pop()
		e.dead = true
		ix.expired[e] = struct{}{}
		ix.place(e)
	}
}

// rewind moves the watermark back to now (the clock went back): every
// waiting loop's backoff and deadline gates are worked out again, O(n).
func (ix *Index) rewind(now time.Time) {
	for _, h := range []*heapOf{&ix.delay, &ix.dline} {
		for _, e := range h.items {
			*h.pos(e) = -1
		}
		clear(h.items)
		h.items = h.items[:0]
	}
	clear(ix.expired)
	ix.t = now
	for _, n := range ix.nodes {
		e := n.e
		if e == nil {
			continue
		}
		e.delayed = e.runnableAt.After(now)
		if e.delayed {
			ix.delay.add(e)
		}
		e.dead = false
		if !e.deadline.IsZero() {
			if e.deadline.After(now) {
				ix.dline.add(e)
			} else {
				e.dead = true
				ix.expired[e] = struct{}{}
			}
		}
		ix.place(e)
	}
	ix.delay.init()
	ix.dline.init()
}

// setWeights regroups the ready loops when the score weights changed.
func (ix *Index) setWeights(w scheduler.Weights) {
	if w == ix.w {
		return
	}
	var ready []*entry
	for _, g := range ix.groups {
		ready = append(ready, g.h.items...)
	}
	for _, e := range ready {
		ix.unready(e)
	}
	ix.w = w
	for _, e := range ready {
		ix.place(e)
	}
}

// Due returns, at now, the waiting loops whose deadline passed and those
// whose parent does not exist, in id order: what the manager's sweep
// expires and fails, found without scanning.
func (ix *Index) Due(now time.Time) (expired, orphaned []string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if now.Before(ix.t) {
		ix.rewind(now) // the clock went back
	}
	ix.advance(now)
	for e := range ix.expired {
		expired = append(expired, e.id)
	}
	for e := range ix.orphans {
		orphaned = append(orphaned, e.id)
	}
	slices.Sort(expired)
	slices.Sort(orphaned)
	return expired, orphaned
}

// Next returns the earliest runnable_at after now among the waiting loops
// (zero when none): when a backoff ends and the next decision may differ.
func (ix *Index) Next(now time.Time) time.Time {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if now.Before(ix.t) {
		ix.rewind(now) // the clock went back
	}
	ix.advance(now)
	if ix.delay.len() > 0 {
		return ix.delay.top().runnableAt
	}
	return time.Time{}
}
