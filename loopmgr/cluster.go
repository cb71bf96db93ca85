package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// Several workers on one etcd store (Options.Cluster set).
//
// Every Manager is a worker: it runs the loops assigned to it. The one
// whose worker is the elected scheduler also recovers the loops of dead
// workers, sweeps, decides, and assigns each loop it starts to a worker
// with free capacity, in one transaction per tick that moves the loop
// pending → running under Lease{Owner: "worker <name>"} and puts its
// leases/<id> key with that worker's etcd lease (the transaction reads the
// worker's registration, so a worker that died meanwhile fails the compare
// and the tick decides again).
//
// A worker learns of its assignments from its store follower (an etcd
// watch), and of a cancel or pause made on any daemon the same way: a
// loop it runs that is no longer running under it has its agent stopped.
// Every transaction that records an outcome reads the loop's leases key
// and proceeds only if it still holds this worker's current lease and the
// iteration (ours); else nothing is recorded (store.ErrFenced). The key is
// deleted in the transaction that moves the loop out of running.

// clustered reports whether the manager is a worker of several.
func (m *Manager) clustered() bool { return m.o.Cluster != nil }

// recheckLost is how often the scheduler looks for loops of dead workers
// at most (it also looks on every tick a worker's change woke).
const recheckLost = 500 * time.Millisecond

// errNotScheduler: this worker's session (and bid) is gone.
var errNotScheduler = errors.New("this worker is no longer the scheduler")

// errNoWorker: no live worker has a free slot with the loop's labels.
var errNoWorker = errors.New("no worker with a free slot")

// follow makes the store's follower tell the manager of every change to
// the records: its assignments, and changes to the loops it runs.
func (m *Manager) follow() error {
	m.fmu.Lock()
	m.seen = map[string]store.Change{}
	m.fmu.Unlock()
	return m.svc.Store.Follow(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Running, func(l loop.Loop) bool {
			m.noteChange(store.Change{ID: l.ID, Loop: l})
			return true
		})
	}, func(c store.Commit) {
		for _, ch := range c.Changes {
			m.noteChange(ch)
			if !ch.Deleted && ch.Loop.Status == loop.Merging {
				m.wakeMerges() // passed on any worker: any worker's queue may land it
			}
		}
		m.Wake()
		m.o.Notify() // event streams: other daemons' commits too
	})
}

func (m *Manager) noteChange(ch store.Change) {
	m.fmu.Lock()
	m.seen[ch.ID] = ch
	m.fmu.Unlock()
}

// mine reports whether l runs under this worker.
func (m *Manager) mine(l loop.Loop) bool {
	return l.Status == loop.Running && l.Lease != nil && l.Lease.Owner == m.o.Owner
}

// workerTick stops the agents of loops that are no longer this worker's,
// and starts the loops assigned to it.
func (m *Manager) workerTick(ctx context.Context, now time.Time) {
	m.fmu.Lock()
	seen := m.seen
	m.seen = map[string]store.Change{}
	m.fmu.Unlock()
	var stop, kill []string
	for id, ch := range seen {
		mine := !ch.Deleted && m.mine(ch.Loop)
		m.mu.Lock()
		a := m.active[id]
		m.mu.Unlock()
		if a != nil {
			switch {
			case ch.Loop.Iteration != a.iteration || ch.Loop.Status == loop.Running && !mine:
				// Recovered (this worker's lease was lost) or given to
				// another: it may run there any moment, so no grace.
				kill = append(kill, id)
			case !mine:
				stop = append(stop, id) // cancelled, paused: stop the agent
			}
			if mine && ch.Loop.Iteration != a.iteration {
				// Given back to this worker at another iteration while
				// the old agent stops: launched once its result is in.
				m.toLaunch[id] = ch.Loop
			} else {
				delete(m.toLaunch, id)
			}
			continue
		}
		if mine {
			m.toLaunch[id] = ch.Loop
		} else {
			delete(m.toLaunch, id)
		}
	}
	if len(stop) > 0 {
		m.log.Info("stopping agents of loops changed on another daemon", "loops", strings.Join(stop, ","))
		m.stopAgents(stop)
	}
	if len(kill) > 0 {
		m.log.Warn("killing agents of loops this worker no longer holds", "loops", strings.Join(kill, ","))
		m.mu.Lock()
		for _, id := range kill {
			if a := m.active[id]; a != nil && a.kill != nil {
				a.kill(runner.ErrKill)
			} else if a != nil {
				a.cancel()
			}
		}
		m.mu.Unlock()
	}
	lease := m.o.Cluster.Lease()
	if lease == 0 || ctx.Err() != nil || len(m.toLaunch) == 0 {
		return
	}
	agents := control.Policy(m.cfg()).Agents
	for _, id := range slices.Sorted(mapKeys(m.toLaunch)) {
		// The record as the follower delivered it: a later change (a
		// cancel) comes through the follower too, and stops the agent.
		m.mu.Lock()
		busy := m.active[id] != nil
		m.mu.Unlock()
		if busy {
			continue // an older iteration's agent is stopping: after its result
		}
		cur := m.toLaunch[id]
		delete(m.toLaunch, id)
		var ll cluster.LoopLease
		var held bool
		err := m.svc.Store.View(func(tx *store.Tx) error {
			var lid int64
			ll, lid, held = cluster.ReadLease(tx, id)
			held = held && lid == lease && ll.Worker == m.o.Cluster.Name() && ll.Lease == cluster.LeaseHex(lease) && ll.Iteration == cur.Iteration
			return nil
		})
		if err != nil {
			// Not known now (etcd slow or away): checked again on the
			// next tick; dropped, the loop would stay assigned to this
			// live worker and never run.
			m.log.Warn("read the lease of a loop assigned to this worker; will check again", "loop", id, "err", err)
			m.toLaunch[id] = cur
			continue
		}
		if !m.mine(cur) || !held {
			// Not (or no longer) ours under this session: a loop assigned
			// to a session this worker lost is the scheduler's to recover.
			continue
		}
		profile := ll.Agent
		if profile == "" {
			profile = agents.Of(&cur)
		}
		m.launch(ctx, leased{l: cur, waited: cur, ready: now}, profile, now)
	}
}

func mapKeys[K comparable, V any](mp map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range mp {
			if !yield(k) {
				return
			}
		}
	}
}

// dropLeaseKey deletes loop id's lease key in tx if the loop no longer
// runs: the key goes with the move out of running.
func dropLeaseKey(tx *store.Tx, id string) error {
	if cur, err := tx.Get(id); err == nil && cur.Status != loop.Running {
		return tx.DeleteRaw(cluster.LeaseKey(id))
	}
	return nil
}

// Fenced stops every agent of this worker at once: its etcd session may be
// gone, so another worker may run its loops; nothing of theirs is
// recorded. It may be called from any goroutine (cluster.Options.OnLost).
func (m *Manager) Fenced(why string) {
	m.mu.Lock()
	n := 0
	for _, a := range m.active {
		a.fenced = true
		if a.kill != nil {
			a.kill(runner.ErrKill) // no grace: another worker may run the loop soon
		} else {
			a.cancel()
		}
		n++
	}
	m.mu.Unlock()
	if n > 0 {
		m.log.Error("fenced: stopped every agent of this worker, recording nothing", "agents", n, "why", why)
	}
	m.Wake()
}

// holds checks in tx that loop id's leases key holds this worker's current
// lease at iteration: the fence of every write that records an outcome.
func (m *Manager) holds(tx *store.Tx, id string, iteration int) error {
	lease := m.o.Cluster.Lease()
	ll, lid, ok := cluster.ReadLease(tx, id)
	if lease == 0 || !ok || lid != lease || ll.Worker != m.o.Cluster.Name() || ll.Lease != cluster.LeaseHex(lease) || ll.Iteration != iteration {
		return fmt.Errorf("loop %s iteration %d: %w", id, iteration, store.ErrFenced)
	}
	return nil
}

// leaseFence is Options.Fence on a worker: the loop's lease is still ours.
func (m *Manager) leaseFence(_ context.Context, id string, iteration int) error {
	return m.svc.Store.View(func(tx *store.Tx) error { return m.holds(tx, id, iteration) })
}

// release deletes loop id's leases key if it still names this worker but
// the loop no longer runs under it (a user's cancel on another daemon).
func (m *Manager) release(id string) {
	lease := m.o.Cluster.Lease()
	if lease == 0 {
		return
	}
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		ll, lid, ok := cluster.ReadLease(tx, id)
		if !ok || lid != lease || ll.Worker != m.o.Cluster.Name() {
			return nil
		}
		cur, err := tx.Get(id)
		if err == nil && m.mine(cur) && cur.Iteration == ll.Iteration {
			return nil // still ours: recorded by the outcome's transaction
		}
		return tx.DeleteRaw(cluster.LeaseKey(id))
	})
	if err != nil {
		m.log.Warn("release loop lease", "loop", id, "err", err)
	}
}

// assignAll is leaseAll on a worker that is the scheduler: each loop goes
// to a live worker with a free slot and the labels its type asks for, all
// in one transaction.
func (m *Manager) assignAll(ctx context.Context, ids []string, now time.Time, agents *scheduler.Agents, limits map[string]ratelimit.State) []leased {
	out := make([]leased, len(ids))
	if len(ids) == 0 {
		return out
	}
	live, err := m.live, m.liveErr
	if live == nil && err == nil {
		live, _, err = m.o.Cluster.Live(ctx)
	}
	if err != nil {
		for i := range out {
			out[i] = leased{err: err}
		}
		return out
	}
	bid := m.o.Cluster.BidKey()
	err = m.svc.Store.Update(func(tx *store.Tx) error {
		// Only while this worker's session lives: a scheduler that lost it
		// (another may be elected already) assigns nothing.
		if _, _, ok := tx.Raw(bid); bid == "" || !ok {
			return fmt.Errorf("assign: %w", errNotScheduler)
		}
		free := make(map[string]int, len(live))
		gone := map[string]bool{}
		for _, w := range live {
			free[w.Info.Name] = w.Info.MaxLoops - w.Info.Running
		}
		for i, id := range ids {
			out[i] = leased{}
			cur, err := tx.Get(id)
			if err != nil {
				out[i].err = err
				continue
			}
			w, ok := pickWorker(live, free, gone, m.cfg().Loop(cur.Type).WorkerLabels)
			for ok {
				// Read in the transaction: a worker that died since the
				// listing fails the commit's compare, and the fn runs again.
				if _, lid, reg := tx.Raw(cluster.WorkerKey(w.Info.Name)); reg && lid == w.Lease {
					break
				}
				gone[w.Info.Name] = true
				w, ok = pickWorker(live, free, gone, m.cfg().Loop(cur.Type).WorkerLabels)
			}
			if !ok {
				out[i].err = fmt.Errorf("loop %s: %w", id, errNoWorker)
				continue
			}
			if err := m.lease(tx, id, now, agents, limits, &out[i], w.Info.Name); err != nil {
				if !errors.Is(err, errNotPending) && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				out[i].err = err
				continue
			}
			ll := cluster.LoopLease{Worker: w.Info.Name, Iteration: out[i].l.Iteration, Lease: cluster.LeaseHex(w.Lease), Agent: out[i].profile}
			if err := cluster.PutLease(tx, id, ll, w.Lease); err != nil {
				return err
			}
			free[w.Info.Name]--
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

// pickWorker picks the live worker with the most free slots that has every
// label, ties by name (live is sorted by name).
func pickWorker(live []cluster.Live, free map[string]int, gone map[string]bool, labels []string) (cluster.Live, bool) {
	best, found := cluster.Live{}, false
	for _, w := range live {
		n := w.Info.Name
		if gone[n] || free[n] <= 0 || !hasLabels(w.Info.Labels, labels) {
			continue
		}
		if !found || free[n] > free[best.Info.Name] {
			best, found = w, true
		}
	}
	return best, found
}

func hasLabels(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// recoverLost, on the scheduler, puts the running loops whose lease is
// gone — their worker died or was cut off — back to pending with one
// attempt charged, as crash recovery does.
func (m *Manager) recoverLost(ctx context.Context, now time.Time) {
	if now.Sub(m.lastLost) < recheckLost && !m.lastLost.IsZero() {
		return
	}
	m.lastLost = now
	var running []loop.Loop
	err := m.svc.Store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Running, func(l loop.Loop) bool { running = append(running, l); return true })
	})
	if err != nil || len(running) == 0 {
		return
	}
	live, holders, err := m.o.Cluster.Live(ctx)
	if err != nil {
		m.log.Warn("look for loops of lost workers", "err", err)
		return
	}
	leases := map[string]int64{}
	for _, w := range live {
		leases[w.Info.Name] = w.Lease
	}
	n := 0
	for _, l := range running {
		if ll, ok := holders[l.ID]; ok && leases[ll.Worker] != 0 && ll.Lease == cluster.LeaseHex(leases[ll.Worker]) {
			continue
		}
		// Maybe assigned after the listing: decide on one snapshot.
		lost := ""
		err := m.svc.Store.Update(func(tx *store.Tx) error {
			lost = ""
			cur, err := tx.Get(l.ID)
			if err != nil || cur.Status != loop.Running {
				return err
			}
			ll, lid, ok := cluster.ReadLease(tx, l.ID)
			if ok {
				if _, wl, reg := tx.Raw(cluster.WorkerKey(ll.Worker)); reg && wl == lid {
					return nil // alive
				}
			}
			owner := "?"
			if cur.Lease != nil {
				owner = cur.Lease.Owner
			}
			reason := fmt.Sprintf("lease expired: the daemon stopped unexpectedly during iteration %d", cur.Iteration)
			if name, ok := strings.CutPrefix(owner, cluster.OwnerPrefix); ok {
				reason = fmt.Sprintf("worker %s was lost; iteration %d charged", name, cur.Iteration)
			}
			lost = owner
			if ok {
				if err := tx.DeleteRaw(cluster.LeaseKey(l.ID)); err != nil {
					return err
				}
			}
			return m.failLoop(tx, cur, reason, "The previous attempt was interrupted (its worker was lost); start again from the current state of the branch.", now)
		})
		if err != nil {
			m.log.Error("recover a loop of a lost worker", "loop", l.ID, "err", err)
			continue
		}
		if lost != "" {
			n++
			m.log.Warn("recovered a loop of a lost worker", "loop", l.ID, "owner", lost, "iteration", l.Iteration)
		}
	}
	if n > 0 {
		m.o.Notify()
	}
}

// requeueAssigned, on shutdown, puts the loops assigned to this worker
// that it had not started back to pending without cost.
func (m *Manager) requeueAssigned(now time.Time) {
	m.workerTick(canceledCtx(), now) // collect what the follower saw last
	var ids []string
	err := m.svc.Store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Running, func(l loop.Loop) bool {
			if m.mine(l) {
				ids = append(ids, l.ID)
			}
			return true
		})
	})
	if err != nil {
		m.log.Warn("requeue loops assigned to this worker", "err", err)
		return
	}
	for _, id := range ids {
		m.mu.Lock()
		a := m.active[id]
		m.mu.Unlock()
		if a != nil {
			continue
		}
		var it int
		_ = m.svc.Store.View(func(tx *store.Tx) error {
			l, err := tx.Get(id)
			it = l.Iteration
			return err
		})
		if err := m.requeue(id, it, now, "worker stopping: requeued at the same iteration"); err != nil {
			m.log.Warn("requeue a loop assigned to this worker", "loop", id, "err", err)
		}
	}
}

func canceledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// place, on the scheduler before it decides, lists the live workers (kept
// for the assignment) and holds the types no live worker can take now:
// those whose worker_labels no live worker has, or whose every worker
// with them is full. Without the hold such loops, chosen first by their
// priority, would fail assignment tick after tick and keep the global
// slots from loops an idle worker could run.
func (m *Manager) place(ctx context.Context) {
	m.live, _, m.liveErr = m.o.Cluster.Live(ctx)
	if m.liveErr != nil {
		return // the assignment fails with the error; holds kept as they were
	}
	c := m.cfg()
	m.svc.SetPlacement(placementHolds(c.Types(), func(t string) []string { return c.Loop(t).WorkerLabels }, m.live))
}

// placementHolds is place's rule: the hold text per type (nil: none).
func placementHolds(types []string, labelsOf func(string) []string, live []cluster.Live) map[string]string {
	var holds map[string]string
	for _, t := range types {
		want := labelsOf(t)
		if len(want) == 0 {
			continue // any worker takes it; when all are full nothing could run anyway
		}
		capable, slots, used := 0, 0, 0
		for _, w := range live {
			if hasLabels(w.Info.Labels, want) {
				capable++
				slots += w.Info.MaxLoops
				used += min(w.Info.Running, w.Info.MaxLoops)
			}
		}
		labels := "[" + strings.Join(want, ", ") + "]"
		var why string
		switch {
		case capable == 0:
			why = fmt.Sprintf("no live worker has the labels %s its type asks for (worker_labels): start a worker with worker.labels %s, or change the type's worker_labels", labels, labels)
		case used >= slots:
			why = fmt.Sprintf("every live worker with the labels %s is busy (%d of %d slots on %d worker(s)); it starts when one has a free slot", labels, used, slots, capable)
		default:
			continue
		}
		if holds == nil {
			holds = map[string]string{}
		}
		holds[t] = why
	}
	return holds
}
