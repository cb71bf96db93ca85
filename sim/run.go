package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

// Epoch is virtual second 0.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The events of a run.
const (
	Arrive = "arrive"
	Admit  = "admit"
	Done   = "done"
	Expire = "expire"
	// Retry: an iteration failed; the loop waits again with its iteration
	// + 1 after the retry backoff (retry.*).
	Retry = "retry"
	// Fail: the loop's last iteration failed (max_iterations, or the
	// workload lists no more): its tree never completes.
	Fail = "fail"
	// Await: an iteration passed and the loop waits for approval.
	Await = "await"
)

// Event is one line of the timeline. Its JSON form, {"t":3,"event":"admit","id":"a1"},
// is stable; the text form carries more and may change.
type Event struct {
	T     int    `json:"t"`
	Event string `json:"event"`
	ID    string `json:"id"`
	info  string // the rest of the text line
}

// KeyStats summarises the loops of one fairness key (as the scheduler
// keys them: key:, else the root of the loop's tree).
type KeyStats struct {
	Key      string
	Loops    int
	Admitted int
	Expired  int
	Waits    []int // seconds from arrival to admission, per admitted loop in admission order
	DoneAt   []int // completion times, in order
}

// Waiting is a loop still waiting at the end, with the reasons of the last plan.
type Waiting struct {
	ID      string
	Reasons []scheduler.Reason
}

// Result is what a run produced.
type Result struct {
	Policy   string // the policy's name (Options.Policy; "loopr" when none)
	Until    int    // the last second simulated
	Fairness bool
	Events   []Event
	Keys     []KeyStats // by key
	Waiting  []Waiting  // in the last plan's order
	Metrics  Metrics
}

// Admissions returns the admit events as "T:id" strings, in order: the
// admission order a test compares.
func (r Result) Admissions() []string {
	var out []string
	for _, e := range r.Events {
		if e.Event == Admit {
			out = append(out, strconv.Itoa(e.T)+":"+e.ID)
		}
	}
	return out
}

type status int

const (
	notArrived status = iota
	waiting
	running
	approving // an iteration passed; waits for approval, holding no slot
	done
	expired
	failed
)

type simLoop struct {
	Loop
	idx      int // in the workload
	rec      *loop.Loop
	root     string // id of the root of its tree; "" for a root
	key      string // fairness key
	st       status
	arrived  int    // second it arrived
	since    int    // second it began to wait for its current iteration
	admitted int    // second its current iteration was admitted
	finish   int    // second its current iteration ends
	attempt  int    // index of its current iteration in Attempts()
	approve  int    // second its approval ends
	doneAt   int    // second it completed
	ranOn    string // the agent profile of its current iteration (Row.Agent)
	parent   *simLoop
	kids     []*simLoop
	rank     int // seconds from its start to the end of the longest chain after it (cpf)
}

func (l *simLoop) tree() string {
	if l.root == "" {
		return l.ID
	}
	return l.root
}

// settle marks l's subtree done (rec.SubtreeDoneAt) when l and every loop
// below it are done, and then its parent's, as control.Settle does.
func settle(l *simLoop, now time.Time) {
	for ; l != nil && l.st == done && l.rec.SubtreeDoneAt.IsZero(); l = l.parent {
		for _, k := range l.kids {
			if k.rec.SubtreeDoneAt.IsZero() {
				return
			}
		}
		l.rec.SubtreeDoneAt = now
	}
}

// Options choose the policy of a run.
type Options struct {
	// Policy is a built-in policy (Policies): "" or "loopr", as
	// configured; "seed", loopr with the tree weights at 0; "fifo", by
	// tree submission; "cpf", critical path first (clairvoyant).
	Policy string
	// Adjust, when set, changes the policy after Policy made it (tuning).
	Adjust func(*scheduler.Policy)
}

// Policies are the built-in policies of `loopr sim --compare`.
var Policies = []string{"loopr", "seed", "fifo", "cpf"}

// Run simulates w with the configured policy, dropping RunWith's error (a
// loop waiting for itself, or no end by the last second). It is
// deterministic: the same workload gives the same result.
func Run(w *Workload) Result {
	r, _ := RunWith(w, Options{})
	return r
}

// run is the state of one simulation.
type run struct {
	w     *Workload
	pol   scheduler.Policy
	fp    scheduler.FairnessPolicy
	tree  bool // the tree term is on: fill Snapshot.Trees
	alpha float64
	ls    []*simLoop
	byID  map[string]*simLoop
	res   Result

	fair      scheduler.Fairness
	durs      scheduler.Durations
	running   []*simLoop // in admission order
	approving []*simLoop
	wake      map[int]bool // seconds at which a backoff or a limit window ends
	lastWake  int
	nWaiting  int
	changed   bool
	busy      int64 // slot-seconds of iterations run
	waits     map[string][]int
	// byDeadline: the loops with a deadline, by deadline, those not yet
	// past it; late: loops that began to wait again past their deadline.
	byDeadline []*simLoop
	late       []*simLoop
	truncated  bool // the run reached maxUntil with work left
}

// expire expires, in workload order, the waiting loops whose deadline is
// t or earlier: each second costs the loops whose deadline came or that
// waited again past it, not a walk over the workload.
func (s *run) expire(t int) {
	due := s.late
	s.late = nil
	for len(s.byDeadline) > 0 && s.byDeadline[0].Deadline <= t {
		due = append(due, s.byDeadline[0])
		s.byDeadline = s.byDeadline[1:]
	}
	slices.SortFunc(due, func(a, b *simLoop) int { return a.idx - b.idx })
	for i, l := range due {
		if i > 0 && due[i-1] == l {
			continue
		}
		if l.st == waiting {
			l.st, l.rec.Status, s.changed = expired, loop.Expired, true
			s.nWaiting--
			s.emit(t, Expire, l.ID, fmt.Sprintf("deadline %d", l.Deadline))
		}
	}
}

// waitAgain notes that l waits (again) at t: past its deadline, it expires
// in this second's sweep.
func (s *run) waitAgain(l *simLoop, t int) {
	if l.Deadline > 0 && t >= l.Deadline {
		s.late = append(s.late, l)
	}
}

// RunWith simulates w under the policy opt names.
func RunWith(w *Workload, opt Options) (Result, error) {
	s := &run{w: w, pol: control.Policy(w.Config), durs: scheduler.Durations{}, wake: map[int]bool{}, waits: map[string][]int{}}
	s.fp = s.pol.Fairness
	if s.alpha = s.fp.Alpha; !(s.alpha > 0 && s.alpha <= 1) {
		s.alpha = 0.3
	}
	if err := s.build(); err != nil {
		return Result{}, err
	}
	name := opt.Policy
	switch name {
	case "", "loopr":
		name = "loopr"
	case "seed":
		zeroTree(&s.pol.Weights)
	case "fifo":
		zeroTree(&s.pol.Weights)
		s.pol.Order = func(a, b *scheduler.Row) int {
			return s.byID[a.Loop.ID].submit(s) - s.byID[b.Loop.ID].submit(s)
		}
	case "cpf":
		zeroTree(&s.pol.Weights)
		s.pol.Order = func(a, b *scheduler.Row) int { return s.byID[b.Loop.ID].rank - s.byID[a.Loop.ID].rank }
	default:
		return Result{}, fmt.Errorf("unknown policy %q: want one of %v", opt.Policy, Policies)
	}
	if opt.Adjust != nil {
		opt.Adjust(&s.pol)
	}
	s.tree = s.pol.Weights.TreeBoostMax > 0 || s.pol.Weights.TreeAgeBoostMax > 0
	s.res = Result{Policy: name, Until: w.Until, Fairness: s.fp.Enabled}
	s.loop()
	s.summary()
	s.res.Metrics = s.metrics()
	if s.truncated && w.Until == 0 {
		return s.res, fmt.Errorf("%s: the workload did not end by virtual second %d, the most loopr sim runs: shorten its durations, or set until: to see the first %d seconds", baseName(w.File), maxUntil, maxUntil)
	}
	return s.res, nil
}

func zeroTree(w *scheduler.Weights) {
	w.TreeBoostMax, w.TreeAgeBoostPerMinute, w.TreeAgeBoostMax = 0, 0, 0
}

// submit is when l's tree was submitted: its root's arrival.
func (l *simLoop) submit(s *run) int {
	if l.root == "" {
		return l.arrived
	}
	return s.byID[l.root].arrived
}

// build makes the loop records, trees and sibling orders, and each loop's
// rank; a loop that waits for itself is an error.
func (s *run) build() error {
	w := s.w
	s.ls = make([]*simLoop, len(w.Loops))
	s.byID = make(map[string]*simLoop, len(w.Loops))
	for i, l := range w.Loops {
		rec := &loop.Loop{
			ID: l.ID, Type: l.Type, Status: loop.Pending, Title: l.ID, Iteration: 1,
			MaxIterations: max(w.Config.Loop(l.Type).MaxIterations, 1),
			FairnessKey:   l.Key, ConflictKey: l.ConflictKey, CostHint: l.Cost, Owner: l.Owner, Parent: l.Parent,
			Agent: l.Agent,
		}
		if len(l.Iterations) == 0 {
			rec.MaxIterations = 1 // as before iterations existed: one that passes
		}
		if l.Deadline > 0 {
			rec.Deadline = Epoch.Add(time.Duration(l.Deadline) * time.Second)
		}
		sl := &simLoop{Loop: l, idx: i, rec: rec}
		if p := s.byID[l.Parent]; p != nil { // parents come first in the file
			rec.Depth = p.rec.Depth + 1
			sl.root = p.tree()
			// The order between siblings: depends_on, else the parent
			// type's children setting (sequential: the sibling before).
			if !l.DependsSet && len(p.kids) > 0 && w.Config.Loop(p.Type).Children == config.Sequential {
				rec.DependsOn = []string{p.kids[len(p.kids)-1].ID}
			}
			sl.parent, p.kids = p, append(p.kids, sl)
		}
		if l.DependsSet {
			rec.DependsOn = l.DependsOn
		}
		sl.key = scheduler.FairnessKey(rec, sl.root)
		s.ls[i], s.byID[l.ID] = sl, sl
	}
	// Ranks: a loop's successors are its children and the loops that
	// depend on it or on a loop below it (depends_on waits for a subtree).
	succ := make(map[*simLoop][]*simLoop)
	for _, l := range s.ls {
		if l.parent != nil {
			succ[l.parent] = append(succ[l.parent], l)
		}
		for _, d := range l.rec.DependsOn {
			for _, y := range s.subtree(s.byID[d], nil) {
				succ[y] = append(succ[y], l)
			}
		}
	}
	// 1: being ranked, 2: ranked. A loop met again while being ranked
	// waits for itself (depends_on an ancestor, or on a subtree that
	// waits for it): the workload can never end.
	state := make(map[*simLoop]int, len(s.ls))
	var cycle *simLoop
	var rank func(l *simLoop) int
	rank = func(l *simLoop) int {
		switch state[l] {
		case 1:
			cycle = l
			return 0
		case 0:
			state[l] = 1
			after := 0
			for _, n := range succ[l] {
				if after = max(after, rank(n)); cycle != nil {
					return 0
				}
			}
			l.rank, state[l] = s.span(l)+after, 2
		}
		return l.rank
	}
	for _, l := range s.ls {
		if rank(l); cycle != nil {
			return &config.Error{File: baseName(w.File), Line: cycle.Line, Key: fmt.Sprintf("loops[%d].depends_on", cycle.idx),
				Msg: fmt.Sprintf("%s waits for itself: its dependencies, or a loop it waits for, wait for a subtree that holds it (depends_on waits for the whole subtree of each loop it names)", cycle.ID)}
		}
	}
	return nil
}

// subtree appends l and every loop below it to out.
func (s *run) subtree(l *simLoop, out []*simLoop) []*simLoop {
	out = append(out, l)
	for _, k := range l.kids {
		out = s.subtree(k, out)
	}
	return out
}

// span is the seconds from l's first admission to its completion if it
// never waits for a slot: its iterations, the backoffs between them and
// its approval.
func (s *run) span(l *simLoop) int {
	total := 0
	for i, it := range l.Attempts() {
		total += it.Duration
		if it.Pass || i+1 >= l.rec.MaxIterations {
			return total + l.Approval*b2i(it.Pass)
		}
		total += int(math.Ceil(s.w.Config.Retry.Delay(i + 1).Seconds()))
	}
	return total
}

// work is the slot-seconds l's iterations take.
func (l *simLoop) work() int {
	total := 0
	for i, it := range l.Attempts() {
		total += it.Duration
		if it.Pass || i+1 >= l.rec.MaxIterations {
			break
		}
	}
	return total
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *run) emit(t int, ev, id, info string) {
	s.res.Events = append(s.res.Events, Event{T: t, Event: ev, ID: id, info: info})
}

func at(t int) time.Time { return Epoch.Add(time.Duration(t) * time.Second) }

// arrive creates l at t (loops arriving in the same second are created in
// file order).
func (s *run) arrive(l *simLoop, t int) {
	l.st, l.arrived, l.since, s.changed = waiting, t, t, true
	l.rec.CreatedAt = at(t).Add(time.Duration(l.idx))
	l.rec.UpdatedAt = l.rec.CreatedAt
	s.nWaiting++
	s.waitAgain(l, t)
	s.emit(t, Arrive, l.ID, l.Type)
}

// complete marks l done at t; its children without at: arrive now.
func (s *run) complete(l *simLoop, t int) {
	l.st, l.rec.Status, l.doneAt, s.changed = done, loop.Complete, t, true
	settle(l, at(t))
	s.emit(t, Done, l.ID, "")
	for _, k := range l.kids {
		if !k.AtSet {
			s.arrive(k, t)
		}
	}
}

// endIteration ends l's current iteration at t: it passes (complete, or
// wait for approval), or fails (back to waiting after the retry backoff, as
// loopmgr's failLoop, or failed at max_iterations).
func (s *run) endIteration(l *simLoop, t int) {
	now := at(t)
	it := l.Attempts()[l.attempt]
	wall := time.Duration(it.Duration) * time.Second
	s.busy += int64(it.Duration)
	s.changed = true
	s.durs.Observe(l.Type, l.ranOn, wall, s.alpha) // by the profile it ran on, as loopmgr
	if s.fp.Enabled {
		s.fair.Evict(now, s.fp.IdleTTL)
		s.fair.Observe(l.Type, l.key, wall, now, s.fp)
	}
	switch {
	case it.Pass && l.Approval > 0:
		l.st, l.rec.Status, l.approve = approving, loop.AwaitingApproval, t+l.Approval
		s.approving = append(s.approving, l)
		s.emit(t, Await, l.ID, fmt.Sprintf("approval at %d", l.approve))
	case it.Pass:
		s.complete(l, t)
	case l.attempt+1 >= len(l.Attempts()) || l.rec.Iteration >= l.rec.MaxIterations:
		l.st, l.rec.Status = failed, loop.Failed
		s.emit(t, Fail, l.ID, fmt.Sprintf("iteration %d failed", l.rec.Iteration))
	default:
		delay := s.w.Config.Retry.Delay(l.rec.Iteration)
		s.emit(t, Retry, l.ID, fmt.Sprintf("iteration %d failed; retry in %s", l.rec.Iteration, delay))
		l.attempt++
		l.rec.Iteration++
		l.rec.RunnableAt = now.Add(delay)
		l.st, l.rec.Status, l.since = waiting, loop.Pending, t
		s.nWaiting++
		s.waitAgain(l, t)
		s.wakeAt(t + int(math.Ceil(delay.Seconds())))
	}
}

func (s *run) wakeAt(t int) {
	s.wake[t] = true
	s.lastWake = max(s.lastWake, t)
}

// loop runs the virtual clock. Each second: arrivals, then ended
// iterations and approvals, then expiries, then admissions.
func (s *run) loop() {
	w := s.w
	arrivals := make([]*simLoop, 0, len(s.ls))
	for _, l := range s.ls {
		if l.AtSet || l.parent == nil {
			arrivals = append(arrivals, l)
		}
	}
	slices.SortStableFunc(arrivals, func(a, b *simLoop) int { return a.At - b.At })
	deadlines := slices.ContainsFunc(s.ls, func(l *simLoop) bool { return l.Deadline > 0 })
	for _, l := range s.ls {
		if l.Deadline > 0 {
			s.byDeadline = append(s.byDeadline, l)
		}
	}
	slices.SortStableFunc(s.byDeadline, func(a, b *simLoop) int { return a.Deadline - b.Deadline })
	for _, lim := range w.Limits {
		s.wakeAt(lim.From)
		s.wakeAt(lim.Until)
	}
	var last scheduler.Decision
	for t := 0; ; t++ {
		if w.Until > 0 && t > w.Until {
			break
		}
		if t > maxUntil {
			s.truncated = true
			break
		}
		now := at(t)
		s.changed = s.wake[t]
		delete(s.wake, t)
		// 1. Arrivals.
		for len(arrivals) > 0 && arrivals[0].At == t {
			s.arrive(arrivals[0], t)
			arrivals = arrivals[1:]
		}
		// 2. Iterations that end, then approvals given.
		s.running = due(s.running, t, func(l *simLoop) int { return l.finish }, s.endIteration)
		s.approving = due(s.approving, t, func(l *simLoop) int { return l.approve }, s.complete)
		// 3. Loops past their deadline expire (the manager's sweep): those
		// whose deadline came and those that waited again past it.
		if deadlines {
			s.expire(t)
		}
		// 4. Admissions until nothing more is admissible: one plan admits
		// all it can (an admission only tightens the gates of the loops after
		// it, so planning again would admit nothing), and nothing more is
		// admissible until an arrival, an end, an expiry or a wake-up.
		admitted := false
		if s.changed {
			last = scheduler.Plan(s.snapshot(now, t), now, s.pol)
			admitted = s.admit(last, t, now)
		}
		idle := len(arrivals) == 0 && len(s.running) == 0 && len(s.approving) == 0 && !admitted
		if w.Until == 0 && idle && (s.nWaiting == 0 || t >= s.lastWake) {
			s.res.Until = t
			break
		}
		s.res.Until = t
	}
	for _, r := range last.Rows {
		if l := s.byID[r.Loop.ID]; l.st == waiting {
			s.res.Waiting = append(s.res.Waiting, Waiting{ID: l.ID, Reasons: r.Reasons})
		}
	}
}

// due calls f(l, t) for each loop of ls whose when(l) has come, in order,
// and returns the others.
func due(ls []*simLoop, t int, when func(*simLoop) int, f func(*simLoop, int)) []*simLoop {
	kept := ls[:0]
	for _, l := range ls {
		if when(l) > t {
			kept = append(kept, l)
			continue
		}
		f(l, t)
	}
	return kept
}

// admit starts the loops d starts at t.
func (s *run) admit(d scheduler.Decision, t int, now time.Time) bool {
	rows := map[string]*scheduler.Row{}
	for i := range d.Rows {
		if d.Rows[i].Runnable {
			rows[d.Rows[i].Loop.ID] = &d.Rows[i]
		}
	}
	for _, id := range d.Start {
		l := s.byID[id]
		l.st, l.rec.Status, l.admitted = running, loop.Running, t
		l.finish = t + l.Attempts()[l.attempt].Duration
		l.rec.StartedAt = now
		if r := rows[id]; r != nil {
			l.ranOn = r.Agent
		}
		s.nWaiting--
		s.running = append(s.running, l)
		s.emit(t, Admit, id, admitText(l, rows[id], len(s.running), s.pol.MaxLoops))
		s.waits[id] = append(s.waits[id], t-l.since)
	}
	if s.fp.Enabled {
		s.fair.Record(d.Charges, now, s.fp)
	}
	return len(d.Start) > 0
}

// snapshot is what the daemon's control.Snapshot would read: the waiting
// loops with their parents' statuses, roots and dependencies, the running
// loops, the profiles in a limit window and, with the tree term on, each
// tree's work left (scheduler.AddWork over its unfinished loops).
func (s *run) snapshot(now time.Time, t int) scheduler.Snapshot {
	snap := scheduler.Snapshot{Running: map[string]int{}, Fairness: s.fair}
	for _, lim := range s.w.Limits {
		if lim.From <= t && t < lim.Until {
			if snap.Limits == nil {
				snap.Limits = map[string]ratelimit.State{}
			}
			snap.Limits[lim.Profile] = ratelimit.State{BackoffUntil: at(lim.Until)}
		}
	}
	if s.tree {
		snap.Trees = map[string]scheduler.TreeWork{}
	}
	for _, l := range s.ls {
		if s.tree && (l.st == waiting || l.st == running || l.st == approving) {
			scheduler.AddWork(snap.Trees, l.tree(), s.byID[l.tree()].rec.CreatedAt, l.rec, s.durs, s.fp, now)
		}
		if l.st != waiting {
			continue
		}
		c := scheduler.Candidate{Loop: l.rec, Root: l.root}
		if l.parent != nil {
			c.ParentStatus = l.parent.rec.Status
		}
		for _, d := range l.rec.DependsOn {
			c.Deps = append(c.Deps, scheduler.DepOf(d, s.byID[d].rec))
		}
		snap.Waiting = append(snap.Waiting, c)
	}
	for _, l := range s.running {
		snap.Running[l.Type]++
		snap.Active = append(snap.Active, l.rec)
	}
	return snap
}
