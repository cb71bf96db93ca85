// Package cluster makes the daemons that share one etcd store workers of
// one queue (docs/several-machines.md). Each worker keeps one etcd session
// — a lease of Options.TTL it keeps alive — and holds with it:
//
//	<prefix>/workers/<name>   its WorkerInfo, created only if absent
//	<prefix>/election/…       its bid to be the scheduler (value: its name)
//	<prefix>/leases/<loop>    a LoopLease for every loop it runs
//	<prefix>/locks/git/<b>    git merge locks (Locker)
//
// When the worker dies its lease expires and every one of these keys goes:
// the scheduler recovers its loops, and another worker may be elected.
// A worker that loses its session — the lease expired or was revoked, or
// no keepalive was answered for 2/3 of the TTL, so it may expire any
// moment — calls Options.OnLost at once (its loops' agents stop, nothing
// is recorded under the old lease), then registers again with a new lease.
package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/store"
)

// WorkerInfo describes a worker: what it registered, and (when listed)
// whether it is the scheduler and how many loops it runs.
type WorkerInfo struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Home      string    `json:"home"`
	Workspace string    `json:"workspace"`
	Repo      string    `json:"repo,omitempty"`   // git top level, "" without git
	Remote    string    `json:"remote,omitempty"` // git.remote name, "" none
	MaxLoops  int       `json:"max_loops"`
	Labels    []string  `json:"labels,omitempty"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// filled in when listed:
	Scheduler bool `json:"scheduler"`
	Running   int  `json:"running"`
}

// LoopLease is the value of <prefix>/leases/<loop id>: the worker running
// the loop, the iteration, and the worker's etcd lease (hex) the key is
// attached to. It is the loop's lease: it disappears when the worker dies.
type LoopLease struct {
	Worker    string `json:"worker"`
	Iteration int    `json:"iteration"`
	Lease     string `json:"lease"`
	// Agent is the agent profile the scheduler picked for the iteration
	// (the loop's own, or a fallback while its own is rate limited).
	Agent string `json:"agent,omitempty"`
}

// Keys, relative to the store's prefix.
const (
	workersDir  = "workers/"
	leasesDir   = "leases/"
	electionDir = "election"
	gitLocksDir = "locks/git/"
)

// WorkerKey is the registration key of worker name.
func WorkerKey(name string) string { return workersDir + name }

// LeaseKey is the lease key of loop id.
func LeaseKey(id string) string { return leasesDir + id }

// LeaseHex is how a LoopLease names an etcd lease id.
func LeaseHex(id int64) string { return strconv.FormatInt(id, 16) }

// OwnerPrefix starts the loop.Lease.Owner of a loop the scheduler assigned
// to a worker: "worker <name>".
const OwnerPrefix = "worker "

// DefaultName is a worker's name when worker.name is not set: the host
// name and 6 hex digits of the sha256 of the home directory.
func DefaultName(host, home string) string {
	sum := sha256.Sum256([]byte(home))
	h := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, host)
	if h == "" || h[0] == '-' || h[0] == '.' {
		h = "host" + h
	}
	return fmt.Sprintf("%s-%s", h[:min(len(h), 57)], hex.EncodeToString(sum[:])[:6])
}

// ReadLease reads loop id's lease key in tx (the read is compared at
// commit); ok is false if there is none.
func ReadLease(tx *store.Tx, id string) (l LoopLease, lease int64, ok bool) {
	v, lid, ok := tx.Raw(LeaseKey(id))
	if !ok {
		return LoopLease{}, 0, false
	}
	if err := json.Unmarshal(v, &l); err != nil {
		return LoopLease{}, lid, true // damaged: held by nobody we know
	}
	return l, lid, true
}

// PutLease writes loop id's lease key in tx, attached to lease.
func PutLease(tx *store.Tx, id string, l LoopLease, lease int64) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return tx.PutRaw(LeaseKey(id), b, lease)
}

// registration is the value of workers/<name>: the WorkerInfo and the
// boot id of the machine it runs on. Two machines may share a host name
// and a home path (cloned from one image), and a pid means nothing on
// another machine: a registration is taken for a dead daemon of this home
// only when it was made on this machine since its last boot.
type registration struct {
	WorkerInfo
	Boot string `json:"boot,omitempty"`
}

// bootID identifies this machine until it reboots ("" where the kernel
// does not say).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// NameTakenError refuses a worker whose name a live worker holds.
type NameTakenError struct{ Other WorkerInfo }

func (e *NameTakenError) Error() string {
	o := e.Other
	return fmt.Sprintf("worker name %s is taken by a live worker: pid %d on host %s, home %s; stop that daemon or set another worker.name in loopr.yml",
		o.Name, o.PID, o.Host, o.Home)
}

// ErrNoRemote is wrapped by the refusal to share a store with a worker on
// another host or repository without git.remote.
var ErrNoRemote = errors.New("set git.remote")

// Options configure a Worker.
type Options struct {
	Store *store.Store // on etcd
	Info  WorkerInfo   // Name set; StartedAt and PID default to now and this process
	TTL   time.Duration
	Log   *slog.Logger
	// OnLost is called, on the worker's goroutine, as soon as the session
	// may be gone: stop every agent now and record nothing more.
	OnLost func(why string)
}

// Worker is this daemon's membership of the store's workers.
type Worker struct {
	o      Options
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu      sync.Mutex
	sess    *concurrency.Session // nil while lost
	lease   clientv3.LeaseID     // 0 while lost
	leader  bool
	changed chan struct{} // closed and replaced on every change of the above
	ka      <-chan *clientv3.LeaseKeepAliveResponse
	kaStop  context.CancelFunc

	lastAck atomic.Int64 // unix nanoseconds of the last keepalive answer
}

// Register makes this daemon a worker of the store: it checks that the
// name is free (a stale registration of a dead process of this home on
// this host is revoked) and, without git.remote, that every live worker
// is on this host in this repository; then it puts the registration under
// a new lease. Run keeps it alive.
func Register(ctx context.Context, o Options) (*Worker, error) {
	cli := o.Store.EtcdClient()
	if cli == nil {
		return nil, errors.New("cluster: workers need the etcd store (store.backend: etcd)")
	}
	if o.Info.Name == "" {
		return nil, errors.New("cluster: worker name required")
	}
	if o.TTL < time.Second {
		o.TTL = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.OnLost == nil {
		o.OnLost = func(string) {}
	}
	if o.Info.PID == 0 {
		o.Info.PID = os.Getpid()
	}
	if o.Info.StartedAt.IsZero() {
		o.Info.StartedAt = time.Now().UTC().Truncate(time.Second)
	}
	w := &Worker{o: o, cli: cli, prefix: o.Store.EtcdPrefix() + "/", log: o.Log, changed: make(chan struct{})}
	if err := w.register(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Name is the worker's name.
func (w *Worker) Name() string { return w.o.Info.Name }

// Info is what the worker registered.
func (w *Worker) Info() WorkerInfo { return w.o.Info }

// TTL is the worker's lease TTL.
func (w *Worker) TTL() time.Duration { return w.o.TTL }

// Lease is the id of the worker's current etcd lease, 0 while it has none
// (lost, registering again).
func (w *Worker) Lease() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int64(w.lease)
}

// BidKey is the key of this worker's bid in the scheduler election under
// its current lease, relative to the store's prefix ("" while it has no
// lease). It exists while the session does: a transaction that reads it
// is committed only by a worker whose session (and so leadership, if it
// leads) is still alive.
func (w *Worker) BidKey() string {
	l := w.Lease()
	if l == 0 {
		return ""
	}
	return electionDir + "/" + LeaseHex(l)
}

// Scheduler reports whether this worker is the elected scheduler now.
func (w *Worker) Scheduler() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leader
}

// Changed returns a channel closed at the next change of the lease or the
// leadership.
func (w *Worker) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *Worker) notifyLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *Worker) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	d := w.o.Store.EtcdRequestTimeout()
	if d <= 0 {
		d = 5 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

func (w *Worker) register(ctx context.Context) error {
	key := w.prefix + WorkerKey(w.o.Info.Name)
	for attempt := 0; ; attempt++ {
		live, err := w.list(ctx)
		if err != nil {
			return err
		}
		if err := w.checkPlaces(live); err != nil {
			return err
		}
		rctx, cancel := w.reqCtx(ctx)
		g, err := w.cli.Grant(rctx, int64((w.o.TTL+time.Second-1)/time.Second))
		cancel()
		if err != nil {
			return fmt.Errorf("cluster: register worker %s: %w", w.o.Info.Name, err)
		}
		info, _ := json.Marshal(registration{WorkerInfo: w.o.Info, Boot: bootID()})
		rctx, cancel = w.reqCtx(ctx)
		resp, err := w.cli.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(info), clientv3.WithLease(g.ID))).
			Else(clientv3.OpGet(key)).Commit()
		cancel()
		if err == nil && resp.Succeeded {
			return w.start(g.ID)
		}
		w.revoke(g.ID)
		if err != nil {
			return fmt.Errorf("cluster: register worker %s: %w", w.o.Info.Name, err)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // gone meanwhile
		}
		var reg registration
		_ = json.Unmarshal(kvs[0].Value, &reg)
		other := reg.WorkerInfo
		if attempt == 0 && reg.Boot == bootID() && w.stale(other) {
			// This home's daemon on this host died without its lease
			// running out yet: end its registration, leases and bid now.
			w.log.Warn("worker: ending the registration of a dead daemon of this home", "worker", other.Name, "pid", other.PID)
			w.revoke(clientv3.LeaseID(kvs[0].Lease))
			continue
		}
		if other.Name == "" {
			other.Name = w.o.Info.Name
		}
		return &NameTakenError{Other: other}
	}
}

// stale reports whether other, registered on this machine (same boot id),
// is a registration of this home on this host by a process that no longer
// runs.
func (w *Worker) stale(other WorkerInfo) bool {
	me := w.o.Info
	if other.Host != me.Host || other.Home != me.Home {
		return false
	}
	if other.PID == me.PID {
		return true // this process's own, from a session it lost
	}
	return other.PID <= 0 || syscall.Kill(other.PID, 0) == syscall.ESRCH
}

// checkPlaces refuses, without git.remote, a store shared with a live
// worker on another host or in another repository.
func (w *Worker) checkPlaces(live []WorkerInfo) error {
	me := w.o.Info
	if me.Remote != "" {
		return nil
	}
	for _, o := range live {
		if o.Name == me.Name {
			continue
		}
		if o.Host != me.Host || place(o) != place(me) {
			return fmt.Errorf("worker %s: worker %s shares this store from host %s, repository %s (this one: host %s, repository %s); workers on different machines or repositories need a shared git remote: %w in loopr.yml (docs/several-machines.md)",
				me.Name, o.Name, o.Host, place(o), me.Host, place(me), ErrNoRemote)
		}
	}
	return nil
}

// place is where a worker's loops change code: its repository, or its
// workspace without git.
func place(i WorkerInfo) string {
	if i.Repo != "" {
		return i.Repo
	}
	return i.Workspace
}

// start makes lease the worker's session: keepalive, election bid.
func (w *Worker) start(lease clientv3.LeaseID) error {
	sess, err := concurrency.NewSession(w.cli, concurrency.WithLease(lease))
	if err != nil {
		w.revoke(lease)
		return fmt.Errorf("cluster: session: %w", err)
	}
	kctx, kstop := context.WithCancel(context.Background())
	ka, err := w.cli.KeepAlive(kctx, lease)
	if err != nil {
		kstop()
		sess.Orphan()
		w.revoke(lease)
		return fmt.Errorf("cluster: keepalive: %w", err)
	}
	w.lastAck.Store(time.Now().UnixNano())
	w.mu.Lock()
	w.sess, w.lease, w.ka, w.kaStop = sess, lease, ka, kstop
	w.notifyLocked()
	w.mu.Unlock()
	w.log.Info("worker registered", "worker", w.o.Info.Name, "lease", LeaseHex(int64(lease)), "ttl", w.o.TTL)
	return nil
}

func (w *Worker) revoke(lease clientv3.LeaseID) {
	if lease == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(w.o.TTL/3+time.Second, 2*time.Second))
	defer cancel()
	_, _ = w.cli.Revoke(ctx, lease)
}

// campaignOnce is one campaign (a test makes it fail).
var campaignOnce = func(ctx context.Context, e *concurrency.Election, val string) error {
	return e.Campaign(ctx, val)
}

// Run keeps the worker's session alive and campaigns to be the scheduler
// until ctx ends; then it resigns and revokes its lease (its registration,
// bid and loop leases go at once). A lost session is reported to OnLost
// and replaced by a new one.
func (w *Worker) Run(ctx context.Context) error {
	tick := time.NewTicker(max(w.o.TTL/10, 50*time.Millisecond))
	defer tick.Stop()
	elected := make(chan clientv3.LeaseID, 1)
	var campaignStop context.CancelFunc
	campaign := func() {
		w.mu.Lock()
		sess, lease := w.sess, w.lease
		w.mu.Unlock()
		cctx, cancel := context.WithCancel(ctx)
		campaignStop = cancel
		go func() {
			e := concurrency.NewElection(sess, w.prefix+electionDir)
			// A campaign that fails other than by being stopped (a watch
			// error while waiting) leaves its bid in place: campaign again,
			// or the bid may become the oldest with no one scheduling.
			for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, max(w.o.TTL/4, time.Second)) {
				err := campaignOnce(cctx, e, w.o.Info.Name)
				if err == nil {
					break
				}
				if cctx.Err() != nil {
					return
				}
				w.log.Warn("worker: campaign to be the scheduler failed; trying again", "worker", w.o.Info.Name, "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-cctx.Done():
					return
				}
			}
			select {
			case elected <- lease:
			case <-cctx.Done():
			}
		}()
	}
	campaign()
	for {
		w.mu.Lock()
		ka := w.ka
		w.mu.Unlock()
		var why string
		select {
		case <-ctx.Done():
			campaignStop()
			w.stop()
			return nil
		case lease := <-elected:
			w.mu.Lock()
			if lease == w.lease && lease != 0 {
				w.leader = true
				w.notifyLocked()
				w.log.Info("worker: elected scheduler", "worker", w.o.Info.Name)
			}
			w.mu.Unlock()
			continue
		case r, ok := <-ka:
			if ok && r != nil {
				w.lastAck.Store(time.Now().UnixNano())
				continue
			}
			why = "its etcd lease expired or was revoked"
		case <-tick.C:
			silent := time.Since(time.Unix(0, w.lastAck.Load()))
			if silent <= w.o.TTL*2/3 {
				continue
			}
			why = fmt.Sprintf("etcd answered no keepalive for %s (2/3 of the lease TTL %s)", silent.Round(time.Millisecond), w.o.TTL)
		}
		campaignStop()
		w.lost(why)
		if !w.reregister(ctx) {
			w.stop()
			return nil
		}
		campaign()
	}
}

// lost drops the session: OnLost first (fencing), then the lease.
func (w *Worker) lost(why string) {
	w.log.Error("worker: lost its etcd session: stopping its agents, recording nothing", "worker", w.o.Info.Name, "why", why)
	w.mu.Lock()
	sess, lease, kstop := w.sess, w.lease, w.kaStop
	w.sess, w.lease, w.leader, w.ka, w.kaStop = nil, 0, false, nil, nil
	w.notifyLocked()
	w.mu.Unlock()
	w.o.OnLost(why)
	if kstop != nil {
		kstop()
	}
	if sess != nil {
		sess.Orphan()
	}
	w.revoke(lease) // if etcd is reachable: the old keys go at once
}

// reregister registers again until it succeeds (true) or ctx ends.
func (w *Worker) reregister(ctx context.Context) bool {
	wait := 200 * time.Millisecond
	for {
		err := w.register(ctx)
		if err == nil {
			return true
		}
		w.log.Warn("worker: register again", "worker", w.o.Info.Name, "err", err, "retry in", wait)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait + time.Duration(rand.Int64N(int64(wait)))):
		}
		wait = min(wait*2, max(w.o.TTL/3, time.Second))
	}
}

// stop ends the session cleanly: resign, revoke.
func (w *Worker) stop() {
	w.mu.Lock()
	sess, lease, kstop := w.sess, w.lease, w.kaStop
	w.sess, w.lease, w.leader, w.ka, w.kaStop = nil, 0, false, nil, nil
	w.notifyLocked()
	w.mu.Unlock()
	if kstop != nil {
		kstop()
	}
	if sess != nil {
		sess.Orphan()
	}
	w.revoke(lease) // the registration, the bid (resigned) and the loop leases go at once
}

// Locker returns the etcd locks shared by every worker of the store
// (implements gitflow.Locker).
func (w *Worker) Locker() *Locker { return &Locker{w: w} }

// Locker takes git locks on <prefix>/locks/git/<name>, held with the
// worker's session: a worker that dies releases them.
type Locker struct{ w *Worker }

// Lock takes the lock name, waiting for it until ctx ends.
func (l *Locker) Lock(ctx context.Context, name string) (unlock func(), err error) {
	l.w.mu.Lock()
	sess := l.w.sess
	l.w.mu.Unlock()
	if sess == nil {
		return nil, fmt.Errorf("lock %s: worker %s has no etcd session (registering again)", name, l.w.o.Info.Name)
	}
	m := concurrency.NewMutex(sess, l.w.prefix+gitLocksDir+name)
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return func() {
		uctx, cancel := l.w.reqCtx(context.Background())
		defer cancel()
		_ = m.Unlock(uctx)
	}, nil
}

// Workers lists the live workers of the store, by name, with the
// scheduler marked and each one's running loops counted from the lease
// keys; scheduler is the scheduler's name, "" if none is elected.
func Workers(ctx context.Context, s *store.Store) (workers []WorkerInfo, scheduler string, err error) {
	cli := s.EtcdClient()
	if cli == nil {
		return nil, "", nil
	}
	w := &Worker{o: Options{Store: s}, cli: cli, prefix: s.EtcdPrefix() + "/"}
	workers, err = w.list(ctx)
	if err != nil {
		return nil, "", err
	}
	rctx, cancel := w.reqCtx(ctx)
	defer cancel()
	resp, err := cli.Txn(rctx).Then(
		clientv3.OpGet(w.prefix+electionDir+"/", clientv3.WithFirstCreate()...),
		clientv3.OpGet(w.prefix+leasesDir, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, "", fmt.Errorf("cluster: list workers: %w", err)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		scheduler = string(kvs[0].Value)
	}
	running := map[string]int{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var l LoopLease
		if json.Unmarshal(kv.Value, &l) == nil {
			running[l.Worker]++
		}
	}
	for i := range workers {
		workers[i].Scheduler = workers[i].Name == scheduler
		workers[i].Running = running[workers[i].Name]
	}
	return workers, scheduler, nil
}

// Live is a live worker as the scheduler sees it: its registration, with
// Running counted from the lease keys, and its etcd lease.
type Live struct {
	Info  WorkerInfo
	Lease int64
}

// Live lists the live workers with their leases, and every loop lease key
// (loop id → its LoopLease), read at one revision.
func (w *Worker) Live(ctx context.Context) ([]Live, map[string]LoopLease, error) {
	rctx, cancel := w.reqCtx(ctx)
	defer cancel()
	resp, err := w.cli.Txn(rctx).Then(
		clientv3.OpGet(w.prefix+workersDir, clientv3.WithPrefix()),
		clientv3.OpGet(w.prefix+leasesDir, clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: list workers: %w", err)
	}
	holders := map[string]LoopLease{}
	running := map[string]int{}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var l LoopLease
		if json.Unmarshal(kv.Value, &l) == nil {
			holders[strings.TrimPrefix(string(kv.Key), w.prefix+leasesDir)] = l
			running[l.Worker]++
		}
	}
	var out []Live
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var i WorkerInfo
		if json.Unmarshal(kv.Value, &i) != nil {
			continue
		}
		i.Name = strings.TrimPrefix(string(kv.Key), w.prefix+workersDir)
		i.Running = running[i.Name]
		out = append(out, Live{Info: i, Lease: kv.Lease})
	}
	slices.SortFunc(out, func(a, b Live) int { return strings.Compare(a.Info.Name, b.Info.Name) })
	return out, holders, nil
}

// Status is the store's workers as `loopr status` shows them; nil on the
// bbolt file. self is this daemon's worker name ("" for none).
func Status(ctx context.Context, s *store.Store, self string, ttl time.Duration) (*api.Cluster, error) {
	if s.EtcdClient() == nil {
		return nil, nil
	}
	ws, sched, err := Workers(ctx, s)
	if err != nil {
		return nil, err
	}
	out := &api.Cluster{Worker: self, Scheduler: sched, LeaseTTLSecs: int(ttl / time.Second), Workers: make([]api.Worker, 0, len(ws))}
	for _, w := range ws {
		out.Workers = append(out.Workers, api.Worker(w))
	}
	return out, nil
}

// list reads the registrations of the live workers, by name.
func (w *Worker) list(ctx context.Context) ([]WorkerInfo, error) {
	rctx, cancel := w.reqCtx(ctx)
	defer cancel()
	resp, err := w.cli.Get(rctx, w.prefix+workersDir, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: list workers: %w", err)
	}
	out := make([]WorkerInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var i WorkerInfo
		if json.Unmarshal(kv.Value, &i) != nil {
			continue
		}
		i.Name = strings.TrimPrefix(string(kv.Key), w.prefix+workersDir)
		out = append(out, i)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
