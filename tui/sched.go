package tui

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// The dashboard does not re-implement the scheduler: it runs scheduler.Plan
// (pure, no I/O) over the loops it holds, with the configured policy, the
// daemon's caps and its rate-limit and disk state, so NEXT / WHY and the
// flat view say what the daemon decides. What it cannot see is filled in as
// the daemon would most likely have it, and `w` asks the daemon:
//
//   - a parent the model does not hold finished long ago (the stream's
//     snapshot holds only recent terminal loops): it counts as complete;
//   - triggering artifacts are not checked (artifact_missing never shows);
//   - the learned fairness state lives in the daemon: with fairness on the
//     plan starts every key from zero, so the order is approximate.
//
// The plan is made again only when its inputs change (a loop's status or
// scheduling fields, the caps, the rate limit or the disk) or when time
// alone changes it (a waiting loop's age reaches its next whole minute, a
// backoff, deadline or rate-limit phase ends); not on every clock tick.

// codeNext marks a waiting loop the plan starts now: "next to start".
const codeNext = "next"

// schedule is the plan the dashboard shows, made at one instant.
type schedule struct {
	rows []scheduler.Row  // every waiting loop, in scheduling order
	at   map[string]int32 // loop id → index in rows
	// holders names the loop holding each conflict group and key: a running
	// loop, or one the plan starts (only with conflict groups configured).
	holders map[holdKey]string
	blocked bool      // the rate limit's backoff ran (rate_limited is otherwise its recovery ramp)
	made    time.Time // when the plan was made
	next    time.Time // when time alone changes the plan; zero: never
	stale   bool      // an input changed since the plan was made
	count   int       // plans made so far (tests check that idle ticks make none)
}

type holdKey struct{ group, key string }

// reason is what NEXT / WHY says about a waiting loop: codeNext, or the
// first failing gate of its row (the scheduler lists them in gate order).
// It is worded when shown (reasonText), so countdowns follow the clock and
// a plan of thousands of loops costs no formatting.
type reason struct {
	Code string           // a scheduler.Code, codeNext, or "" when the plan does not hold the loop
	r    scheduler.Reason // the scheduler's first reason: its text carries the numbers of the caps
	l    *loop.Loop       // the record that was planned
	// agent is the profile the loop would run on (its own, or a fallback).
	agent string
}

// reasonOf returns the reason of waiting loop id in the current plan.
func (m *Model) reasonOf(id string) reason {
	i, ok := m.sched.at[id]
	if !ok {
		return reason{}
	}
	row := &m.sched.rows[i]
	if row.Runnable || len(row.Reasons) == 0 {
		return reason{Code: codeNext, l: row.Loop}
	}
	return reason{Code: string(row.Reasons[0].Code), r: row.Reasons[0], l: row.Loop, agent: row.Agent}
}

// workspaceGates are the preflight and no_git inputs of the daemon's plan,
// from its status: the first problem of each type, and the leaf types that
// share the workspace directory.
func workspaceGates(st api.Status) (pre map[string]string, noGit map[string]bool, noGitText string) {
	for _, p := range st.Problems {
		for _, t := range p.Types {
			if pre == nil {
				pre = map[string]string{}
			}
			if _, ok := pre[t]; !ok {
				pre[t] = p.What
			}
		}
	}
	if st.NoGit != "" {
		noGit = map[string]bool{}
		for _, u := range st.Types {
			if _, spawns := loop.ChildType(u.Type); !spawns {
				noGit[u.Type] = true
			}
		}
	}
	return pre, noGit, st.NoGit
}

// reasonText words r at the model's now. The dashboard's own words where it
// has them (countdowns rather than clock times, the parent's status); the
// scheduler's text for the caps, the tier cap and the quota, which carry the
// counts of the moment the walk reached the row.
func (m *Model) reasonText(r reason) string {
	now := m.now
	switch r.Code {
	case "":
		return ""
	case codeNext:
		return "next to start"
	}
	switch scheduler.Code(r.Code) {
	case scheduler.Paused:
		return "paused"
	case scheduler.Orphaned:
		return "parent not found"
	case scheduler.ParentIncomplete:
		if p := m.loops[r.l.Parent]; p != nil {
			if p.Status.Terminal() {
				return "parent " + string(p.Status)
			}
			return "waiting for parent (" + statusText(p.Status, true) + ")"
		}
	case scheduler.ArtifactMissing:
		return "artifact missing"
	case scheduler.DependsOn:
		var after []string
		for _, d := range r.l.DependsOn {
			if dl := m.loops[d]; dl != nil && !dl.DependencyMet() {
				state := statusText(dl.Status, true)
				if dl.Status == loop.Complete {
					state = "loops below it at work"
				}
				after = append(after, fmt.Sprintf("%q (%s)", title(dl), state))
			}
		}
		if len(after) > 0 {
			return "after " + strings.Join(after, ", ")
		}
	case scheduler.Backoff:
		if r.l.Scheduled() {
			return "scheduled " + countdown(r.l.RunnableAt.Sub(now))
		}
		return "backoff " + countdown(r.l.RunnableAt.Sub(now))
	case scheduler.DeadlinePassed:
		return "deadline passed"
	case scheduler.DiskLow:
		return fmt.Sprintf("disk low (%.1f GB free)", m.status.DiskFreeGB)
	case scheduler.NoGit:
		return "no git: one at a time in the workspace"
	case scheduler.Untrusted:
		return "untrusted loopr.yml: loopr trust"
	case scheduler.RateLimited:
		if st, ok := m.status.Limits[r.agent]; ok { // per agent profile
			if st.Blocked(now) {
				return r.agent + " rate limited " + countdown(st.BackoffUntil.Sub(now))
			}
			return r.agent + " 429 recovery: one start per poll"
		}
		if m.sched.blocked {
			return "rate limited " + countdown(m.status.RateLimit.BackoffUntil.Sub(now))
		}
		return "429 recovery: one start per poll"
	case scheduler.Budget:
		return r.r.Text
	case scheduler.Conflict:
		group := m.plan.ConflictGroup[r.l.Type]
		if h := m.loops[m.sched.holders[holdKey{group, r.l.ConflictKey}]]; h != nil {
			state := "starting"
			if h.Status == loop.Running {
				state = "running"
			}
			return fmt.Sprintf("conflict %s/%s: held by %q (%s)", group, r.l.ConflictKey, title(h), state)
		}
	}
	return r.r.Text
}

// capsView is the running count and cap per type and globally, live from
// the model's running loops and the effective policy.
type capsView struct {
	types    []string
	running  map[string]int
	cap      map[string]int
	total    int
	maxLoops int
}

// caps returns the usage the last plan counted, or counts it.
func (m *Model) caps() capsView {
	if m.cv.running != nil {
		return m.cv
	}
	return m.computeCaps()
}

func (m *Model) computeCaps() capsView {
	running, total := map[string]int{}, 0
	for _, l := range m.loops {
		if l.Status == loop.Running {
			running[l.Type]++
			total++
		}
	}
	return m.capsOf(running, total)
}

// capsOf completes the usage of running loops by type (total in all) with
// the caps and the types to show.
func (m *Model) capsOf(running map[string]int, total int) capsView {
	cv := capsView{running: running, total: total, cap: m.plan.TypeCap, maxLoops: m.plan.MaxLoops}
	if m.haveStatus && len(m.status.Types) > 0 {
		for _, t := range m.status.Types {
			cv.types = append(cv.types, t.Type)
		}
		return cv
	}
	seen := map[string]bool{}
	for _, t := range loop.BuiltinTypes {
		cv.types = append(cv.types, t)
		seen[t] = true
	}
	var extra []string
	for _, tm := range []map[string]int{m.plan.Base, m.plan.TypeCap} {
		for t := range tm {
			if !seen[t] {
				extra = append(extra, t)
				seen[t] = true
			}
		}
	}
	slices.Sort(extra)
	cv.types = append(cv.types, extra...)
	return cv
}

// effectivePolicy is the configured policy with the daemon's caps, which
// win when it reports them: its configuration may have been reloaded.
func effectivePolicy(p scheduler.Policy, st api.Status, haveStatus bool) scheduler.Policy {
	if !haveStatus {
		return p
	}
	if st.MaxLoops > 0 {
		p.MaxLoops = st.MaxLoops
	}
	if len(st.Types) > 0 {
		caps := make(map[string]int, len(st.Types))
		for _, t := range st.Types {
			if t.Cap > 0 {
				caps[t.Type] = t.Cap
			}
		}
		p.TypeCap = caps
	}
	return p
}

// usePolicy installs the effective policy and marks the plan stale when it
// changed what the plan decides on.
func (m *Model) usePolicy() {
	if m.haveStatus && m.status.Policy != nil {
		// The daemon's policy is the one in force: it follows hot reloads.
		m.policy = *m.status.Policy
	}
	p := effectivePolicy(m.policy, m.status, m.haveStatus)
	if !reflect.DeepEqual(p, m.plan) {
		m.sched.stale = true
	}
	m.plan = p
}

// refreshSchedule makes the plan again when an input changed or time alone
// changed it, and reports whether it did.
func (m *Model) refreshSchedule() bool {
	s := &m.sched
	due := s.stale || s.made.IsZero() || m.now.Before(s.made) || (!s.next.IsZero() && !m.now.Before(s.next))
	if !due {
		return false
	}
	m.computeSchedule()
	return true
}

// computeSchedule runs scheduler.Plan over the loops the model holds.
func (m *Model) computeSchedule() {
	now, p := m.now, m.plan
	fair := p.Fairness.Enabled
	// The candidates' backing array is reused: Plan keeps none of it.
	snap := scheduler.Snapshot{Waiting: m.scratch[:0], Running: map[string]int{}}
	total := 0
	if m.haveStatus {
		if m.status.Limits != nil { // a state per agent profile
			snap.Limits = m.status.Limits
		} else {
			snap.RateLimit = m.status.RateLimit
		}
		snap.Spent = m.status.Spent
		snap.DiskLow = m.status.DiskLow
		snap.Untrusted = untrusted(m.status)
		snap.Preflight, snap.NoGit, snap.NoGitText = workspaceGates(m.status)
	}
	var roots map[string]string
	tree := p.Weights.TreeOn()
	if fair || len(snap.Spent) > 0 || tree {
		roots = make(map[string]string, len(m.loops)/4+1)
	}
	next := time.Time{}
	soon := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	wt := p.Weights
	for _, l := range m.loops {
		switch {
		case l.Status == loop.Running:
			snap.Running[l.Type]++
			snap.Active = append(snap.Active, l)
			total++
		case l.Status.Waiting():
			c := scheduler.Candidate{Loop: l}
			if l.Parent != "" {
				c.ParentStatus = loop.Complete // not held: finished long ago
				if pl := m.loops[l.Parent]; pl != nil {
					c.ParentStatus = pl.Status
				}
				if roots != nil {
					c.Root = m.rootOf(l.Parent, roots)
				}
			}
			if len(l.DependsOn) > 0 {
				c.Deps = make([]scheduler.Dep, len(l.DependsOn))
				for i, d := range l.DependsOn {
					c.Deps[i] = scheduler.DepOf(d, m.loops[d]) // not held: finished long ago
				}
			}
			snap.Waiting = append(snap.Waiting, c)
			// When time alone changes the plan: the next whole minute of
			// age while the age boost still grows, the end of a backoff,
			// a deadline.
			if wt.AgeBoostPerMinute > 0 {
				mins := 0
				if age := now.Sub(l.CreatedAt); age > 0 {
					mins = int(age / time.Minute)
				}
				if mins*wt.AgeBoostPerMinute < wt.AgeBoostMax {
					soon(l.CreatedAt.Add(time.Duration(mins+1) * time.Minute))
				}
			}
			soon(l.RunnableAt)
			if !l.Deadline.IsZero() {
				soon(l.Deadline)
			}
		}
	}
	soon(snap.RateLimit.BackoffUntil)
	soon(snap.RateLimit.RecoveryUntil)
	for _, st := range snap.Limits {
		soon(st.BackoffUntil)
		soon(st.RecoveryUntil)
	}

	if tree {
		snap.Trees = m.treeWork(snap.Waiting, roots, p, now)
	}
	d := scheduler.Plan(snap, now, p)
	clear(snap.Waiting) // drop the record pointers until the next plan
	m.scratch = snap.Waiting

	at := make(map[string]int32, len(d.Rows)) // fresh: earlier Model values keep theirs
	conflicts := false
	for i := range d.Rows {
		at[d.Rows[i].Loop.ID] = int32(i)
		conflicts = conflicts || (!d.Rows[i].Runnable && d.Rows[i].Has(scheduler.Conflict))
	}
	var holders map[holdKey]string
	if conflicts {
		holders = conflictHolders(p, snap.Active, d.Rows)
	}
	m.sched = schedule{
		rows: d.Rows, at: at, holders: holders,
		blocked: snap.RateLimit.Blocked(now), made: now, next: next, count: m.sched.count + 1,
	}
	m.cv = m.capsOf(snap.Running, total)
}

// conflictHolders names the holder of each conflict group and key the way
// the scheduler finds it: the running loop (the lowest id when several
// do), else the loop the plan starts. Only the reason's words need it.
func conflictHolders(p scheduler.Policy, active []*loop.Loop, rows []scheduler.Row) map[holdKey]string {
	h := map[holdKey]string{}
	for _, l := range active {
		if g := p.ConflictGroup[l.Type]; g != "" && l.ConflictKey != "" {
			k := holdKey{g, l.ConflictKey}
			if cur, ok := h[k]; !ok || l.ID < cur {
				h[k] = l.ID
			}
		}
	}
	for i := range rows {
		l := rows[i].Loop
		if g := p.ConflictGroup[l.Type]; rows[i].Runnable && g != "" && l.ConflictKey != "" {
			if _, ok := h[holdKey{g, l.ConflictKey}]; !ok {
				h[holdKey{g, l.ConflictKey}] = l.ID
			}
		}
	}
	return h
}

// rootOf returns the root of the tree id belongs to, as far as the model
// knows it (an ancestor it does not hold ends the walk), memoised in roots.
// treeWork is the work left in each tree of a waiting loop, as the
// daemon's snapshot has it (scheduler.AddWork over every unfinished loop
// of those trees), estimated with the durations the daemon learned.
func (m *Model) treeWork(waiting []scheduler.Candidate, roots map[string]string, p scheduler.Policy, now time.Time) map[string]scheduler.TreeWork {
	var d scheduler.Durations
	if m.haveStatus {
		d = m.status.Durations
	}
	trees := map[string]scheduler.TreeWork{}
	for _, c := range waiting {
		trees[cmp.Or(c.Root, c.Loop.ID)] = scheduler.TreeWork{}
	}
	for _, l := range m.loops {
		if l.Status.Terminal() {
			continue
		}
		root := l.ID
		if l.Parent != "" {
			root = m.rootOf(l.Parent, roots)
		}
		if _, ok := trees[root]; !ok {
			continue
		}
		var created time.Time
		if r := m.loops[root]; r != nil {
			created = r.CreatedAt
		}
		scheduler.AddWork(trees, root, created, l, d, p.Fairness, now)
	}
	return trees
}

func (m *Model) rootOf(id string, roots map[string]string) string {
	var path []string
	r := id
	for {
		if known, ok := roots[r]; ok {
			r = known
			break
		}
		l := m.loops[r]
		if l == nil || l.Parent == "" || len(path) > 64 {
			break
		}
		path = append(path, r)
		r = l.Parent
	}
	for _, p := range path {
		roots[p] = r
	}
	roots[id] = r
	return r
}

// countdown formats a wait, rounded up to the second: 12s, 2m10s, 1h5m.
func countdown(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	secs := int64((d + time.Second - 1) / time.Second)
	return fmtSecs(secs, true)
}

// elapsed formats a running time, to the second: 45s, 2m10s, 1h5m.
func elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmtSecs(int64(d/time.Second), true)
}

// age formats an age coarsely: 45s, 58m, 1h4m, 3d2h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmtSecs(int64(d/time.Second), false)
}

func fmtSecs(s int64, fine bool) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		if fine && s%60 != 0 {
			return fmt.Sprintf("%dm%ds", s/60, s%60)
		}
		return fmt.Sprintf("%dm", s/60)
	case s < 86400:
		if s/60%60 == 0 {
			return fmt.Sprintf("%dh", s/3600)
		}
		return fmt.Sprintf("%dh%dm", s/3600, s/60%60)
	default:
		if s/3600%24 == 0 {
			return fmt.Sprintf("%dd", s/86400)
		}
		return fmt.Sprintf("%dd%dh", s/86400, s/3600%24)
	}
}
