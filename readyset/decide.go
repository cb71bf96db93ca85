package readyset

import (
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

// Env is what a decision needs from outside the index.
type Env struct {
	RateLimit ratelimit.State // holds back every loop
	// Limits is the rate-limit state of each agent profile (see
	// scheduler.Snapshot.Limits), Spent the trees whose budget is spent.
	Limits      map[string]ratelimit.State
	Spent       map[string]string
	DiskLow     bool
	DiskLowText string
	// Untrusted is scheduler.Snapshot's: when set, no loop starts.
	Untrusted string
	// Fairness is the learned fair-queuing state (read with fairness on).
	Fairness scheduler.Fairness
	// Preflight, NoGit and NoGitText are scheduler.Snapshot's: the types
	// whose loops would fail every iteration here, and the types that share
	// the workspace directory (one of their loops runs at a time).
	Preflight map[string]string
	NoGit     map[string]bool
	NoGitText string
	// ArtifactExists reports whether the artifact at path exists; nil: every
	// artifact exists.
	ArtifactExists func(path string) bool
	// ArtifactsExist, when set, says it for many paths at once (it may
	// check them in parallel): Snapshot asks it once for every distinct
	// path of the waiting loops.
	ArtifactsExist func(paths []string) []bool
	// Tree, when set, turns on the tree term's input: Snapshot and Decide
	// fill scheduler.Snapshot.Trees (tree.go). nil: no tree term.
	Tree *TreeEnv
}

func (env *Env) artifact(path string) bool {
	return path == "" || env.ArtifactExists == nil || env.ArtifactExists(path)
}

// Decision is what Decide decided.
type Decision struct {
	Start   []string           // exactly scheduler.Plan's Start, in order
	Charges []scheduler.Charge // Plan's Charges (fairness on)
	// Waiting counts the pending and paused loops, Ready those of them that
	// pass every gate of their own (artifacts not checked), Running the
	// running loops, Slots the free global slots before this decision.
	Waiting, Ready, Running, Slots int
	// Fast is true when the incremental walk decided, false when Decide
	// fell back to scheduler.Plan over a snapshot of the index.
	Fast bool
	// Visited is how many loops the fast walk looked at.
	Visited int
}

// MaxSkips is how many ready loops held back by a quota, a conflict or a
// missing artifact the fast walk passes before it falls back to Plan.
const MaxSkips = 1024

// Decide returns the loops scheduler.Plan would start at now under p, in
// Plan's order: Plan(ix.Snapshot(env), now, p).Start, without building the
// snapshot when it can (see the package doc). It may advance the index's
// watermark to now.
func (ix *Index) Decide(now time.Time, p scheduler.Policy, env Env) Decision {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	d := Decision{Waiting: ix.nwaiting}
	for range ix.running {
		d.Running++
	}
	d.Slots = max(p.MaxLoops-d.Running, 0)
	if env.Tree != nil {
		te := *env.Tree
		te.Now = now
		env.Tree = &te
	}
	if ix.fast(now, p, &env, &d) {
		d.Fast = true
		d.Ready = ix.nready
		return d
	}
	plan := scheduler.Plan(ix.snapshot(&env), now, p)
	d.Start, d.Charges, d.Ready = plan.Start, plan.Charges, plan.Eligible
	return d
}

// cursor walks one group in order without changing it: a frontier heap of
// positions in the group's heap (a position is visited after its parent).
type cursor struct {
	g        *group
	frontier []int32
	head     *entry
	prio     int
	tier     int
	tree     int // the tree term's points of the group's tree
}

func (c *cursor) less(i, j int32) bool { return byCreated(c.g.h.items[i], c.g.h.items[j]) }

// next moves to the group's next loop; false when it has none.
func (c *cursor) next() bool {
	f := c.frontier
	if len(f) == 0 {
		return false
	}
	i := f[0]
	last := len(f) - 1
	f[0] = f[last]
	f = f[:last]
	siftDown(f, 0, c.less)
	n := int32(c.g.h.len())
	for _, k := range [2]int32{2*i + 1, 2*i + 2} {
		if k < n {
			f = append(f, k)
			siftUp(f, len(f)-1, c.less)
		}
	}
	c.frontier = f
	if len(f) == 0 {
		return false
	}
	c.head = c.g.h.items[f[0]]
	return true
}

func siftUp(f []int32, j int, less func(a, b int32) bool) {
	for j > 0 {
		i := (j - 1) / 2
		if !less(f[j], f[i]) {
			return
		}
		f[i], f[j] = f[j], f[i]
		j = i
	}
}

func siftDown(f []int32, i int, less func(a, b int32) bool) {
	for {
		l := 2*i + 1
		if l >= len(f) {
			return
		}
		j := l
		if r := l + 1; r < len(f) && less(f[r], f[l]) {
			j = r
		}
		if !less(f[j], f[i]) {
			return
		}
		f[i], f[j] = f[j], f[i]
		i = j
	}
}

// before is Plan's order of two loops: tier desc, priority desc,
// created_at asc, id asc.
func before(a, b *cursor) bool {
	if a.tier != b.tier {
		return a.tier > b.tier
	}
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	return byCreated(a.head, b.head)
}

// priority is scheduler.ScoreOf(e, now).Priority, term for term.
func priority(e *entry, now time.Time, base int, w scheduler.Weights) int {
	ageMin := 0
	if age := now.Sub(e.created); age > 0 {
		ageMin = int(age / time.Minute)
	}
	return base + min(ageMin*w.AgeBoostPerMinute, w.AgeBoostMax) + staticScore(w, e.depth, e.iteration)
}

// limit counts one cap against running and admitted loops.
type limit struct{ used, max int }

func (l *limit) full() bool { return l != nil && l.used >= l.max }

// fast is the incremental walk. It returns false, having decided nothing,
// when only Plan can be exact.
func (ix *Index) fast(now time.Time, p scheduler.Policy, env *Env, d *Decision) bool {
	if p.Fairness.Enabled || p.Weights.AgeBoostPerMinute < 0 {
		return false
	}
	limited := false
	for _, st := range env.Limits {
		if st.Recovering(now) {
			return false // the ramp admits one loop per profile: Plan's walk
		}
		limited = limited || st.Blocked(now)
	}

	ix.setWeights(p.Weights)
	if now.Before(ix.t) {
		ix.rewind(now) // the clock went back
	}
	ix.advance(now)
	if env.DiskLow || env.Untrusted != "" || env.RateLimit.Blocked(now) || d.Slots == 0 {
		return true // every row has a failing gate
	}
	if limited && allBlocked(&p.Agents, env.Limits, now) {
		return true // no profile can take an iteration: every row is rate_limited
	}
	recovering := env.RateLimit.Recovering(now)

	// The caps, counting running loops (as Plan does: by type from the
	// running set, by owner and conflict key from the running loops).
	types := map[string]*limit{}
	tiers := map[int]*limit{}
	typeLimit := func(t string) *limit {
		l, ok := types[t]
		if !ok {
			if c := p.TypeCap[t]; c > 0 {
				l = &limit{max: c}
			}
			types[t] = l
		}
		return l
	}
	tierLimit := func(t string) *limit {
		tier := p.Tier[t]
		if tier <= 0 {
			return nil
		}
		l := tiers[tier]
		if l == nil {
			l = &limit{max: tier}
			tiers[tier] = l
		}
		return l
	}
	var owners map[string]*limit
	var held map[[2]string]bool
	if len(p.OwnerCap) > 0 {
		owners = map[string]*limit{}
	}
	if len(p.ConflictGroup) > 0 {
		held = map[[2]string]bool{}
	}
	// no_git: the types sharing the workspace directory run one loop at a
	// time, all together.
	var shared *limit
	if len(env.NoGit) > 0 {
		shared = &limit{max: 1}
	}
	sharedLimit := func(t string) *limit {
		if env.NoGit[t] {
			return shared
		}
		return nil
	}
	for _, r := range ix.running {
		if l := sharedLimit(r.Type); l != nil {
			l.used++
		}
		if l := typeLimit(r.Type); l != nil {
			l.used++
		}
		if l := tierLimit(r.Type); l != nil {
			l.used++
		}
		if owners != nil && p.OwnerCap[r.Owner] > 0 {
			l := owners[r.Owner]
			if l == nil {
				l = &limit{max: p.OwnerCap[r.Owner]}
				owners[r.Owner] = l
			}
			l.used++
		}
		if held != nil && r.ConflictKey != "" {
			if g := p.ConflictGroup[r.Type]; g != "" {
				held[[2]string{g, r.ConflictKey}] = true
			}
		}
	}
	ownerLimit := func(o string) *limit {
		if owners == nil || p.OwnerCap[o] <= 0 {
			return nil
		}
		l := owners[o]
		if l == nil {
			l = &limit{max: p.OwnerCap[o]}
			owners[o] = l
		}
		return l
	}

	// The tree term: each tree's points, the same for all of its loops.
	var trees map[string]scheduler.TreeWork
	least := -1.0
	if p.Weights.TreeOn() {
		trees = ix.treeWork(env)
		least = leastLeft(trees)
	}
	points := func(tree string) int {
		if least < 0 {
			return 0
		}
		tw, ok := trees[tree]
		if !ok {
			return 0
		}
		return scheduler.TreePoints(tw, least, now, p.Weights)
	}

	// One cursor per group whose type can still start a loop, in a heap
	// ordered by the groups' heads.
	cs := make([]*cursor, 0, len(ix.groups))
	// The cursors and their first frontiers in two allocations: with the
	// tree term on there is a group per type, score and tree.
	store := make([]cursor, 0, len(ix.groups))
	fronts := make([]int32, 8*len(ix.groups))
	for _, g := range ix.groups {
		if typeLimit(g.key.typ).full() || tierLimit(g.key.typ).full() || sharedLimit(g.key.typ).full() ||
			env.Preflight[g.key.typ] != "" {
			continue // the whole group waits
		}
		i := len(store)
		store = append(store, cursor{g: g, frontier: fronts[8*i : 8*i+1 : 8*i+8], head: g.h.items[0],
			tier: max(p.Tier[g.key.typ], 0), tree: points(g.key.tree)})
		c := &store[i]
		c.prio = priority(c.head, now, p.Base[g.key.typ], p.Weights) + c.tree
		cs = append(cs, c)
	}
	less := func(i, j int) bool { return before(cs[i], cs[j]) }
	fix := func(i int) { // sift cs[i] down
		for {
			l := 2*i + 1
			if l >= len(cs) {
				return
			}
			j := l
			if r := l + 1; r < len(cs) && less(r, l) {
				j = r
			}
			if !less(j, i) {
				return
			}
			cs[i], cs[j] = cs[j], cs[i]
			i = j
		}
	}
	for i := len(cs)/2 - 1; i >= 0; i-- {
		fix(i)
	}
	dropTop := func() {
		last := len(cs) - 1
		cs[0] = cs[last]
		cs = cs[:last]
		fix(0)
	}

	var roots map[string]string // memo of ix.root, for spent trees
	if len(env.Spent) > 0 {
		roots = map[string]string{}
	}
	skips := 0
	for len(cs) > 0 && len(d.Start) < d.Slots && !(recovering && len(d.Start) >= 1) {
		c := cs[0]
		e := c.head
		tl, rl, sl := typeLimit(e.typ), tierLimit(e.typ), sharedLimit(e.typ)
		if tl.full() || rl.full() || sl.full() { // the whole group waits for room
			dropTop()
			continue
		}
		d.Visited++
		ol := ownerLimit(e.owner)
		var hk [2]string
		if held != nil && e.conflictKey != "" {
			if g := p.ConflictGroup[e.typ]; g != "" {
				hk = [2]string{g, e.conflictKey}
			}
		}
		if ol.full() || (hk[0] != "" && held[hk]) || ix.treeSpent(e, env.Spent, roots) ||
			(limited && !free(&p.Agents, e, env.Limits, now)) || !env.artifact(e.triggeredBy) {
			if skips++; skips > MaxSkips {
				d.Start, d.Visited = nil, 0
				return false
			}
		} else {
			d.Start = append(d.Start, e.id)
			for _, l := range []*limit{tl, rl, ol, sl} {
				if l != nil {
					l.used++
				}
			}
			if hk[0] != "" {
				held[hk] = true
			}
		}
		if !c.next() {
			dropTop()
			continue
		}
		c.prio = priority(c.head, now, p.Base[e.typ], p.Weights) + c.tree
		fix(0)
	}
	return true
}

// allBlocked reports whether every agent profile a loop can run on is
// rate limited at now.
func allBlocked(a *scheduler.Agents, limits map[string]ratelimit.State, now time.Time) bool {
	if !limits[a.Default].Blocked(now) {
		return false
	}
	for _, p := range a.ByType {
		if !limits[p].Blocked(now) {
			return false
		}
	}
	for p := range a.Fallback {
		if !limits[p].Blocked(now) {
			return false
		}
	}
	return true
}

// free reports whether e's profile, or one of its fallbacks, may take an
// iteration at now (scheduler.Agents.Pick).
func free(a *scheduler.Agents, e *entry, limits map[string]ratelimit.State, now time.Time) bool {
	l := loop.Loop{Type: e.typ, Agent: e.agent}
	_, ok := a.Pick(&l, limits, now)
	return ok
}

// treeSpent reports whether e belongs to a tree in spent (a spent budget:
// Plan gives it the reason budget).
func (ix *Index) treeSpent(e *entry, spent map[string]string, memo map[string]string) bool {
	if len(spent) == 0 {
		return false
	}
	root := e.id
	if e.parent != "" {
		root = ix.root(e.parent, memo)
	}
	_, ok := spent[root]
	return ok
}

// Snapshot returns the scheduler's input as the index knows it: every
// waiting loop with its parent's status, root, artifact and dependencies, the running
// loops, and env's rate limit, disk and fairness state. Plan over it is
// what Decide decides; `loopr debug scheduler` and `loopr why` show it.
func (ix *Index) Snapshot(env Env) scheduler.Snapshot {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.snapshot(&env)
}

func (ix *Index) snapshot(env *Env) scheduler.Snapshot {
	s := scheduler.Snapshot{
		Waiting:   make([]scheduler.Candidate, 0, ix.nwaiting),
		Running:   map[string]int{},
		RateLimit: env.RateLimit, DiskLow: env.DiskLow, DiskLowText: env.DiskLowText, Untrusted: env.Untrusted,
		Fairness: env.Fairness, Preflight: env.Preflight, NoGit: env.NoGit, NoGitText: env.NoGitText,
		Limits: env.Limits, Spent: env.Spent,
	}
	s.Trees = ix.treeWork(env) // before the roots below: it works out moved roots again
	loops := make([]loop.Loop, 0, ix.nwaiting)
	present := map[string]bool{}
	if env.ArtifactsExist != nil { // every distinct path, checked at once
		var paths []string
		last := ""
		for _, kids := range ix.children {
			for _, e := range kids {
				if p := e.triggeredBy; p != "" && p != last {
					last = p
					if _, seen := present[p]; !seen {
						present[p] = false
						paths = append(paths, p)
					}
				}
			}
		}
		for e := range ix.roots {
			if p := e.triggeredBy; p != "" {
				if _, seen := present[p]; !seen {
					present[p] = false
					paths = append(paths, p)
				}
			}
		}
		if len(paths) > 0 {
			for i, ok := range env.ArtifactsExist(paths) {
				present[paths[i]] = ok
			}
		}
	}
	lastPath, lastOK := "", false
	roots := map[string]string{}
	add := func(e *entry, c scheduler.Candidate) {
		loops = append(loops, e.lite())
		c.Loop = &loops[len(loops)-1]
		if path := e.triggeredBy; path != "" {
			if path != lastPath { // siblings share one string: the common case costs nothing
				ok, seen := present[path]
				if !seen {
					ok = env.artifact(path)
					present[path] = ok
				}
				lastPath, lastOK = path, ok
			}
			c.ArtifactMissing = !lastOK
		}
		if len(e.deps) > 0 {
			c.Deps = make([]scheduler.Dep, len(e.deps))
			for i, d := range e.deps {
				c.Deps[i] = scheduler.Dep{ID: d, Met: true}
				if n, ok := ix.nodes[d]; ok {
					c.Deps[i] = scheduler.Dep{ID: d, Status: n.status, Met: n.met}
				}
			}
		}
		s.Waiting = append(s.Waiting, c)
	}
	for e := range ix.roots {
		add(e, scheduler.Candidate{})
	}
	for parent, kids := range ix.children { // the others, by parent: one lookup each
		var c scheduler.Candidate
		if p, ok := ix.nodes[parent]; ok {
			c.ParentStatus = p.status
		} else {
			c.ParentMissing = true
		}
		root := ix.root(parent, roots)
		c.Root = root // the fairness key, unless the loop names its own; the tree of its budget
		for _, e := range kids {
			add(e, c)
		}
	}
	for _, r := range ix.running {
		s.Running[r.Type]++
		a := r
		s.Active = append(s.Active, &a)
	}
	return s
}

// root returns the id of the root above a loop whose parent is parent, as
// control's walk over the store does: the highest record found, a missing
// ancestor being its own root; chains over 1000 long stop where they are.
func (ix *Index) root(parent string, memo map[string]string) string {
	var chain []string
	cur, root := parent, ""
	for range 1000 {
		if r, ok := memo[cur]; ok {
			root = r
			break
		}
		chain = append(chain, cur)
		n, ok := ix.nodes[cur]
		if !ok || n.parent == "" {
			root = cur
			break
		}
		cur = n.parent
	}
	if root == "" {
		root = cur
	}
	for _, id := range chain {
		memo[id] = root
	}
	return root
}
