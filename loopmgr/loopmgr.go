// Package loopmgr is loopr's manager loop. One goroutine (Run) owns the run
// state: it wakes on every poll interval and immediately when something
// happens (a loop finished, was added or changed, a backoff ended), takes a
// snapshot, asks the pure scheduler what to start, leases and starts those
// loops, and applies each finished iteration in one store transaction with
// its event. Agents run in their own goroutines through the runner; their
// results come back to the owning goroutine on a channel.
//
// Safety rules it keeps:
//   - a loop is started only by moving it pending → running under a lease in
//     one transaction, so it never runs twice at once;
//   - a result is applied only if the loop is still running under this
//     manager's lease at the same iteration (a user's cancel wins);
//   - at start, loops left running by a crashed daemon have their agent
//     process groups killed and count one failed attempt (seed 000), so a
//     poison loop parks instead of crashing the daemon forever;
//   - on shutdown, agents are stopped and running loops go back to pending
//     at the same iteration: a clean stop costs no attempt.
package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/hooks"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/mergequeue"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// Runner runs one iteration of a loop. *runner.Runner implements it.
type Runner interface {
	Run(ctx context.Context, j runner.Job) runner.Result
}

// Options configure a Manager.
type Options struct {
	Service *control.Service
	Runner  Runner
	Git     *gitflow.Repo // nil: loops run in the workspace directly
	// Queue merges passed loops' branches into their plan branch (with
	// Git; nil: one on Git and Runner).
	Queue *mergequeue.Queue
	// Cluster makes the manager a worker of several sharing an etcd store
	// (cluster.go): it runs the loops assigned to it, and schedules while
	// its worker is the elected scheduler. Owner becomes "worker <name>",
	// and Fence, if nil, checks the loop's lease key. nil: the only daemon
	// of its store.
	Cluster *cluster.Worker
	Log     *slog.Logger
	Owner   string           // lease owner, e.g. "pid 1234"
	Notify  func()           // called after every committed change (event stream)
	Clock   func() time.Time // defaults to time.Now
	// OnStart, if set, is called with each loop id as its iteration starts,
	// and OnFinish after an iteration's result is committed (used by the
	// dispatch-latency benchmark).
	OnStart  func(id string, at time.Time)
	OnFinish func(id string, at time.Time)
	// OnTick, if set, is called after every scheduling tick (metrics).
	OnTick func(TickStats)
	// OnDispatch, if set, is called as each loop starts, with the record
	// as it was while it waited and its dispatch latency: how long after
	// ReadyAt it started (metrics).
	OnDispatch func(l loop.Loop, latency time.Duration)
	// OnUsage, if set, is called with each iteration's usage as it is
	// recorded: the loop, the agent profile it ran on (metrics).
	OnUsage func(l loop.Loop, agent string, u loop.Usage)
	// Fence, if set, says whether this process may still record the
	// iteration of loop id: nil error = its lease is still ours (nil Fence
	// = always). The git steps call it before every push and, under the
	// merge lock, before the plan branch moves.
	Fence func(ctx context.Context, id string, iteration int) error
	// Redact is the daemon's one Redactor: the values of the secrets read
	// for an agent are added to it before the agent starts, so that they
	// are replaced wherever loopr stores or sends text. The manager hands
	// it to the hooks it runs (their logs) and to the runners it makes;
	// the records and events it writes are redacted by the store, which
	// the daemon gives the same Redactor (store.SetRedact). nil: token
	// shapes only.
	Redact *redact.Redactor
}

// Manager schedules and runs loops.
type Manager struct {
	o       Options
	svc     *control.Service
	log     *slog.Logger
	wake    chan struct{}
	results chan result
	kill    chan []string

	mu         sync.Mutex
	active     map[string]*active   // owned by Run; mu guards reads from other goroutines
	lastRec    map[string]time.Time // last start of each agent profile during its rate-limit recovery; owned by Run
	charge     *charge              // the usage of the result being recorded (finish); owned by Run
	answering  *answering           // the comments the result being recorded answers (finish); owned by Run
	ending     *ending              // the session of the result being recorded (finish); owned by Run
	held       bool                 // some loops wait in needs_human for a limit (limits.go); owned by Run
	lastHold   time.Time            // last look for loops to hold or release (limits.go); owned by Run
	unrec      map[string]int       // loop → iteration whose result was not recorded (unrecorded.go); owned by Run
	unrecRun   map[string]int       // loop → results in a row not recorded, for the backoff; owned by Run
	setupFails map[string]int       // loop → iterations in a row that failed before the agent started (setup.go); owned by Run
	stopped    bool
	tick       TickStats

	mergeWake  chan struct{} // wakes the merge queue (merge.go)
	mergesDone chan struct{} // closed when the merge queue's goroutine ended

	// Several workers (cluster.go); unused without Options.Cluster.
	fmu       sync.Mutex
	seen      map[string]store.Change // records changed since the last worker tick (the follower); fmu guards it
	toLaunch  map[string]loop.Loop    // loops assigned here, not yet started; owned by Run
	lastLost  time.Time               // last look for loops of lost workers; owned by Run
	wasLeader bool                    // the worker was the scheduler at the last tick; owned by Run
	live      []cluster.Live          // the live workers, listed by this tick's place; owned by Run
	liveErr   error                   // why they could not be listed
}

type active struct {
	cancel    context.CancelFunc
	kill      context.CancelCauseFunc // with runner.ErrKill: SIGKILL, no grace (fenced)
	fenced    bool                    // the worker lost its session: record nothing
	iteration int
	agent     string // the agent profile the iteration runs on
	started   time.Time
	stopping  bool // shutdown: requeue without cost
	pausing   bool // loopr pause/attach: stop, then pause at the same iteration
	// synced is the tip of the loop's branch on git.remote when the
	// iteration began ("" = not there): the push after the iteration
	// expects it. Written and read by the iteration's goroutine only.
	synced string
}

type result struct {
	id  string
	job runner.Job
	res runner.Result
	err error // preparation failed before the agent ran
	git saved // the git work done after the agent, off the manager goroutine
	// hook is an after_run hook that failed with on_error block or
	// suspend (a before_run or after_create one comes as err).
	hook *hooks.Result
}

// TickStats describes the last scheduling tick.
type TickStats struct {
	At                                          time.Time
	Waiting, Eligible, Selected, Running, Slots int
	Duration                                    time.Duration
}

// New returns a Manager; nothing runs until Run.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Notify == nil {
		o.Notify = func() {}
	}
	if o.Cluster != nil {
		o.Owner = cluster.OwnerPrefix + o.Cluster.Name()
	}
	m := &Manager{o: o, svc: o.Service, log: o.Log, wake: make(chan struct{}, 1),
		results: make(chan result, 64), kill: make(chan []string, 16), active: map[string]*active{},
		lastRec: map[string]time.Time{}, toLaunch: map[string]loop.Loop{}, seen: map[string]store.Change{},
		setupFails: map[string]int{},
		mergeWake:  make(chan struct{}, 1)}
	if o.Cluster != nil && o.Fence == nil {
		m.o.Fence = m.leaseFence
	}
	if o.Git != nil && o.Queue == nil {
		run, _ := o.Runner.(*runner.Runner)
		if run == nil {
			run = &runner.Runner{Redact: o.Redact}
		}
		m.o.Queue = &mergequeue.Queue{Git: o.Git, Runner: run, Log: o.Log}
	}
	return m
}

// Wake asks the manager to run a scheduling tick now.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Stop asks the manager to stop the agents of the given loops (they were
// cancelled or invalidated by a user action), then to reschedule.
func (m *Manager) Stop(ids []string) {
	if len(ids) > 0 {
		m.kill <- ids
	}
	m.Wake()
}

// Pause stops the agent of running loop id for `loopr pause` (and
// `loopr attach`): like a daemon stop, the iteration is not spent; the
// loop is then paused at the same iteration, its session recorded as
// interrupted. It reports false when no agent of id runs here.
func (m *Manager) Pause(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.active[id]
	if a == nil {
		return false
	}
	a.pausing = true
	a.cancel()
	return true
}

// Running returns the ids of loops with an agent or validation in flight.
func (m *Manager) Running() map[string]time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]time.Time, len(m.active))
	for id, a := range m.active {
		out[id] = a.started
	}
	return out
}

// LastTick returns the statistics of the last scheduling tick.
func (m *Manager) LastTick() TickStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tick
}

func (m *Manager) now() time.Time { return m.o.Clock().UTC().Truncate(time.Millisecond) }

func (m *Manager) cfg() *config.Config { return m.svc.Config() }

// Run recovers what a previous daemon left, then schedules until ctx is
// cancelled; then it stops every agent and requeues their loops.
func (m *Manager) Run(ctx context.Context) error {
	// Decisions read the in-memory index, kept in step with every commit,
	// instead of decoding every waiting loop each tick.
	if err := m.svc.EnableIndex(); err != nil {
		return err
	}
	if err := m.recover(ctx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if m.clustered() {
		if err := m.follow(); err != nil {
			return fmt.Errorf("follow the store: %w", err)
		}
	}
	m.mergesDone = make(chan struct{})
	go func() {
		defer close(m.mergesDone)
		if m.o.Git != nil {
			m.runMerges(ctx) // what a crash left merging lands first
		}
	}()
	poll := m.cfg().PollInterval()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var changed <-chan struct{} // the worker's lease or leadership (nil: never)
		if m.clustered() {
			changed = m.o.Cluster.Changed()
		}
		select {
		case <-ctx.Done():
			return m.shutdown()
		case <-changed:
		case r := <-m.results:
			m.finish(ctx, r)
			continue // drain results before the next tick
		case ids := <-m.kill:
			m.stopAgents(ids)
			continue
		case <-m.wake:
		case <-timer.C:
		}
		next := m.tickOnce(ctx)
		if p := m.cfg().PollInterval(); p != poll {
			poll = p
		}
		if next <= 0 || next > poll {
			next = poll
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// tickOnce sweeps, plans and starts; it returns how soon the next tick is
// useful (a backoff or rate limit ending), or 0 for the poll interval.
func (m *Manager) tickOnce(ctx context.Context) time.Duration {
	began := time.Now()
	now := m.now()
	m.retryUnrecorded(now)
	if m.clustered() {
		m.workerTick(ctx, now)
		if !m.o.Cluster.Scheduler() {
			if m.wasLeader {
				m.log.Info("no longer the scheduler", "worker", m.o.Cluster.Name())
				m.svc.SetPlacement(nil)
			}
			m.wasLeader = false
			return 0
		}
		if !m.wasLeader {
			m.log.Info("scheduling as the elected scheduler", "worker", m.o.Cluster.Name())
			m.wasLeader, m.lastLost = true, time.Time{}
		}
		m.recoverLost(ctx, now)
		m.place(ctx)
		defer func() { m.live, m.liveErr = nil, nil }()
	}
	if err := m.sweep(now); err != nil {
		m.log.Error("sweep", "err", err)
	}
	d, err := m.svc.Decide(now)
	if err != nil {
		m.log.Error("scheduler decision", "err", err)
		return 0
	}
	m.limitHolds(d.Limits, now)
	// The profile each loop runs on: its own, or a fallback while its own
	// is limited (the decision's rule, on the same state).
	agents := control.Policy(m.cfg()).Agents
	start := d.Start
	if anyRecovering(d, now) {
		// Recovery ramp: at most one start per profile and poll interval,
		// however often we wake.
		start = nil
		recovering := map[string]bool{}
		for _, id := range d.Start {
			l, err := m.svc.Get(id)
			if err != nil {
				continue
			}
			p, _ := agents.Pick(&l, d.Limits, now)
			if d.Limits[p].Recovering(now) || d.RateLimit.Recovering(now) {
				if recovering[p] || now.Sub(m.lastRec[p]) < m.cfg().PollInterval() {
					continue
				}
				recovering[p], m.lastRec[p] = true, now
			}
			start = append(start, id)
		}
	}
	selected := 0
	var charges []scheduler.Charge // fairness: what the started loops cost their keys
	if ctx.Err() != nil {
		start = nil
	}
	var started []leased
	if m.clustered() {
		started = m.assignAll(ctx, start, now, &agents, d.Limits)
	} else {
		started = m.leaseAll(start, now, &agents, d.Limits)
	}
	for i, ls := range started {
		if ls.err != nil {
			if errors.Is(ls.err, errNoWorker) {
				m.log.Debug("start", "loop", start[i], "err", ls.err)
			} else {
				m.log.Warn("start", "loop", start[i], "err", ls.err)
			}
			continue
		}
		if m.clustered() {
			m.o.Notify() // its worker starts it when its follower sees it
			if m.o.OnDispatch != nil {
				m.o.OnDispatch(ls.waited, max(now.Sub(ls.ready), 0))
			}
		} else {
			m.launch(ctx, ls, ls.profile, now)
		}
		selected++
		for _, c := range d.Charges {
			if c.ID == ls.l.ID {
				charges = append(charges, c)
			}
		}
	}
	if err := m.svc.Charge(charges, now); err != nil {
		m.log.Error("fairness charge", "err", err)
	}
	if m.clustered() && selected > 0 {
		m.workerTick(ctx, now) // start what was assigned to this worker now
	}
	st := TickStats{At: now, Waiting: d.Waiting, Eligible: d.Eligible, Selected: selected,
		Running: d.Running + selected, Slots: d.Slots, Duration: time.Since(began)}
	m.mu.Lock()
	changed := st.Waiting != m.tick.Waiting || st.Running != m.tick.Running || selected > 0
	m.tick = st
	m.mu.Unlock()
	if m.o.OnTick != nil {
		m.o.OnTick(st)
	}
	lvl := slog.LevelDebug
	if changed {
		lvl = slog.LevelInfo
	}
	m.log.Log(ctx, lvl, "scheduler tick", "pending", st.Waiting, "runnable", st.Eligible,
		"selected", st.Selected, "running", st.Running, "slots", st.Slots, "took", st.Duration.Round(time.Microsecond))
	if d.Next.IsZero() {
		return 0
	}
	return d.Next.Sub(now) // the earliest backoff or rate limit ending
}

// sweep expires pending loops past their deadline and fails orphans. With
// the index it looks only at the loops the index names, and writes nothing
// when there are none.
func (m *Manager) sweep(now time.Time) error {
	cands, indexed := m.svc.SweepCandidates(now)
	if indexed && len(cands) == 0 {
		return nil
	}
	changed := false
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		var expire, orphan []loop.Loop
		visit := func(l loop.Loop) bool {
			if !l.Deadline.IsZero() && !now.Before(l.Deadline) {
				expire = append(expire, l)
			} else if l.Parent != "" {
				if _, err := tx.Get(l.Parent); errors.Is(err, store.ErrNotFound) {
					orphan = append(orphan, l)
				}
			}
			return true
		}
		for _, st := range []loop.Status{loop.Pending, loop.Paused} {
			if !indexed {
				if err := tx.ByStatus(st, visit); err != nil {
					return err
				}
				continue
			}
			for _, id := range cands { // in id order, like ByStatus
				if l, err := tx.Get(id); err == nil && l.Status == st {
					visit(l)
				}
			}
		}
		for _, l := range expire {
			why := "deadline " + l.Deadline.Format(time.RFC3339) + " passed while pending"
			if err := control.Move(tx, l, loop.Expired, now, why, func(n *loop.Loop) { n.Reason = why }); err != nil {
				return err
			}
			changed = true
		}
		for _, l := range orphan {
			why := "orphaned: parent " + l.Parent + " not found"
			if err := control.Move(tx, l, loop.Failed, now, why, func(n *loop.Loop) { n.Reason = why }); err != nil {
				return err
			}
			changed = true
		}
		return nil
	})
	if changed {
		m.o.Notify()
	}
	return err
}

// ReadyAt is when a waiting loop became ready to run as far as its own
// record and its parent say: the latest of its creation, its runnable_at
// (a delayed run or a retry backoff), its last change (requeued, resumed)
// and its parent's finish. Dispatch latency is the time from ReadyAt to the
// start: it counts waiting for caps, the rate-limit backoff and the poll,
// not waiting that the loop asked for.
func ReadyAt(l loop.Loop, parentFinished time.Time) time.Time {
	t := l.CreatedAt
	for _, u := range []time.Time{l.RunnableAt, l.UpdatedAt, parentFinished} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// leaseFor is how long a lease lasts: the agent timeout plus validation and margin.
func (m *Manager) leaseFor(t string) time.Duration {
	ls := m.cfg().Loop(t)
	return time.Duration(ls.TimeoutSecs)*time.Second + 15*time.Minute
}

// leased is one loop moved to running under this manager's lease.
type leased struct {
	l      loop.Loop // the record as it now runs
	waited loop.Loop // the record as it waited (OnDispatch)
	ready  time.Time // when it became ready (OnDispatch)
	err    error     // not leased: why
	// profile is the agent profile the iteration runs on: the loop's own,
	// or a fallback while its own is limited.
	profile string
}

// leaseAll moves the loops ids to running under this manager's lease, all
// in one transaction: the starts of a tick share one durable commit (group
// commit) instead of one fsynced transaction each. A loop that cannot be
// leased (no longer pending) is reported in its entry and does not stop
// the others.
func (m *Manager) leaseAll(ids []string, now time.Time, agents *scheduler.Agents, limits map[string]ratelimit.State) []leased {
	if len(ids) == 0 {
		return nil
	}
	out := make([]leased, len(ids))
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		for i, id := range ids {
			out[i] = leased{}
			if err := m.lease(tx, id, now, agents, limits, &out[i], ""); err != nil {
				if !errors.Is(err, errNotPending) && !errors.Is(err, store.ErrNotFound) {
					return err // the store failed: nothing starts
				}
				out[i].err = err
			}
		}
		return nil
	})
	if err != nil {
		for i := range out {
			out[i] = leased{err: err}
		}
	}
	return out
}

// errNotPending: the loop changed since the decision.
var errNotPending = errors.New("not pending")

// lease moves one loop to running under this manager's lease in tx, or,
// when worker is set, under the lease of that worker (assignAll).
func (m *Manager) lease(tx *store.Tx, id string, now time.Time, agents *scheduler.Agents, limits map[string]ratelimit.State, ls *leased, worker string) error {
	cur, err := tx.Get(id)
	if err != nil {
		return err
	}
	if cur.Status != loop.Pending {
		return fmt.Errorf("loop %s is %s: %w", id, cur.Status, errNotPending)
	}
	var depsDone time.Time
	var depsNote string
	if len(cur.DependsOn) > 0 && (m.o.OnDispatch != nil || cur.StartedAt.IsZero()) {
		depsDone, depsNote = dependenciesAtStart(tx, cur)
	}
	if m.o.OnDispatch != nil {
		parentDone := depsDone
		if cur.Parent != "" {
			if p, err := tx.Get(cur.Parent); err == nil && p.FinishedAt.After(parentDone) {
				parentDone = p.FinishedAt
			}
		}
		ls.waited, ls.ready = cur, ReadyAt(cur, parentDone)
	}
	owner := m.o.Owner
	msg := fmt.Sprintf("iteration %d started", cur.Iteration)
	if cur.StartedAt.IsZero() {
		msg += depsNote // its first start: the journal says which dependencies it went on without
	}
	if worker != "" {
		owner = cluster.OwnerPrefix + worker
		msg += " on worker " + worker
	}
	lease := &loop.Lease{Owner: owner, ExpiresAt: now.Add(m.leaseFor(cur.Type))}
	// The profile the iteration runs on: the loop's own, or a fallback
	// while its own is limited — said in the journal, since nothing else
	// records which agent ran an iteration.
	ls.profile, _ = agents.Pick(&cur, limits, now)
	if own := agents.Of(&cur); ls.profile != own {
		msg += fmt.Sprintf(" on agent %s (agent %s is rate limited)", ls.profile, own)
	}
	if err := control.Move(tx, cur, loop.Running, now, msg, func(n *loop.Loop) {
		n.Lease = lease
		n.Progress = nil // the last run's report (MCP report_progress)
		if loop.Held(n.Reason) {
			n.Reason = "" // the hook or setup that held it runs again now
		}
		if m.o.Git == nil && worker == "" {
			// Known now: recorded with the start, not by a second
			// fsynced transaction before the agent may run (prepare).
			n.Workdir = m.svc.Paths.Workspace
		}
	}); err != nil {
		return err
	}
	ls.l, err = tx.Get(id)
	return err
}

// dependenciesAtStart reads the dependencies of l, about to start: when
// the last of them was done (for ReadyAt), and a note for the journal
// naming those that were cancelled, which count as done.
func dependenciesAtStart(tx *store.Tx, l loop.Loop) (done time.Time, note string) {
	var cancelled []string
	for _, id := range l.DependsOn {
		d, err := tx.Get(id)
		if err != nil {
			continue // gone: long done
		}
		t := d.SubtreeDoneAt
		if d.Status == loop.Cancelled {
			cancelled = append(cancelled, fmt.Sprintf("%s %q", d.ID, d.Title))
			if t.IsZero() {
				t = d.FinishedAt
			}
		}
		if t.After(done) {
			done = t
		}
	}
	if len(cancelled) > 0 {
		note = "; it depends on " + strings.Join(cancelled, ", ") + ", cancelled: counted as done"
	}
	return done, note
}

// launch runs the iteration of a loop leaseAll leased.
func (m *Manager) launch(ctx context.Context, ls leased, profile string, now time.Time) {
	l := ls.l
	id := l.ID
	m.o.Notify()
	if m.o.OnDispatch != nil && !m.clustered() { // a worker's scheduler reported it
		m.o.OnDispatch(ls.waited, max(now.Sub(ls.ready), 0))
	}
	// Only the manager cancels an iteration, after marking why (a user's
	// cancel, or stopping): were it tied to Run's ctx, an agent cancelled by
	// shutdown could report before Run notices the shutdown, and its loop
	// would be taken for cancelled by a user and left running.
	rctx, cancelCause := context.WithCancelCause(context.WithoutCancel(ctx))
	cancel := func() { cancelCause(nil) }
	a := &active{cancel: cancel, kill: cancelCause, iteration: l.Iteration, started: now, agent: profile}
	m.mu.Lock()
	m.active[id] = a
	m.mu.Unlock()
	if m.o.OnStart != nil {
		m.o.OnStart(id, time.Now())
	}
	m.log.Info("loop started", "loop", id, "type", l.Type, "iteration", l.Iteration, "agent", profile, "title", l.Title)
	go func() {
		job, err := m.prepare(rctx, a, l, profile)
		if err == nil {
			err = m.beforeRun(rctx, job)
		}
		var res runner.Result
		var sv saved
		var hook *hooks.Result
		if err == nil {
			res = m.o.Runner.Run(rctx, job)
			sv = m.save(rctx, a, job, res)
			res = m.afterSave(rctx, job, res, sv)
			hook = m.afterRun(rctx, job, res)
		}
		m.results <- result{id: id, job: job, res: res, err: err, git: sv, hook: hook}
	}()
}

// stopAgents cancels the in-flight iterations of ids.
func (m *Manager) stopAgents(ids []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if a := m.active[id]; a != nil {
			a.cancel()
		}
	}
}

// shutdown stops every agent, waits for their results and requeues their
// loops at the same iteration.
func (m *Manager) shutdown() error {
	m.mu.Lock()
	n := len(m.active)
	for _, a := range m.active {
		a.stopping = true
		a.cancel()
	}
	m.mu.Unlock()
	m.log.Info("stopping", "running", n)
	for range n {
		r := <-m.results
		m.finish(context.Background(), r)
	}
	<-m.mergesDone // its merge.validate is stopped; merging loops wait for the next daemon
	m.retryUnrecorded(m.now())
	if m.clustered() {
		m.requeueAssigned(m.now())
	}
	return nil
}

// ratePattern compiles a profile's rate-limit pattern (validated by config).
func ratePattern(pattern string) *regexp.Regexp {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil
	}
	return re
}

// rateLimitConfig is the shared backoff configuration.
func (m *Manager) rateLimitConfig() ratelimit.Config { return control.RateLimitConfig(m.cfg()) }

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// anyRecovering reports whether the decision saw a profile (or the whole
// daemon) in its rate-limit recovery ramp.
func anyRecovering(d control.Tick, now time.Time) bool {
	if d.RateLimit.Recovering(now) {
		return true
	}
	for _, st := range d.Limits {
		if st.Recovering(now) {
			return true
		}
	}
	return false
}
