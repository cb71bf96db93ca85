package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// ledger is what the scripted agents of every worker share: who runs
// which loop now (an overlap is an error), and each loop's passes.
type ledger struct {
	mu      sync.Mutex
	running map[string]string // loop → worker running it now
	passes  map[string][]string
	overlap []string
	block   map[string]bool  // workers whose agents hang until stopped
	dead    map[string]bool  // workers the test killed: a pass of theirs may be lost with them
	causes  map[string]error // loop → why its blocked agent was stopped
}

func (lg *ledger) run(ctx context.Context, j runner.Job) runner.Result {
	w := ""
	for _, e := range j.Settings.Env {
		if v, ok := strings.CutPrefix(e, "LOOPR_WORKER="); ok {
			w = v
		}
	}
	lg.mu.Lock()
	if other, ok := lg.running[j.Loop.ID]; ok {
		lg.overlap = append(lg.overlap, fmt.Sprintf("%s on %s and %s", j.Loop.ID, other, w))
	}
	lg.running[j.Loop.ID] = w
	block := lg.block[w]
	lg.mu.Unlock()
	defer func() {
		lg.mu.Lock()
		delete(lg.running, j.Loop.ID)
		lg.mu.Unlock()
	}()
	if block {
		<-ctx.Done()
		lg.mu.Lock()
		if lg.causes == nil {
			lg.causes = map[string]error{}
		}
		lg.causes[j.Loop.ID] = context.Cause(ctx)
		lg.mu.Unlock()
		return runner.Result{Outcome: runner.Cancelled}
	}
	select {
	case <-time.After(30 * time.Millisecond):
	case <-ctx.Done():
		return runner.Result{Outcome: runner.Cancelled}
	}
	lg.mu.Lock()
	lg.passes[j.Loop.ID] = append(lg.passes[j.Loop.ID], w)
	lg.mu.Unlock()
	return runner.Result{Outcome: runner.Passed}
}

// node is one daemon of the cluster: its own store client, home, worker
// and manager.
type node struct {
	name    string
	st      *store.Store
	svc     *control.Service
	w       *cluster.Worker
	mgr     *Manager
	stopW   context.CancelFunc
	stopM   context.CancelFunc
	done    chan struct{}
	stopped bool
}

func startNode(t *testing.T, srv *etcdtest.Server, prefix, name string, ttl time.Duration, lg *ledger, mods ...func(*config.Config)) *node {
	t.Helper()
	st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(2 * time.Second)}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	cfg.Retry.BackoffBaseSecs, cfg.Retry.BackoffMaxSecs = 1, 1
	cfg.Concurrency.MaxLoops = 6
	for _, mod := range mods {
		mod(cfg)
	}
	paths := workspace.Paths{Workspace: "/ws", Home: home}
	svc := control.New(st, paths, func() *config.Config { return cfg }, time.Now)
	n := &node{name: name, st: st, svc: svc, done: make(chan struct{})}
	n.w, err = cluster.Register(context.Background(), cluster.Options{Store: st, TTL: ttl,
		Info:   cluster.WorkerInfo{Name: name, Host: "h", Home: home, Workspace: "/ws", MaxLoops: 2},
		OnLost: func(why string) { n.mgr.Fenced(why) }})
	if err != nil {
		t.Fatal(err)
	}
	n.mgr = New(Options{Service: svc, Runner: &fakeRunner{fn: lg.run}, Cluster: n.w})
	wctx, stopW := context.WithCancel(context.Background())
	mctx, stopM := context.WithCancel(context.Background())
	n.stopW, n.stopM = stopW, stopM
	wdone := make(chan struct{})
	go func() { _ = n.w.Run(wctx); close(wdone) }()
	go func() {
		if err := n.mgr.Run(mctx); err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
		stopW() // a clean stop: the manager first, then the session
		<-wdone
		close(n.done)
	}()
	t.Cleanup(func() { n.stop(); st.Close() })
	return n
}

func (n *node) stop() {
	if !n.stopped {
		n.stopped = true
		n.stopM()
		<-n.done
	}
}

// die ends n as kill -9 would, as far as etcd can tell: its client goes
// away without revoking anything, so its lease runs out after the TTL.
func (n *node) die() {
	n.st.Close()
	n.stop()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if took := time.Since(start); took > testslack.Scale(d) {
			t.Fatalf("%s: not within %s (the limit %s, scaled by the load: see internal/testslack)", what, took.Round(time.Millisecond), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestClusterWorkers runs three workers (separate stores, homes and
// managers on one real etcd) on one queue: every loop completes exactly
// once, never on two workers at once; a worker that dies has its loop
// recovered by the scheduler with one attempt charged; a scheduler that
// dies is replaced within 2× the lease TTL and the queue goes on.
func TestClusterWorkers(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	prefix := "/loopr/clustertest"
	ttl := 2 * time.Second
	lg := &ledger{running: map[string]string{}, passes: map[string][]string{}, block: map[string]bool{"c": true}, dead: map[string]bool{}}
	nodes := map[string]*node{}
	for _, n := range []string{"a", "b", "c"} {
		nodes[n] = startNode(t, srv, prefix, n, ttl, lg)
	}
	scheduler := func() string {
		for n, nd := range nodes {
			if !nd.stopped && nd.w.Scheduler() {
				return n
			}
		}
		return ""
	}
	waitUntil(t, 5*time.Second, "a scheduler elected", func() bool { return scheduler() != "" })
	if s := scheduler(); s == "c" {
		// c's agents hang (it is the one to die first): make another the scheduler.
		nodes["c"].stop()
		nodes["c"] = startNode(t, srv, prefix, "c", ttl, lg)
		waitUntil(t, 3*ttl, "a scheduler other than c", func() bool { s := scheduler(); return s != "" && s != "c" })
	}
	svc := nodes["a"].svc
	var ids []string
	for i := range 24 {
		l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: fmt.Sprintf("task %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	for _, nd := range nodes {
		nd.mgr.Wake()
	}
	// c gets loops (it has free slots) and hangs on them: then it dies.
	waitUntil(t, 10*time.Second, "worker c running a loop", func() bool {
		lg.mu.Lock()
		defer lg.mu.Unlock()
		return slices.Contains(mapValues(lg.running), "c")
	})
	var onC []string
	_ = svc.Store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Running, func(l loop.Loop) bool {
			if l.Lease != nil && l.Lease.Owner == "worker c" {
				onC = append(onC, l.ID)
			}
			return true
		})
	})
	if len(onC) == 0 {
		t.Fatal("no loop recorded running on worker c")
	}
	lg.mu.Lock()
	lg.block["c"] = false
	lg.mu.Unlock()
	died := time.Now()
	lg.mu.Lock()
	lg.dead["c"] = true
	lg.mu.Unlock()
	nodes["c"].die()
	t.Logf("worker c's store closed and manager stopped in %s", time.Since(died))
	waitUntil(t, 3*ttl, "the loops of dead worker c back to pending", func() bool {
		for _, id := range onC {
			l, err := svc.Get(id)
			if err != nil || l.Status == loop.Running {
				return false
			}
		}
		return true
	})
	t.Logf("loops of a dead worker recovered %s after it died (TTL %s)", time.Since(died), ttl)
	for _, id := range onC {
		l, _ := svc.Get(id)
		if l.Iteration != 2 {
			t.Errorf("loop %s at iteration %d after its worker died; want 2 (one attempt charged)", id, l.Iteration)
		}
		evs := events(svc.Store, id)
		if !slices.ContainsFunc(evs, func(e loop.Event) bool { return strings.Contains(e.Message, "worker c was lost; iteration 1 charged") }) {
			t.Errorf("loop %s: no journal event naming the lost worker", id)
		}
	}
	// Now the scheduler dies; another takes over within 2× the TTL.
	old := scheduler()
	died = time.Now()
	lg.mu.Lock()
	lg.dead[old] = true
	lg.mu.Unlock()
	nodes[old].die()
	waitUntil(t, 3*ttl, "a new scheduler", func() bool { s := scheduler(); return s != "" && s != old })
	took := time.Since(died)
	t.Logf("scheduler failover %s after the scheduler died (TTL %s)", took, ttl)
	if took > 2*ttl {
		t.Errorf("scheduler failover took %s; want ≤ 2×TTL %s", took, 2*ttl)
	}
	live := nodes[scheduler()]
	for i := range 6 {
		l, err := live.svc.Create(api.CreateRequest{Type: loop.Ralph, Task: fmt.Sprintf("late %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	live.mgr.Wake()
	waitUntil(t, 30*time.Second, "every loop complete", func() bool {
		for _, id := range ids {
			if l, err := live.svc.Get(id); err != nil || l.Status != loop.Complete {
				return false
			}
		}
		return true
	})
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.overlap) > 0 {
		t.Errorf("loops ran on two workers at once: %v", lg.overlap)
	}
	workers := map[string]int{}
	for _, id := range ids {
		// An agent of a worker killed right after it passed may have its
		// pass lost with the worker (never recorded; the loop runs again
		// elsewhere): at-least-once runs, exactly-once completion.
		p := lg.passes[id]
		var kept []string
		for _, w := range p {
			if !lg.dead[w] {
				kept = append(kept, w)
			}
		}
		evs := events(live.st, id)
		completes := 0
		for _, e := range evs {
			if e.Kind == loop.EventTransition && e.To == loop.Complete {
				completes++
			}
		}
		switch {
		case completes != 1:
			t.Errorf("loop %s completed %d times in the journal; want exactly once", id, completes)
		case len(p) == 0 || len(kept) > 1:
			t.Errorf("loop %s passed %d times (%v; killed workers %v); want once, or more only on killed workers", id, len(p), p, lg.dead)
		default:
			workers[p[len(p)-1]]++
		}
		if !slices.ContainsFunc(evs, func(e loop.Event) bool { return strings.Contains(e.Message, "started on worker ") }) {
			t.Errorf("loop %s: no journal event naming the worker it started on", id)
		}
	}
	if len(workers) < 2 {
		t.Errorf("loops completed on workers %v; want at least two workers used", workers)
	}
	t.Logf("completions per worker: %v", workers)
	// Nothing is left holding a lease.
	_, holders, err := live.w.Live(context.Background())
	if err != nil || len(holders) != 0 {
		t.Errorf("lease keys left after every loop completed: %v, %v", holders, err)
	}
}

func mapValues[K comparable, V any](mp map[K]V) []V {
	out := make([]V, 0, len(mp))
	for _, v := range mp {
		out = append(out, v)
	}
	return out
}

func events(st *store.Store, id string) []loop.Event {
	var evs []loop.Event
	_ = st.View(func(tx *store.Tx) (err error) { evs, err = tx.Events(id); return err })
	return evs
}

// TestClusterCancelAndFence: a cancel made on another daemon stops the
// agent on the worker running the loop; a worker whose session is revoked
// stops its agents at once and records nothing, and the scheduler puts
// its loop back with one attempt charged.
func TestClusterCancelAndFence(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	prefix := "/loopr/cancelfence"
	ttl := 3 * time.Second
	lg := &ledger{running: map[string]string{}, passes: map[string][]string{}, block: map[string]bool{"a": true, "b": true}, dead: map[string]bool{}}
	nodes := map[string]*node{"a": startNode(t, srv, prefix, "a", ttl, lg), "b": startNode(t, srv, prefix, "b", ttl, lg)}
	svc := nodes["a"].svc
	var ids []string
	for i := range 3 {
		l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: fmt.Sprintf("hang %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	nodes["a"].mgr.Wake()
	nodes["b"].mgr.Wake()
	on := func(id string) string {
		lg.mu.Lock()
		defer lg.mu.Unlock()
		return lg.running[id]
	}
	waitUntil(t, 10*time.Second, "three agents running", func() bool {
		return on(ids[0]) != "" && on(ids[1]) != "" && on(ids[2]) != ""
	})
	// Cancel ids[0] on the daemon that does not run it.
	runner := on(ids[0])
	other := map[string]string{"a": "b", "b": "a"}[runner]
	if _, err := nodes[other].svc.Act(ids[0], api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the cancelled loop's agent stopped on worker "+runner, func() bool { return on(ids[0]) == "" })
	waitUntil(t, 5*time.Second, "the cancelled loop's lease key deleted", func() bool {
		_, holders, err := nodes[runner].w.Live(context.Background())
		_, held := holders[ids[0]]
		return err == nil && !held
	})
	// Revoke the session of the worker running ids[1]: it fences itself.
	victim := on(ids[1])
	lease := nodes[victim].w.Lease()
	if _, err := nodes[victim].st.EtcdClient().Revoke(context.Background(), clientLease(lease)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the fenced worker's agent stopped", func() bool { return on(ids[1]) != victim })
	lg.mu.Lock()
	fencedCause, cancelCause := lg.causes[ids[1]], lg.causes[ids[0]]
	lg.mu.Unlock()
	if !errors.Is(fencedCause, errKill) {
		t.Errorf("the fenced worker stopped its agent with %v; want runner.ErrKill (SIGKILL, no grace)", fencedCause)
	}
	if errors.Is(cancelCause, errKill) {
		t.Errorf("a user's cancel stopped the agent with %v; want the usual stop with grace", cancelCause)
	}
	waitUntil(t, 10*time.Second, "the fenced worker's loop charged one attempt", func() bool {
		l, err := svc.Get(ids[1])
		return err == nil && l.Iteration == 2
	})
	evs := events(svc.Store, ids[1])
	if !slices.ContainsFunc(evs, func(e loop.Event) bool {
		return strings.Contains(e.Message, "worker "+victim+" was lost; iteration 1 charged")
	}) {
		t.Errorf("no journal event says worker %s was lost", victim)
	}
	lg.mu.Lock()
	lg.block = map[string]bool{}
	lg.mu.Unlock()
	waitUntil(t, 20*time.Second, "the fenced loop complete", func() bool {
		l, err := svc.Get(ids[1])
		return err == nil && l.Status == loop.Complete
	})
	if l, _ := svc.Get(ids[0]); l.Status != loop.Cancelled {
		t.Errorf("cancelled loop is %s; want cancelled", l.Status)
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if len(lg.overlap) > 0 {
		t.Errorf("loops ran on two workers at once: %v", lg.overlap)
	}
	if p := lg.passes[ids[1]]; len(p) != 1 {
		t.Errorf("fenced loop passed %d times (%v); want once", len(p), p)
	}
}

// errKill: the test below names a variable runner.
var errKill = runner.ErrKill

func clientLease(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }

func TestPickWorker(t *testing.T) {
	t.Parallel()
	w := func(name string, labels ...string) cluster.Live {
		return cluster.Live{Info: cluster.WorkerInfo{Name: name, Labels: labels}}
	}
	live := []cluster.Live{w("a", "gpu"), w("b"), w("c", "gpu", "big")}
	for _, tc := range []struct {
		name   string
		free   map[string]int
		gone   map[string]bool
		labels []string
		want   string
	}{
		{"most free slots", map[string]int{"a": 1, "b": 3, "c": 2}, nil, nil, "b"},
		{"ties by name", map[string]int{"a": 2, "b": 2, "c": 2}, nil, nil, "a"},
		{"labels", map[string]int{"a": 1, "b": 3, "c": 2}, nil, []string{"gpu"}, "c"},
		{"every label", map[string]int{"a": 5, "b": 3, "c": 1}, nil, []string{"gpu", "big"}, "c"},
		{"full workers skipped", map[string]int{"a": 0, "b": 0, "c": 1}, nil, nil, "c"},
		{"gone workers skipped", map[string]int{"a": 1, "b": 3, "c": 2}, map[string]bool{"b": true}, nil, "c"},
		{"none fits", map[string]int{"a": 0, "b": 3, "c": 0}, nil, []string{"gpu"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := pickWorker(live, tc.free, tc.gone, tc.labels)
			if tc.want == "" {
				if ok {
					t.Fatalf("pickWorker() = %s; want none", got.Info.Name)
				}
				return
			}
			if !ok || got.Info.Name != tc.want {
				t.Fatalf("pickWorker() = %s, %v; want %s", got.Info.Name, ok, tc.want)
			}
		})
	}
}

// TestWorkerRetriesAssignmentAfterFailedCheck: a loop assigned to this
// worker whose lease could not be read (etcd slow or away for a moment)
// is checked again on the next tick, not forgotten: forgotten, it would
// stay running under a live worker that never runs it, and the scheduler
// never recovers it (its lease key is alive).
func TestWorkerRetriesAssignmentAfterFailedCheck(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/retrycheck", DialTimeout: testslack.Scale(2 * time.Second)}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := config.Default()
	svc := control.New(st, workspace.Paths{Workspace: "/ws", Home: t.TempDir()}, func() *config.Config { return cfg }, time.Now)
	w, err := cluster.Register(context.Background(), cluster.Options{Store: st, TTL: 30 * time.Second,
		Info: cluster.WorkerInfo{Name: "a", Host: "h", Home: "/h", Workspace: "/ws", MaxLoops: 2}})
	if err != nil {
		t.Fatal(err)
	}
	m := New(Options{Service: svc, Runner: &fakeRunner{fn: func(context.Context, runner.Job) runner.Result { return runner.Result{} }}, Cluster: w})
	l := loop.Loop{ID: "x", Type: loop.Ralph, Status: loop.Running, Iteration: 1, Lease: &loop.Lease{Owner: cluster.OwnerPrefix + "a"}}
	m.toLaunch[l.ID] = l
	st.Close() // every read fails now, as one does while etcd does not answer
	m.workerTick(context.Background(), time.Now())
	if _, ok := m.toLaunch[l.ID]; !ok {
		t.Fatal("an assignment whose lease could not be read was dropped; want it checked again on the next tick")
	}
	if len(m.Running()) != 0 {
		t.Fatalf("launched %v without reading its lease", m.Running())
	}
}

// TestWorkerLaunchesReassignmentAfterOldAgentEnds: a loop given back to
// this worker at a new iteration while the agent of its old iteration is
// still stopping (the worker was fenced and registered again, or a user
// cancelled and retried it) is launched once that agent's result is in —
// not forgotten, which left it running under this live worker forever.
func TestWorkerLaunchesReassignmentAfterOldAgentEnds(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/reassign", DialTimeout: testslack.Scale(2 * time.Second)}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	svc := control.New(st, workspace.Paths{Workspace: "/ws", Home: t.TempDir()}, func() *config.Config { return cfg }, time.Now)
	w, err := cluster.Register(context.Background(), cluster.Options{Store: st, TTL: 30 * time.Second,
		Info: cluster.WorkerInfo{Name: "a", Host: "h", Home: "/h", Workspace: "/ws", MaxLoops: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan int, 4)
	m := New(Options{Service: svc, Cluster: w, Runner: &fakeRunner{fn: func(_ context.Context, j runner.Job) runner.Result {
		ran <- j.Loop.Iteration
		return runner.Result{Outcome: runner.Failed, Reason: "test"}
	}}})
	l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "again"})
	if err != nil {
		t.Fatal(err)
	}
	// The scheduler gave the loop to this worker at iteration 2.
	err = st.Update(func(tx *store.Tx) error {
		cur, err := tx.Get(l.ID)
		if err != nil {
			return err
		}
		if err := control.Move(tx, cur, loop.Running, time.Now(), "iteration 2 started on worker a", func(n *loop.Loop) {
			n.Iteration, n.Lease = 2, &loop.Lease{Owner: cluster.OwnerPrefix + "a", ExpiresAt: time.Now().Add(time.Hour)}
		}); err != nil {
			return err
		}
		return cluster.PutLease(tx, l.ID, cluster.LoopLease{Worker: "a", Iteration: 2, Lease: cluster.LeaseHex(w.Lease())}, w.Lease())
	})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := svc.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The agent of iteration 1 is still stopping here when the follower
	// delivers the assignment.
	stopped := false
	m.active[l.ID] = &active{cancel: func() { stopped = true }, iteration: 1, fenced: true}
	m.noteChange(store.Change{ID: l.ID, Loop: cur})
	m.workerTick(context.Background(), time.Now())
	if !stopped {
		t.Fatal("the old iteration's agent was not stopped")
	}
	select {
	case it := <-ran:
		t.Fatalf("iteration %d launched while the old agent still runs", it)
	default:
	}
	// Its result is in (finish removes it), then the next tick.
	m.mu.Lock()
	delete(m.active, l.ID)
	m.mu.Unlock()
	m.workerTick(context.Background(), time.Now())
	select {
	case it := <-ran:
		if it != 2 {
			t.Fatalf("launched iteration %d; want 2", it)
		}
	case <-time.After(testslack.Scale(10 * time.Second)):
		t.Fatal("the loop given back to this worker was never launched")
	}
}

// TestClusterLabelsDoNotBlock: loops whose type asks for worker labels no
// live worker has are held (reason preflight, saying why) instead of being
// chosen first tick after tick and failing assignment, which kept the
// global slots from the loops the idle workers could run.
func TestClusterLabelsDoNotBlock(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	prefix := "/loopr/labeltest"
	lg := &ledger{running: map[string]string{}, passes: map[string][]string{}, block: map[string]bool{}, dead: map[string]bool{}}
	gpu := func(c *config.Config) {
		c.Concurrency.MaxLoops = 2
		ts := config.DefaultTypeSettings()
		ts.Base = 1000 // before every ralph
		ts.WorkerLabels = []string{"gpu"}
		c.UserTypes = map[string]config.TypeSettings{"gpu": ts}
	}
	nodes := []*node{startNode(t, srv, prefix, "a", 2*time.Second, lg, gpu), startNode(t, srv, prefix, "b", 2*time.Second, lg, gpu)}
	svc := nodes[0].svc
	var gpus, ralphs []string
	for i := range 3 {
		l, err := svc.Create(api.CreateRequest{Type: "gpu", Task: fmt.Sprintf("render %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		gpus = append(gpus, l.ID)
	}
	for i := range 3 {
		l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: fmt.Sprintf("task %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ralphs = append(ralphs, l.ID)
	}
	for _, n := range nodes {
		n.mgr.Wake()
	}
	waitUntil(t, 20*time.Second, "the ralph loops complete beside the unplaceable gpu loops", func() bool {
		for _, id := range ralphs {
			if l, err := svc.Get(id); err != nil || l.Status != loop.Complete {
				return false
			}
		}
		return true
	})
	for _, id := range gpus {
		if l, _ := svc.Get(id); l.Status != loop.Pending {
			t.Errorf("gpu loop %s is %s; want pending (no worker has the label)", id, l.Status)
		}
	}
	var sched *node
	for _, n := range nodes {
		if n.w.Scheduler() {
			sched = n
		}
	}
	if sched == nil {
		t.Fatal("no scheduler")
	}
	v, err := sched.svc.Scheduler(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range v.Rows {
		if r.Type == "gpu" && !slices.ContainsFunc(r.ReasonText, func(s string) bool { return strings.Contains(s, "no live worker has the labels [gpu]") }) {
			t.Errorf("gpu loop %s: reasons %v; want the missing label named", r.ID, r.ReasonText)
		}
	}
}

func TestPlacementHolds(t *testing.T) {
	w := func(name string, max, running int, labels ...string) cluster.Live {
		return cluster.Live{Info: cluster.WorkerInfo{Name: name, MaxLoops: max, Running: running, Labels: labels}}
	}
	labels := map[string][]string{"gpu": {"gpu"}, "ralph": nil, "arm": {"arm", "gpu"}}
	of := func(t string) []string { return labels[t] }
	types := []string{"arm", "gpu", "ralph"}
	tests := []struct {
		name string
		live []cluster.Live
		want map[string]string // type → a part of its hold text
	}{
		{"a free gpu worker", []cluster.Live{w("a", 2, 0, "gpu"), w("b", 2, 2)}, map[string]string{"arm": "no live worker has the labels [arm, gpu]"}},
		{"the gpu worker full", []cluster.Live{w("a", 2, 2, "gpu"), w("b", 2, 0)}, map[string]string{"gpu": "busy (2 of 2 slots on 1 worker(s))", "arm": "no live worker"}},
		{"a standby with the label", []cluster.Live{w("a", 0, 0, "gpu", "arm")}, map[string]string{"gpu": "busy (0 of 0 slots", "arm": "busy"}},
		{"every label somewhere free", []cluster.Live{w("a", 1, 0, "gpu", "arm")}, nil},
	}
	for _, tt := range tests {
		got := placementHolds(types, of, tt.live)
		if len(got) != len(tt.want) {
			t.Errorf("%s: holds %v; want types %v", tt.name, got, tt.want)
			continue
		}
		for typ, part := range tt.want {
			if !strings.Contains(got[typ], part) {
				t.Errorf("%s: hold of %s = %q; want it to say %q", tt.name, typ, got[typ], part)
			}
		}
	}
}
