package scheduler_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

var propTypes = []loop.Type{loop.Plan, loop.Spec, loop.Phase, loop.Ralph, "review"}
var propProfiles = []string{"claude", "codex", "gemini"}

var (
	propOwners = []string{"", "alice", "bob", "carol"}
	propKeys   = []string{"", "repo1", "repo2", "repo3"}
)

// randomCase builds a random but plausible snapshot and policy. Half the
// cases keep seed 004's policy alone; the others add random caps, tiers,
// conflict groups, quotas and fairness.
func randomCase(r *rand.Rand) (scheduler.Snapshot, scheduler.Policy) {
	p := scheduler.DefaultPolicy()
	if r.IntN(2) == 0 {
		p.MaxLoops = r.IntN(12)
		for _, t := range propTypes {
			p.TypeCap[t] = r.IntN(5) // 0: no cap
			p.Base[t] = r.IntN(120)
		}
		p.Weights.AgeBoostPerMinute = r.IntN(3)
		if r.IntN(2) == 0 {
			p.Tier = map[string]int{}
			for _, t := range propTypes {
				p.Tier[t] = r.IntN(4) // 0: none
			}
		}
		if r.IntN(2) == 0 {
			p.ConflictGroup = map[string]string{}
			for _, t := range propTypes {
				p.ConflictGroup[t] = []string{"", "git", "git", "db"}[r.IntN(4)]
			}
		}
		if r.IntN(2) == 0 {
			p.OwnerCap = map[string]int{"alice": r.IntN(3), "bob": 1 + r.IntN(3)}
		}
		if r.IntN(2) == 0 {
			p.Fairness = scheduler.FairnessPolicy{Enabled: true, Alpha: 0.3, IdleTTL: time.Duration(r.IntN(3)) * time.Hour,
				DefaultCost: map[string]float64{loop.Ralph: 30, "review": 5}}
		}
	}
	var s scheduler.Snapshot
	s.Running = map[string]int{}
	for _, t := range propTypes {
		if r.IntN(2) == 0 {
			n := r.IntN(p.TypeCap[t] + 3)
			s.Running[t] = n
			for i := range n {
				s.Active = append(s.Active, &loop.Loop{
					ID: fmt.Sprintf("A%s%d", t, i), Type: t, Status: loop.Running,
					Owner: propOwners[r.IntN(len(propOwners))], ConflictKey: propKeys[r.IntN(len(propKeys))],
				})
			}
		}
	}
	switch r.IntN(5) {
	case 0: // blocked
		s.RateLimit = ratelimit.State{Hits: 2, BackoffUntil: now.Add(time.Duration(1+r.IntN(120)) * time.Second)}
		s.RateLimit.RecoveryUntil = s.RateLimit.BackoffUntil.Add(30 * time.Second)
	case 1: // recovering
		s.RateLimit = ratelimit.State{Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(20 * time.Second)}
	}
	s.DiskLow = r.IntN(10) == 0
	if r.IntN(12) == 0 {
		s.Untrusted = "loopr.yml's commands are not trusted on this machine: run loopr trust"
	}
	switch r.IntN(6) { // preflight problems; types sharing the workspace (no git)
	case 0:
		s.Preflight = map[string]string{propTypes[r.IntN(len(propTypes))]: `agent "x" is not on PATH`}
	case 1, 2:
		s.NoGit = map[string]bool{loop.Ralph: true, propTypes[r.IntN(len(propTypes))]: true}
	}
	if r.IntN(2) == 0 { // agent profiles, each limited, recovering or free
		p.Agents = scheduler.Agents{Default: "claude", ByType: map[string]string{loop.Ralph: "codex"},
			Fallback: map[string][]string{"claude": {"codex"}, "codex": nil, "gemini": {"claude", "codex"}}}
		if r.IntN(2) == 0 {
			p.Agents.Fallback["codex"] = []string{"gemini"}
		}
		s.Limits = map[string]ratelimit.State{}
		for _, prof := range propProfiles {
			switch r.IntN(3) {
			case 0:
				s.Limits[prof] = ratelimit.State{Hits: 1, BackoffUntil: now.Add(time.Duration(1+r.IntN(600)) * time.Second)}
			case 1:
				s.Limits[prof] = ratelimit.State{Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(20 * time.Second)}
			}
		}
	}
	if r.IntN(3) == 0 {
		s.Spent = map[string]string{fmt.Sprintf("P%d", r.IntN(4)): "tree budget spent: $2.00 of $2.00"}
	}
	if p.Fairness.Enabled {
		s.Fairness.Keys = map[string]scheduler.KeyUsage{}
		for i := range r.IntN(6) {
			u := scheduler.KeyUsage{Used: float64(r.IntN(5) * 20), Seen: now.Add(-time.Duration(r.IntN(180)) * time.Minute)}
			if r.IntN(2) == 0 {
				u.Cost = map[string]float64{loop.Ralph: float64(1 + r.IntN(100))}
			}
			s.Fairness.Keys[fmt.Sprintf("P%d", i)] = u
		}
	}

	n := r.IntN(60)
	for i := range n {
		l := &loop.Loop{
			ID:        fmt.Sprintf("L%03d", r.IntN(1000)*1000+i), // unique, not in creation order
			Type:      propTypes[r.IntN(len(propTypes))],
			Status:    loop.Pending,
			Depth:     r.IntN(5),
			Iteration: 1 + r.IntN(10),
			// Coarse creation times so that equal priorities and equal instants occur.
			CreatedAt:   now.Add(-time.Duration(r.IntN(8)) * 10 * time.Minute).Add(-time.Duration(r.IntN(3)) * time.Second),
			Owner:       propOwners[r.IntN(len(propOwners))],
			ConflictKey: propKeys[r.IntN(len(propKeys))],
		}
		switch r.IntN(20) {
		case 0:
			l.Status = loop.Paused
		case 1:
			l.Status = loop.Running // not a waiting loop: ignored
		case 2:
			l.CreatedAt = now.Add(time.Minute) // clock skew
		case 3:
			l.Status = loop.NeedsHuman
			l.Needs = &loop.Needs{Reason: loop.NeedsQuestion, Detail: "which port?", Since: now}
		}
		switch r.IntN(6) {
		case 0:
			l.RunnableAt = now.Add(time.Duration(1+r.IntN(600)) * time.Second)
		case 1:
			l.RunnableAt = now.Add(-time.Minute)
		}
		switch r.IntN(10) {
		case 0:
			l.Deadline = now.Add(-time.Duration(r.IntN(600)) * time.Second)
		case 1:
			l.Deadline = now.Add(time.Hour)
		}
		l.Agent = []string{"", "", "claude", "codex", "gemini", "gone"}[r.IntN(6)]
		if r.IntN(8) == 0 {
			l.Budget = loop.Budget{USD: 1, Tokens: int64(r.IntN(2) * 1000)}
			l.Usage = loop.Usage{CostUSD: float64(r.IntN(3)) / 2, InputTokens: int64(r.IntN(1500))}
		}
		switch r.IntN(4) {
		case 0:
			l.FairnessKey = fmt.Sprintf("P%d", r.IntN(8))
		case 1:
			l.CostHint = float64(r.IntN(50))
		}
		c := scheduler.Candidate{Loop: l, ArtifactMissing: r.IntN(10) == 0}
		if r.IntN(2) == 0 {
			l.Parent = fmt.Sprintf("P%d", r.IntN(10))
			c.Root = fmt.Sprintf("P%d", r.IntN(4))
			if r.IntN(10) == 0 {
				c.ParentMissing = true
			} else if r.IntN(3) == 0 {
				c.ParentStatus = loop.Statuses[r.IntN(len(loop.Statuses))]
			} else {
				c.ParentStatus = loop.Complete
			}
		}
		if r.IntN(4) == 0 { // earlier siblings it depends on, done or not
			for range 1 + r.IntN(3) {
				dep := &loop.Loop{ID: fmt.Sprintf("D%d", r.IntN(20)), Status: loop.Statuses[r.IntN(len(loop.Statuses))]}
				if dep.Status == loop.Complete && r.IntN(2) == 0 || dep.Status == loop.Cancelled && r.IntN(2) == 0 {
					dep.SubtreeDoneAt = now // its subtree is done too
				}
				if r.IntN(8) == 0 {
					dep = nil // deleted
				}
				id := fmt.Sprintf("D%d", r.IntN(20))
				if dep != nil {
					id = dep.ID
				}
				l.DependsOn = append(l.DependsOn, id)
				c.Deps = append(c.Deps, scheduler.DepOf(id, dep))
			}
		}
		s.Waiting = append(s.Waiting, c)
	}
	return s, p
}

// waitsFor reports whether a loop must wait for the dependency d: one that
// exists, is not cancelled, and is not complete with its subtree done
// (which only Met can say).
func waitsFor(d scheduler.Dep) bool {
	return d.Status != "" && d.Status != loop.Cancelled && (d.Status != loop.Complete || !d.Met)
}

// reference is a deliberately naive second implementation of Plan's gates,
// order and admission: it returns the ids in scheduling order, the ids
// started and the reason codes of every waiting loop. It picks each next row
// by scanning every row not yet visited under the order of the moment (with
// fairness, a key's cost rises as its loops are admitted), and counts the
// caps, quotas and held conflict keys from scratch each time.
func reference(s scheduler.Snapshot, now time.Time, p scheduler.Policy) (order, start []string, codes map[string][]scheduler.Code) {
	var ls []scheduler.Candidate
	for _, c := range s.Waiting {
		if c.Loop != nil && c.Loop.Status.Waiting() {
			ls = append(ls, c)
		}
	}
	prio := func(c scheduler.Candidate) int { return scheduler.ScoreOf(c.Loop, now, p).Priority }
	fp := p.Fairness
	used := map[string]float64{}
	keyOf := func(c scheduler.Candidate) string { return scheduler.FairnessKey(c.Loop, c.Root) }
	usedOf := func(k string) float64 {
		if v, ok := used[k]; ok {
			return v
		}
		if u, ok := s.Fairness.Lookup(k, now, fp.IdleTTL); ok {
			return u.Used
		}
		return s.Fairness.Floor(now, fp.IdleTTL)
	}
	less := func(a, b scheduler.Candidate) int {
		if c := cmp.Compare(p.Tier[b.Loop.Type], p.Tier[a.Loop.Type]); c != 0 {
			return c
		}
		if fp.Enabled {
			if c := cmp.Compare(usedOf(keyOf(a)), usedOf(keyOf(b))); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(prio(b), prio(a)); c != 0 {
			return c
		}
		if c := a.Loop.CreatedAt.Compare(b.Loop.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Loop.ID, b.Loop.ID)
	}
	running := 0
	for _, n := range s.Running {
		running += n
	}
	var started []*loop.Loop
	count := func(match func(*loop.Loop) bool) (n int) {
		for _, l := range append(slices.Clone(s.Active), started...) {
			if match(l) {
				n++
			}
		}
		return n
	}
	tierRunning := func(tier int) (n int) {
		for t, k := range s.Running {
			if p.Tier[t] == tier {
				n += k
			}
		}
		return n + count(func(l *loop.Loop) bool { return l.Status == loop.Pending && p.Tier[l.Type] == tier })
	}
	codes = map[string][]scheduler.Code{}
	visited := map[string]bool{}
	onProfile := map[string]int{}
	free := func(x string) bool {
		st := s.Limits[x]
		return !st.Blocked(now) && !(st.Recovering(now) && onProfile[x] > 0)
	}
	// pick: the loop's profile (its own when known, else its type's, else
	// the default), else the first free one of its fallbacks, depth first.
	pick := func(l *loop.Loop) (string, bool) {
		own := p.Agents.Default
		if t := p.Agents.ByType[l.Type]; t != "" {
			own = t
		}
		if _, known := p.Agents.Fallback[l.Agent]; known && l.Agent != "" {
			own = l.Agent
		}
		var order []string
		seen := map[string]bool{}
		var dfs func(x string)
		dfs = func(x string) {
			if seen[x] {
				return
			}
			seen[x] = true
			order = append(order, x)
			for _, f := range p.Agents.Fallback[x] {
				dfs(f)
			}
		}
		dfs(own)
		for _, x := range order {
			if free(x) {
				return x, true
			}
		}
		return own, false
	}
	for range ls {
		var c scheduler.Candidate
		for _, x := range ls {
			if !visited[x.Loop.ID] && (c.Loop == nil || less(x, c) < 0) {
				c = x
			}
		}
		l := c.Loop
		visited[l.ID] = true
		order = append(order, l.ID)
		var cs []scheduler.Code
		add := func(ok bool, code scheduler.Code) {
			if ok {
				cs = append(cs, code)
			}
		}
		add(l.Status == loop.Paused, scheduler.Paused)
		add(l.Status == loop.NeedsHuman, scheduler.NeedsHuman)
		add(l.Parent != "" && c.ParentMissing, scheduler.Orphaned)
		add(l.Parent != "" && !c.ParentMissing && c.ParentStatus != loop.Complete, scheduler.ParentIncomplete)
		add(c.ArtifactMissing, scheduler.ArtifactMissing)
		add(slices.ContainsFunc(c.Deps, waitsFor), scheduler.DependsOn)
		add(l.RunnableAt.After(now), scheduler.Backoff)
		add(!l.Deadline.IsZero() && !now.Before(l.Deadline), scheduler.DeadlinePassed)
		tree := c.Root
		if l.Parent == "" {
			tree = l.ID
		}
		_, treeSpent := s.Spent[tree]
		add(l.Budget.Spent(l.Usage) || treeSpent, scheduler.Budget)
		add(s.DiskLow, scheduler.DiskLow)
		add(s.Untrusted != "", scheduler.Untrusted)
		add(s.Preflight[l.Type] != "", scheduler.Preflight)
		prof, free := pick(l)
		add(s.RateLimit.Blocked(now) || (s.RateLimit.Recovering(now) && len(start) > 0) || (len(s.Limits) > 0 && !free), scheduler.RateLimited)
		add(running+len(start) >= p.MaxLoops, scheduler.GlobalCap)
		add(p.TypeCap[l.Type] > 0 && s.Running[l.Type]+count(func(x *loop.Loop) bool { return x.Status == loop.Pending && x.Type == l.Type }) >= p.TypeCap[l.Type], scheduler.TypeCap)
		tier := p.Tier[l.Type]
		add(tier > 0 && tierRunning(tier) >= tier, scheduler.TierCap)
		add(p.OwnerCap[l.Owner] > 0 && count(func(x *loop.Loop) bool { return x.Owner == l.Owner }) >= p.OwnerCap[l.Owner], scheduler.Quota)
		g := p.ConflictGroup[l.Type]
		add(g != "" && l.ConflictKey != "" && count(func(x *loop.Loop) bool {
			return p.ConflictGroup[x.Type] == g && x.ConflictKey == l.ConflictKey
		}) > 0, scheduler.Conflict)
		shared := 0
		for t, n := range s.Running {
			if s.NoGit[t] {
				shared += n
			}
		}
		add(s.NoGit[l.Type] && shared+count(func(x *loop.Loop) bool { return x.Status == loop.Pending && s.NoGit[x.Type] }) >= 1, scheduler.NoGit)
		if len(cs) == 0 {
			onProfile[prof]++
			start = append(start, l.ID)
			started = append(started, l) // status pending: told apart from the running Active loops
			if fp.Enabled {
				k := keyOf(c)
				used[k] = usedOf(k) + s.Fairness.Estimate(l.Type, k, l.CostHint, now, fp)
			}
		}
		codes[l.ID] = cs
	}
	return order, start, codes
}

// pythonStyle is seed 002's dispatch loop, as its simulation writes it:
// sort every pending loop by the order of the moment, admit the first one
// that passes every gate, charge its key, and start over until nothing more
// is admissible. It returns the ids admitted, in order.
//
// Unknown keys start at the floor of the plan that first meets them; a
// later plan computes its floor again, after the charges. So that both ways
// start unknown keys alike, the keys of every waiting loop are made known at
// the first plan's floor before the loop starts.
func pythonStyle(s scheduler.Snapshot, now time.Time, p scheduler.Policy) []string {
	if p.Fairness.Enabled {
		s.Fairness = s.Fairness.Clone()
		floor := s.Fairness.Floor(now, p.Fairness.IdleTTL)
		for _, c := range s.Waiting {
			if c.Loop == nil {
				continue
			}
			k := scheduler.FairnessKey(c.Loop, c.Root)
			if _, ok := s.Fairness.Lookup(k, now, p.Fairness.IdleTTL); !ok {
				s.Fairness.Charge(scheduler.Charge{Key: k, Floor: floor}, now, p.Fairness)
			}
		}
	}
	var admitted []string
	for {
		d := scheduler.Plan(s, now, p)
		if len(d.Start) == 0 || len(admitted) > 100 {
			return admitted
		}
		// Plan's first admission is the first admissible row of the order
		// of the moment: take only it, and plan again with it running.
		id := d.Start[0]
		admitted = append(admitted, id)
		s = startOne(s, id, d, now, p)
	}
}

// startOne returns s with loop id moved from the waiting loops to the
// running ones and, with fairness on, its cost charged.
func startOne(s scheduler.Snapshot, id string, d scheduler.Decision, now time.Time, p scheduler.Policy) scheduler.Snapshot {
	out := s
	out.Waiting = nil
	out.Running = maps.Clone(s.Running)
	if out.Running == nil {
		out.Running = map[string]int{}
	}
	out.Active = slices.Clone(s.Active)
	for _, c := range s.Waiting {
		if c.Loop == nil || c.Loop.ID != id {
			out.Waiting = append(out.Waiting, c)
			continue
		}
		out.Running[c.Loop.Type]++
		r := *c.Loop
		r.Status = loop.Running
		out.Active = append(out.Active, &r)
	}
	if p.Fairness.Enabled {
		out.Fairness = s.Fairness.Clone()
		out.Fairness.Charge(d.Charges[0], now, p.Fairness)
	}
	// The recovery ramp admits one loop per plan: after one start, none.
	if s.RateLimit.Recovering(now) {
		out.RateLimit.BackoffUntil = out.RateLimit.RecoveryUntil
	}
	for _, row := range d.Rows { // the same for the profile the loop ran on
		if row.Loop.ID == id && s.Limits[row.Agent].Recovering(now) {
			out.Limits = maps.Clone(s.Limits)
			st := out.Limits[row.Agent]
			st.BackoffUntil = st.RecoveryUntil
			out.Limits[row.Agent] = st
		}
	}
	return out
}

func TestPlanProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(500) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			s, p := randomCase(r)
			d := scheduler.Plan(s, now, p)
			checkInvariants(t, s, p, d)

			// Agrees with the naive reference.
			order, start, codes := reference(s, now, p)
			if diff := gocmp.Diff(order, ids(d.Rows), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() order differs from reference (-want +got)\n%s", diff)
			}
			if diff := gocmp.Diff(start, d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() starts differ from reference (-want +got)\n%s", diff)
			}
			got := map[string][]scheduler.Code{}
			for _, row := range d.Rows {
				var cs []scheduler.Code
				for _, re := range row.Reasons {
					cs = append(cs, re.Code)
				}
				got[row.Loop.ID] = cs
			}
			if diff := gocmp.Diff(codes, got); diff != "" {
				t.Errorf("Plan() reason codes differ from reference (-want +got)\n%s", diff)
			}

			// Admitting everything in one plan is the same as seed 002's
			// loop: admit the first admissible loop, charge, plan again.
			if diff := gocmp.Diff(pythonStyle(s, now, p), d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() starts differ from planning again after each admission (-want +got)\n%s", diff)
			}

			// Deterministic: the same input again, and the input shuffled.
			if diff := gocmp.Diff(d, scheduler.Plan(s, now, p)); diff != "" {
				t.Errorf("Plan() twice mismatch (-want +got)\n%s", diff)
			}
			shuffled := s
			shuffled.Waiting = slices.Clone(s.Waiting)
			r.Shuffle(len(shuffled.Waiting), func(i, j int) {
				shuffled.Waiting[i], shuffled.Waiting[j] = shuffled.Waiting[j], shuffled.Waiting[i]
			})
			if diff := gocmp.Diff(d, scheduler.Plan(shuffled, now, p)); diff != "" {
				t.Errorf("Plan() of shuffled input mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

func checkInvariants(t *testing.T, s scheduler.Snapshot, p scheduler.Policy, d scheduler.Decision) {
	t.Helper()
	byID := map[string]scheduler.Candidate{}
	for _, c := range s.Waiting {
		if c.Loop != nil {
			byID[c.Loop.ID] = c
		}
	}
	running := 0
	for _, n := range s.Running {
		running += n
	}

	// Caps are never exceeded, counting running loops.
	started := map[string]int{}
	for _, id := range d.Start {
		started[byID[id].Loop.Type]++
	}
	if len(d.Start) > d.Slots || (len(d.Start) > 0 && running+len(d.Start) > p.MaxLoops) {
		t.Errorf("started %d with %d running: global cap %d exceeded", len(d.Start), running, p.MaxLoops)
	}
	for typ, n := range started {
		if limit := p.TypeCap[typ]; limit > 0 && s.Running[typ]+n > limit {
			t.Errorf("started %d %s with %d running: type cap %d exceeded", n, typ, s.Running[typ], limit)
		}
	}
	tierUsed := map[int]int{}
	for typ, n := range s.Running {
		tierUsed[p.Tier[typ]] += n
	}
	ownerUsed := map[string]int{}
	held := map[[2]string]string{}
	for _, l := range s.Active {
		ownerUsed[l.Owner]++
		if g := p.ConflictGroup[l.Type]; g != "" && l.ConflictKey != "" {
			held[[2]string{g, l.ConflictKey}] = l.ID
		}
	}
	for _, id := range d.Start {
		l := byID[id].Loop
		if tier := p.Tier[l.Type]; tier > 0 {
			if tierUsed[tier]++; tierUsed[tier] > tier {
				t.Errorf("started %s: tier %d cap exceeded (%d running or started)", id, tier, tierUsed[tier])
			}
		}
		if limit := p.OwnerCap[l.Owner]; limit > 0 {
			if ownerUsed[l.Owner]++; ownerUsed[l.Owner] > limit {
				t.Errorf("started %s: quota of %s (%d) exceeded", id, l.Owner, limit)
			}
		}
		if g := p.ConflictGroup[l.Type]; g != "" && l.ConflictKey != "" {
			hk := [2]string{g, l.ConflictKey}
			if h, ok := held[hk]; ok {
				t.Errorf("started %s: conflicts with %s on %s/%s", id, h, g, l.ConflictKey)
			}
			held[hk] = id
		}
	}
	if p.Fairness.Enabled != (len(d.Charges) == len(d.Start)) && len(d.Start) > 0 {
		t.Errorf("fairness %v: %d charges for %d starts", p.Fairness.Enabled, len(d.Charges), len(d.Start))
	}
	for i, c := range d.Charges {
		if c.ID != d.Start[i] || c.Cost <= 0 && byID[c.ID].Loop.CostHint == 0 {
			t.Errorf("charge %d = %+v, start %s", i, c, d.Start[i])
		}
	}
	shared := 0
	for typ, n := range s.Running {
		if s.NoGit[typ] {
			shared += n
		}
	}
	for _, id := range d.Start {
		if s.NoGit[byID[id].Loop.Type] {
			if shared++; shared > 1 {
				t.Errorf("started %s: a second loop in the shared workspace (no_git)", id)
			}
		}
	}
	if s.RateLimit.Blocked(now) && len(d.Start) > 0 {
		t.Errorf("started %v while rate limited", d.Start)
	}
	if s.RateLimit.Recovering(now) && len(d.Start) > 1 {
		t.Errorf("started %v during rate-limit recovery: want at most one", d.Start)
	}

	// No loop starts that is not ready.
	for _, id := range d.Start {
		c := byID[id]
		l := c.Loop
		switch {
		case l.Status != loop.Pending:
			t.Errorf("started %s with status %s", id, l.Status)
		case l.Parent != "" && (c.ParentMissing || c.ParentStatus != loop.Complete):
			t.Errorf("started %s before its parent completed (%q, missing %v)", id, c.ParentStatus, c.ParentMissing)
		case c.ArtifactMissing:
			t.Errorf("started %s without its artifact", id)
		case slices.ContainsFunc(c.Deps, waitsFor):
			t.Errorf("started %s before its dependencies were done: %+v", id, c.Deps)
		case l.RunnableAt.After(now):
			t.Errorf("started %s in backoff until %v", id, l.RunnableAt)
		case !l.Deadline.IsZero() && !l.Deadline.After(now):
			t.Errorf("started %s past its deadline %v", id, l.Deadline)
		case s.DiskLow:
			t.Errorf("started %s with the disk low", id)
		case s.Untrusted != "":
			t.Errorf("started %s with the configuration untrusted", id)
		case s.Preflight[l.Type] != "":
			t.Errorf("started %s of type %s with a preflight problem", id, l.Type)
		case l.Budget.Spent(l.Usage):
			t.Errorf("started %s with its budget spent", id)
		}
	}

	// Every row not started has a reason; started rows have none; Start
	// lists the runnable rows in row order; rows are in scheduling order.
	var runnable []string
	eligible := 0
	for i, row := range d.Rows {
		if row.Runnable != (len(row.Reasons) == 0) {
			t.Errorf("row %s: Runnable %v with reasons %v", row.Loop.ID, row.Runnable, row.Reasons)
		}
		for _, re := range row.Reasons {
			if re.Text == "" {
				t.Errorf("row %s: reason %s without text", row.Loop.ID, re.Code)
			}
		}
		if row.Runnable {
			runnable = append(runnable, row.Loop.ID)
		}
		if row.Eligible() {
			eligible++
		}
		if row.Tier != p.Tier[row.Loop.Type] {
			t.Errorf("row %s: tier %d, want %d", row.Loop.ID, row.Tier, p.Tier[row.Loop.Type])
		}
		if i > 0 && row.Tier > d.Rows[i-1].Tier {
			t.Errorf("rows %s and %s out of tier order", d.Rows[i-1].Loop.ID, row.Loop.ID)
		}
		if i > 0 && !p.Fairness.Enabled && row.Tier == d.Rows[i-1].Tier { // with fairness: see reference
			a, b := d.Rows[i-1], row
			if a.Score.Priority < b.Score.Priority ||
				a.Score.Priority == b.Score.Priority && a.Loop.CreatedAt.After(b.Loop.CreatedAt) ||
				a.Score.Priority == b.Score.Priority && a.Loop.CreatedAt.Equal(b.Loop.CreatedAt) && a.Loop.ID > b.Loop.ID {
				t.Errorf("rows %s and %s out of order", a.Loop.ID, b.Loop.ID)
			}
		}
	}
	if !slices.Equal(runnable, d.Start) {
		t.Errorf("Start = %v, runnable rows = %v", d.Start, runnable)
	}
	if d.Waiting != len(d.Rows) || d.Eligible != eligible || d.Running != running || d.Slots != max(p.MaxLoops-running, 0) {
		t.Errorf("counts Waiting %d Eligible %d Running %d Slots %d; want %d %d %d %d",
			d.Waiting, d.Eligible, d.Running, d.Slots, len(d.Rows), eligible, running, max(p.MaxLoops-running, 0))
	}
}

// TestRandomCasesCoverEveryGate keeps the generator honest: across the seeds
// the property test uses, loops start and every reason code occurs.
func TestRandomCasesCoverEveryGate(t *testing.T) {
	t.Parallel()
	seen := map[scheduler.Code]int{}
	starts, recoveryStarts := 0, 0
	for seed := range uint64(500) {
		s, p := randomCase(rand.New(rand.NewPCG(seed, 0x5eed)))
		d := scheduler.Plan(s, now, p)
		starts += len(d.Start)
		if s.RateLimit.Recovering(now) {
			recoveryStarts += len(d.Start)
		}
		for _, row := range d.Rows {
			for _, re := range row.Reasons {
				seen[re.Code]++
			}
		}
	}
	for _, c := range scheduler.Codes {
		if seen[c] == 0 {
			t.Errorf("no random case produced reason %s", c)
		}
	}
	if starts == 0 || recoveryStarts == 0 {
		t.Errorf("random cases started %d loops, %d during recovery: want some of each", starts, recoveryStarts)
	}
	t.Logf("starts %d (recovery %d), reasons %v", starts, recoveryStarts, seen)
}
