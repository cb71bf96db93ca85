package scheduler

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// Candidate is one waiting loop and what the caller knows about its
// surroundings: the scheduler never reads the store, so the facts it needs
// about the parent and the artifact come in here.
type Candidate struct {
	Loop            *loop.Loop
	ParentStatus    loop.Status // the parent's status; "" for a root (a child with "" counts as incomplete)
	ParentMissing   bool        // Loop.Parent names a record that does not exist
	ArtifactMissing bool        // the artifact at Loop.TriggeredBy does not exist
	// Root is the id of the root of the loop's tree: the default fairness
	// key, and the key of Snapshot.Spent. Read with fairness on or Spent
	// set; "" for a root loop (see FairnessKey).
	Root string
	// Deps is what the caller found of each loop of Loop.DependsOn, in that
	// order (DepOf): the depends_on gate holds the loop while one of them
	// is not met. The caller reads one record per dependency, never a
	// subtree: a dependency's subtree_done_at says its subtree is done.
	Deps []Dep
}

// Dep is one loop a candidate depends on.
type Dep struct {
	ID     string
	Status loop.Status // "" when no such loop exists
	Met    bool        // loop.(*Loop).DependencyMet, or no such loop (deleted: long done)
}

// DepOf is the Dep for id whose record is l, nil when none exists.
func DepOf(id string, l *loop.Loop) Dep {
	if l == nil {
		return Dep{ID: id, Met: true}
	}
	return Dep{ID: id, Status: l.Status, Met: l.DependencyMet()}
}

// depsWait reports whether a dependency in deps is not met.
func depsWait(deps []Dep) bool {
	for _, d := range deps {
		if !d.Met {
			return true
		}
	}
	return false
}

// Snapshot is the state Plan decides on.
type Snapshot struct {
	Waiting []Candidate    // pending and paused loops, in any order
	Running map[string]int // running loops by type: what the caps count
	// Active lists the running loops themselves: the holders of conflict
	// keys and the loops counted against their owner's quota. Only read
	// when the policy has conflict groups or quotas.
	Active    []*loop.Loop
	RateLimit ratelimit.State // a backoff of the whole daemon: holds back every loop (loopr sim)
	// Limits is the rate-limit state of each agent profile by name
	// (Policy.Agents); a profile not in it is not limited.
	Limits map[string]ratelimit.State
	// Spent holds the trees whose budget is spent, by root id, with the
	// text of their budget reason.
	Spent       map[string]string
	DiskLow     bool   // free space is below the configured minimum
	DiskLowText string // e.g. "disk low: 3.2 GB free, minimum 5 GB"; "" → "disk low"
	// Untrusted, when not "", holds back every loop (reason untrusted):
	// the configuration's commands are not trusted on this machine. It is
	// the reason's text.
	Untrusted string
	// Fairness is the learned fair-queuing state; only read with fairness on.
	Fairness Fairness
	// Preflight holds, per loop type, why every iteration of that type
	// would fail in this workspace (e.g. `agent "claude" is not on PATH`):
	// its loops wait (reason preflight) rather than spend iterations. The
	// caller checks; nil: nothing known to be wrong.
	Preflight map[string]string
	// NoGit lists the loop types whose loops share the workspace directory
	// (no git worktrees): one loop of these types runs at a time, all of
	// them together (reason no_git). NoGitText says why; "" → a default.
	NoGit     map[string]bool
	NoGitText string
	// Trees is the work left in each tree, by root id (AddWork): the
	// tree term's input. nil, or a loop whose tree is not in it: no tree
	// term for that loop.
	Trees map[string]TreeWork
}

// Row is one waiting loop in the decision.
type Row struct {
	Loop  *loop.Loop `json:"loop"`
	Score Score      `json:"score"`
	Tier  int        `json:"tier,omitempty"` // the type's tier; 0: none
	// With fairness on: the loop's fairness key, the key's accumulated
	// cost when the walk reached this row, and the loop's estimated cost.
	Key     string  `json:"key,omitempty"`
	KeyUsed float64 `json:"key_used,omitempty"`
	Cost    float64 `json:"cost,omitempty"`
	// Agent is the profile the loop's next iteration runs on: its own, or
	// a fallback while its own is limited (Policy.Agents).
	Agent    string   `json:"agent,omitempty"`
	Runnable bool     `json:"runnable"`          // starts now
	Reasons  []Reason `json:"reasons,omitempty"` // every failing gate, in gate order; nil when Runnable
}

// Eligible reports whether the row is held back by capacity gates only
// (rate limit, caps, quota, conflict), or not at all.
func (r Row) Eligible() bool {
	for _, re := range r.Reasons {
		if !re.Code.Capacity() {
			return false
		}
	}
	return true
}

// Has reports whether c is among the row's reasons.
func (r Row) Has(c Code) bool {
	return slices.ContainsFunc(r.Reasons, func(re Reason) bool { return re.Code == c })
}

// Decision is the outcome of Plan.
type Decision struct {
	Rows     []Row    `json:"rows"`     // every waiting loop, in scheduling order
	Start    []string `json:"start"`    // ids of the loops to start now, in order
	Waiting  int      `json:"waiting"`  // len(Rows)
	Eligible int      `json:"eligible"` // rows held back by capacity gates only, or starting
	Running  int      `json:"running"`  // loops running before this plan, all types
	Slots    int      `json:"slots"`    // free global slots before this plan: max(0, MaxLoops − Running)
	// Charges are the costs to charge to the fairness keys of the loops in
	// Start, in the same order (fairness on only). The caller applies those
	// of the loops it did start to its Fairness and persists it.
	Charges []Charge `json:"charges,omitempty"`
}

// sortKey is what the order looks at, packed so the sort moves small values.
type sortKey struct {
	prio  int
	sec   int64 // created_at
	nsec  int32
	typ   int32 // index into typeTable.types
	idx   int32 // index into Snapshot.Waiting / the scores
	tier  int32
	fkey  int32 // index into keyTable.keys (fairness on)
	fails gates // the loop's own gates that fail (fits in padding)
	id    string
}

// gates is a set of the gates that depend on the loop alone, found while
// scoring so that the ordered walk reads a loop record only to word a reason.
type gates uint16

const (
	gPaused gates = 1 << iota
	gNeedsHuman
	gOrphaned
	gParentIncomplete
	gArtifactMissing
	gDependsOn
	gBackoff
	gDeadlinePassed
	gBudget
)

func loopGates(c Candidate, now time.Time) gates {
	l := c.Loop
	var g gates
	if l.Status != loop.Pending { // the common case: one comparison
		switch l.Status {
		case loop.Paused:
			g |= gPaused
		case loop.NeedsHuman:
			g |= gNeedsHuman
		}
	}
	if l.Parent != "" {
		switch {
		case c.ParentMissing:
			g |= gOrphaned
		case c.ParentStatus != loop.Complete:
			g |= gParentIncomplete
		}
	}
	if c.ArtifactMissing {
		g |= gArtifactMissing
	}
	if len(c.Deps) > 0 && depsWait(c.Deps) {
		g |= gDependsOn
	}
	if l.RunnableAt.After(now) {
		g |= gBackoff
	}
	if !l.Deadline.IsZero() && !l.Deadline.After(now) {
		g |= gDeadlinePassed
	}
	if budgetSpent(l) {
		g |= gBudget
	}
	return g
}

// treeOf returns the id of the root of c's tree.
func treeOf(c *Candidate) string {
	if c.Loop.Parent == "" {
		return c.Loop.ID
	}
	return c.Root
}

// appendLoopReasons appends the reasons for g, in gate order.
func appendLoopReasons(rs []Reason, g gates, c Candidate, now time.Time, tree string) []Reason {
	l := c.Loop
	if g&gPaused != 0 {
		rs = append(rs, Reason{Paused, pausedText})
	}
	if g&gNeedsHuman != 0 {
		rs = append(rs, Reason{NeedsHuman, needsText(l.Needs)})
	}
	if g&gOrphaned != 0 {
		rs = append(rs, Reason{Orphaned, orphanedText(l.Parent)})
	}
	if g&gParentIncomplete != 0 {
		rs = append(rs, Reason{ParentIncomplete, parentIncompleteText(c.ParentStatus)})
	}
	if g&gArtifactMissing != 0 {
		rs = append(rs, Reason{ArtifactMissing, artifactMissingText(l.TriggeredBy)})
	}
	if g&gDependsOn != 0 {
		rs = append(rs, Reason{DependsOn, dependsText(c.Deps)})
	}
	if g&gBackoff != 0 {
		rs = append(rs, Reason{Backoff, backoffText(l, now)})
	}
	if g&gDeadlinePassed != 0 {
		rs = append(rs, Reason{DeadlinePassed, deadlineText(l.Deadline, now)})
	}
	if g&gBudget != 0 {
		if budgetSpent(l) {
			rs = append(rs, Reason{Budget, BudgetText("budget", l.Budget, l.Usage)})
		} else {
			rs = append(rs, Reason{Budget, tree})
		}
	}
	return rs
}

// compareKeys is the seed-004 order within tiers: tier desc, priority desc,
// created_at asc, id asc. Without tiers (all 0) it is seed 004's order.
func compareKeys(a, b sortKey) int {
	if c := cmp.Compare(b.tier, a.tier); c != 0 {
		return c // higher tier first
	}
	if c := cmp.Compare(b.prio, a.prio); c != 0 {
		return c // higher priority first
	}
	if c := cmp.Compare(a.sec, b.sec); c != 0 {
		return c // then older first
	}
	if c := cmp.Compare(a.nsec, b.nsec); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id) // then id: total and stable
}

// compareRuns groups the keys by tier and fairness key, each group in
// seed-004 order: the runs that the fair walk merges.
func compareRuns(a, b sortKey) int {
	if c := cmp.Compare(b.tier, a.tier); c != 0 {
		return c
	}
	if c := cmp.Compare(a.fkey, b.fkey); c != 0 {
		return c
	}
	return compareKeys(a, b)
}

// capState counts running and admitted loops against one limit (a tier or
// an owner's quota), with its reason text cached per count.
type capState struct {
	limit    int
	running  int
	selected int
	text     string
	textUsed int
}

// typeState is the per-type bookkeeping of one Plan.
type typeState struct {
	name     string
	base     int
	cap      int // 0: none
	running  int
	selected int
	capText  string // cached type cap text for capUsed
	capUsed  int
	tier     int
	tierCap  *capState // nil: no tier
	group    string    // conflict group; "": none
	defCost  float64   // fairness: the type's default cost
	pre      string    // preflight problem of the type; "": none
	noGit    bool      // shares the workspace directory (no_git)
}

type typeTable struct {
	idx   map[string]int32
	types []typeState
}

// fairKey is one fairness key in a plan.
type fairKey struct {
	name  string
	used  float64            // accumulated cost, plus what this plan admitted
	costs map[string]float64 // learned cost by type; nil when unknown
}

type keyTable struct {
	idx  map[string]int32
	keys []fairKey
}

// holdKey is a conflict group and a conflict key.
type holdKey struct{ group, key string }

// holder is the loop holding a conflict key.
type holder struct {
	id      string
	running bool // running before this plan (else admitted by it)
}

// walk is the state of one Plan's gates and admission.
type walk struct {
	s   *Snapshot
	now time.Time
	p   *Policy

	tt     typeTable
	kt     keyTable
	floor  float64 // fairness: where unknown keys start
	scores []Score
	d      Decision
	pool   []Reason // every row's reasons share one backing array

	running, selected   int
	blocked, recovering bool
	rateText, diskText  string
	noGitText           string
	noGitUsed           int // loops of NoGit types running or admitted
	globalText          string
	globalUsed          int
	tiers               map[int]*capState
	owners              map[string]*capState
	ownerRunning        map[string]int
	held                map[holdKey]holder
	onProfile           map[string]int // loops admitted on each agent profile (its recovery ramp)
}

func (w *walk) typeIndex(t string) int32 {
	if i, ok := w.tt.idx[t]; ok {
		return i
	}
	i := int32(len(w.tt.types))
	w.tt.idx[t] = i
	ts := typeState{
		name: t, base: w.p.Base[t], cap: max(w.p.TypeCap[t], 0), running: max(w.s.Running[t], 0), capUsed: -1,
		group: w.p.ConflictGroup[t], defCost: w.p.Fairness.defaultCost(t),
		pre: w.s.Preflight[t], noGit: w.s.NoGit[t],
	}
	if tier := w.p.Tier[t]; tier > 0 {
		ts.tier, ts.tierCap = tier, w.tiers[tier]
	}
	w.tt.types = append(w.tt.types, ts)
	return i
}

func (w *walk) keyIndex(name string) int32 {
	if i, ok := w.kt.idx[name]; ok {
		return i
	}
	i := int32(len(w.kt.keys))
	w.kt.idx[name] = i
	k := fairKey{name: name, used: w.floor}
	if u, ok := w.s.Fairness.Lookup(name, w.now, w.p.Fairness.IdleTTL); ok {
		k.used, k.costs = u.Used, u.Cost
	}
	w.kt.keys = append(w.kt.keys, k)
	return i
}

// owner returns the quota state of owner, nil when it has no quota.
func (w *walk) owner(name string) *capState {
	if len(w.p.OwnerCap) == 0 {
		return nil
	}
	if st, ok := w.owners[name]; ok {
		return st
	}
	var st *capState
	if limit := w.p.OwnerCap[name]; limit > 0 {
		st = &capState{limit: limit, running: w.ownerRunning[name], textUsed: -1}
	}
	w.owners[name] = st
	return st
}

// Plan decides which waiting loops start now. It is a pure function of its
// arguments: same snapshot, instant and policy, same decision, whatever the
// order of s.Waiting.
//
// The pipeline (see README.md):
//
//  1. Score every waiting loop once (ScoreOf) and find its own gates.
//  2. Order: tier desc, then priority desc, created_at asc, id asc. With
//     fairness on, within a tier the loop whose fairness key has the lowest
//     accumulated cost comes first, then that order; each admission adds the
//     loop's estimated cost to its key, which re-orders what is left.
//  3. Walk the order. For each loop check every gate and keep all that fail:
//     paused, orphaned, parent_incomplete, artifact_missing, depends_on, backoff,
//     deadline_passed, disk_low, untrusted, preflight, rate_limited, then the capacity
//     gates global_cap, type_cap, tier_cap, quota, conflict and no_git
//     against the running loops plus those already admitted by this walk. A loop that passes
//     every gate is admitted.
//
// A loop held back by a capacity gate does not hold back the loops after
// it (no head-of-line blocking). During the rate-limit recovery ramp at most
// one loop is admitted; the others get rate_limited with the recovery text.
//
// Candidates with a nil Loop, or whose status is neither pending nor paused,
// are not waiting loops and are left out. Loop ids are assumed unique.
func Plan(s Snapshot, now time.Time, p Policy) Decision {
	w := &walk{s: &s, now: now, p: &p, tt: typeTable{idx: make(map[string]int32, len(p.Base)+4)}}
	for _, n := range s.Running {
		w.running += max(n, 0)
	}
	w.setup()

	// 1. Score once.
	fair := p.Fairness.Enabled
	w.scores = make([]Score, len(s.Waiting))
	keys := make([]sortKey, 0, len(s.Waiting))
	least := w.leastTree()
	for i, c := range s.Waiting {
		l := c.Loop
		if l == nil || !l.Status.Waiting() {
			continue
		}
		typ := w.typeIndex(l.Type)
		ts := &w.tt.types[typ]
		w.scores[i] = score(l, now, ts.base, p.Weights)
		if least >= 0 {
			tw, ok := s.Trees[treeOf(&s.Waiting[i])]
			treeTerms(&w.scores[i], tw, ok, least, now, p.Weights)
		}
		k := sortKey{
			prio: w.scores[i].Priority,
			sec:  l.CreatedAt.Unix(), nsec: int32(l.CreatedAt.Nanosecond()),
			typ: typ, idx: int32(i), tier: int32(ts.tier), fails: loopGates(c, now), id: l.ID,
		}
		if len(s.Spent) > 0 && k.fails&gBudget == 0 {
			if _, spent := s.Spent[treeOf(&s.Waiting[i])]; spent {
				k.fails |= gBudget
			}
		}
		if fair {
			k.fkey = w.keyIndex(FairnessKey(l, c.Root))
		}
		keys = append(keys, k)
	}

	w.d = Decision{
		Rows:    make([]Row, 0, len(keys)),
		Waiting: len(keys),
		Running: w.running,
		Slots:   max(p.MaxLoops-w.running, 0),
	}
	w.d.Start = make([]string, 0, min(w.d.Slots, len(keys)))
	w.pool = make([]Reason, 0, len(keys)+len(keys)/2)

	// 2 and 3. Order, then gates and admission in that order.
	if !fair || p.Order != nil {
		if p.Order != nil {
			w.order(keys)
		} else {
			slices.SortFunc(keys, compareKeys)
		}
		for i := range keys {
			w.visit(&keys[i])
		}
		return w.d
	}
	slices.SortFunc(keys, compareRuns)
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi].tier == keys[lo].tier {
			hi++
		}
		w.fairTier(keys[lo:hi])
		lo = hi
	}
	return w.d
}

// leastTree returns the smallest work left among the trees of the waiting
// loops, or -1 when the tree term is off or the snapshot knows no tree.
func (w *walk) leastTree() float64 {
	if len(w.s.Trees) == 0 || !w.p.Weights.TreeOn() {
		return -1
	}
	least := -1.0
	for i := range w.s.Waiting {
		c := &w.s.Waiting[i]
		if c.Loop == nil || !c.Loop.Status.Waiting() {
			continue
		}
		if tw, ok := w.s.Trees[treeOf(c)]; ok && (least < 0 || tw.Left < least) {
			least = tw.Left
		}
	}
	return max(least, 0)
}

// setup prepares the per-plan tables of the policies in use: the rate limit
// and disk texts, tier counts, owners' running counts and held conflict keys.
func (w *walk) setup() {
	s, p, now := w.s, w.p, w.now
	w.blocked = s.RateLimit.Blocked(now)
	w.recovering = s.RateLimit.Recovering(now)
	if w.blocked {
		w.rateText = rateLimitedText(s.RateLimit.Remaining(now))
	}
	w.diskText = s.DiskLowText
	if w.diskText == "" {
		w.diskText = diskLowText
	}
	w.globalUsed = -1
	for t, n := range s.Running {
		if s.NoGit[t] {
			w.noGitUsed += max(n, 0)
		}
	}
	if w.noGitText = s.NoGitText; w.noGitText == "" {
		w.noGitText = noGitText
	}
	if len(s.Limits) > 0 {
		w.onProfile = map[string]int{}
	}
	if len(p.Tier) > 0 {
		w.tiers = map[int]*capState{}
		for _, tier := range p.Tier {
			if tier > 0 && w.tiers[tier] == nil {
				w.tiers[tier] = &capState{limit: tier, textUsed: -1}
			}
		}
		for t, n := range s.Running {
			if tier := p.Tier[t]; tier > 0 {
				w.tiers[tier].running += max(n, 0)
			}
		}
	}
	if len(p.OwnerCap) > 0 {
		w.owners = map[string]*capState{}
		w.ownerRunning = map[string]int{}
		for _, l := range s.Active {
			if l != nil && p.OwnerCap[l.Owner] > 0 {
				w.ownerRunning[l.Owner]++
			}
		}
	}
	if len(p.ConflictGroup) > 0 {
		w.held = map[holdKey]holder{}
		for _, l := range s.Active {
			if l == nil || l.ConflictKey == "" {
				continue
			}
			g := p.ConflictGroup[l.Type]
			if g == "" {
				continue
			}
			hk := holdKey{g, l.ConflictKey}
			if h, ok := w.held[hk]; !ok || l.ID < h.id { // deterministic if two hold it
				w.held[hk] = holder{id: l.ID, running: true}
			}
		}
	}
	if p.Fairness.Enabled {
		w.kt.idx = map[string]int32{}
		w.floor = s.Fairness.Floor(now, p.Fairness.IdleTTL)
	}
}

// fairTier walks one tier of keys, sorted by compareRuns, in fair order: a
// k-way merge of the fairness keys' runs by (accumulated cost, the run's
// next loop in seed-004 order). Admitting a loop raises its key's cost, so
// the key sinks in the heap: each step costs O(log keys), not O(loops).
func (w *walk) fairTier(keys []sortKey) {
	type run struct{ pos, end int32 }
	var runs []run
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].fkey == keys[i].fkey {
			j++
		}
		runs = append(runs, run{int32(i), int32(j)})
		i = j
	}
	used := func(r run) float64 { return w.kt.keys[keys[r.pos].fkey].used }
	less := func(a, b run) bool {
		if ua, ub := used(a), used(b); ua != ub {
			return ua < ub
		}
		return compareKeys(keys[a.pos], keys[b.pos]) < 0
	}
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(runs) && less(runs[l], runs[m]) {
				m = l
			}
			if r := l + 1; r < len(runs) && less(runs[r], runs[m]) {
				m = r
			}
			if m == i {
				return
			}
			runs[i], runs[m] = runs[m], runs[i]
			i = m
		}
	}
	for i := len(runs)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(runs) > 0 {
		r := &runs[0]
		w.visit(&keys[r.pos])
		// The root only sinks: its key's cost rose or stayed, and its next
		// loop comes after the one just visited.
		if r.pos++; r.pos == r.end {
			last := len(runs) - 1
			runs[0] = runs[last]
			runs = runs[:last]
		}
		down(0)
	}
}

// free reports whether agent profile p may take one more iteration in this
// plan: it is not limited, and not in its recovery ramp with a loop
// already admitted on it.
func (w *walk) free(p string) bool {
	st := w.s.Limits[p]
	return !st.Blocked(w.now) && !(st.Recovering(w.now) && w.onProfile[p] >= 1)
}

// visit checks every gate of one row, records the row and admits its loop
// when no gate fails.
func (w *walk) visit(k *sortKey) {
	s, p := w.s, w.p
	c := &s.Waiting[k.idx]
	l := c.Loop
	ts := &w.tt.types[k.typ]
	start := len(w.pool)

	if k.fails != 0 {
		tree := ""
		if k.fails&gBudget != 0 {
			tree = s.Spent[treeOf(c)]
		}
		w.pool = appendLoopReasons(w.pool, k.fails, *c, w.now, tree)
	}
	if s.DiskLow {
		w.pool = append(w.pool, Reason{DiskLow, w.diskText})
	}
	if s.Untrusted != "" {
		w.pool = append(w.pool, Reason{Untrusted, s.Untrusted})
	}
	if ts.pre != "" {
		w.pool = append(w.pool, Reason{Preflight, ts.pre})
	}
	notReady := len(w.pool) - start

	// Capacity: the rate limit, then the caps, counting running loops and
	// the ones this walk has admitted so far.
	limited := true
	switch {
	case w.blocked:
		w.pool = append(w.pool, Reason{RateLimited, w.rateText})
	case w.recovering && w.selected >= 1:
		w.pool = append(w.pool, Reason{RateLimited, recoveryText})
	default:
		limited = false
	}
	profile := w.p.Agents.Of(l)
	if len(s.Limits) > 0 {
		var ok bool
		if profile, ok = w.p.Agents.PickFunc(l, w.free); !ok && !limited {
			if st := s.Limits[profile]; st.Blocked(w.now) {
				w.pool = append(w.pool, Reason{RateLimited, profileLimitedText(profile, st.Remaining(w.now))})
			} else {
				w.pool = append(w.pool, Reason{RateLimited, profileRecoveryText(profile)})
			}
		}
	}
	if used := w.running + w.selected; used >= p.MaxLoops {
		if used != w.globalUsed {
			w.globalText, w.globalUsed = globalCapText(used, p.MaxLoops), used
		}
		w.pool = append(w.pool, Reason{GlobalCap, w.globalText})
	}
	if used := ts.running + ts.selected; ts.cap > 0 && used >= ts.cap {
		if used != ts.capUsed {
			ts.capText, ts.capUsed = typeCapText(ts.name, used, ts.cap), used
		}
		w.pool = append(w.pool, Reason{TypeCap, ts.capText})
	}
	if tc := ts.tierCap; tc != nil {
		if used := tc.running + tc.selected; used >= tc.limit {
			if used != tc.textUsed {
				tc.text, tc.textUsed = tierCapText(tc.limit, used), used
			}
			w.pool = append(w.pool, Reason{TierCap, tc.text})
		}
	}
	oc := w.owner(l.Owner)
	if oc != nil {
		if used := oc.running + oc.selected; used >= oc.limit {
			if used != oc.textUsed {
				oc.text, oc.textUsed = quotaText(l.Owner, used, oc.limit), used
			}
			w.pool = append(w.pool, Reason{Quota, oc.text})
		}
	}
	var hk holdKey
	if ts.group != "" && l.ConflictKey != "" {
		hk = holdKey{ts.group, l.ConflictKey}
		if h, ok := w.held[hk]; ok {
			w.pool = append(w.pool, Reason{Conflict, conflictText(hk.group, hk.key, h.id, h.running)})
		}
	}
	if ts.noGit && w.noGitUsed >= 1 {
		w.pool = append(w.pool, Reason{NoGit, w.noGitText})
	}

	w.d.Rows = append(w.d.Rows, Row{Loop: l, Score: w.scores[k.idx], Tier: ts.tier, Agent: profile})
	row := &w.d.Rows[len(w.d.Rows)-1]
	var fk *fairKey
	if p.Fairness.Enabled {
		fk = &w.kt.keys[k.fkey]
		row.Key, row.KeyUsed, row.Cost = fk.name, fk.used, ts.defCost
		if l.CostHint > 0 {
			row.Cost = l.CostHint
		} else if c, ok := fk.costs[ts.name]; ok {
			row.Cost = c
		}
	}
	if notReady == 0 {
		w.d.Eligible++
	}
	if end := len(w.pool); end > start {
		row.Reasons = w.pool[start:end:end]
		return
	}
	row.Runnable = true
	w.selected++
	if len(s.Limits) > 0 {
		w.onProfile[profile]++
	}
	ts.selected++
	if ts.tierCap != nil {
		ts.tierCap.selected++
	}
	if oc != nil {
		oc.selected++
	}
	if ts.noGit {
		w.noGitUsed++
	}
	if hk.group != "" {
		w.held[hk] = holder{id: l.ID}
	}
	w.d.Start = append(w.d.Start, k.id)
	if fk != nil {
		w.d.Charges = append(w.d.Charges, Charge{ID: l.ID, Type: l.Type, Key: fk.name, Cost: row.Cost, Floor: w.floor})
		fk.used += row.Cost
	}
}
