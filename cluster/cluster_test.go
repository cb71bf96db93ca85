package cluster

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/store"
)

var _ gitflow.Locker = (*Locker)(nil)

var prefixSeq atomic.Int64

func openStore(t *testing.T, srv *etcdtest.Server, prefix string) *store.Store {
	t.Helper()
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(2 * time.Second)}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newPrefix() string { return fmt.Sprintf("/loopr/cluster%d", prefixSeq.Add(1)) }

func info(name, host, home string) WorkerInfo {
	return WorkerInfo{Name: name, Host: host, Home: home, Workspace: "/ws", Repo: "/ws", MaxLoops: 2}
}

// run starts w.Run until the test ends (or stop is called).
func run(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond (etcd is a real server: no fake clock) until it holds.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
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

func TestRegister(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	t.Run("a taken name is refused with the other's pid, host and home", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, srv, newPrefix())
		ctx := context.Background()
		if _, err := Register(ctx, Options{Store: s, Info: info("w1", "h", "/home/a"), TTL: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		_, err := Register(ctx, Options{Store: s, Info: info("w1", "h", "/home/b"), TTL: 5 * time.Second})
		var nt *NameTakenError
		if !errors.As(err, &nt) {
			t.Fatalf("second Register error = %v; want *NameTakenError", err)
		}
		want := fmt.Sprintf("worker name w1 is taken by a live worker: pid %d on host h, home /home/a; stop that daemon or set another worker.name in loopr.yml", os.Getpid())
		if err.Error() != want {
			t.Fatalf("error = %q\nwant    %q", err, want)
		}
	})
	t.Run("another host without git.remote is refused, with it accepted", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, srv, newPrefix())
		ctx := context.Background()
		if _, err := Register(ctx, Options{Store: s, Info: info("a", "h1", "/home/a"), TTL: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		_, err := Register(ctx, Options{Store: s, Info: info("b", "h2", "/home/b"), TTL: 5 * time.Second})
		if !errors.Is(err, ErrNoRemote) {
			t.Fatalf("Register on another host error = %v; want ErrNoRemote", err)
		}
		other := info("c", "h1", "/home/c")
		other.Repo = "/elsewhere"
		if _, err := Register(ctx, Options{Store: s, Info: other, TTL: 5 * time.Second}); !errors.Is(err, ErrNoRemote) {
			t.Fatalf("Register in another repository error = %v; want ErrNoRemote", err)
		}
		same := info("d", "h1", "/home/d")
		if _, err := Register(ctx, Options{Store: s, Info: same, TTL: 5 * time.Second}); err != nil {
			t.Fatalf("Register on the same host and repository: %v", err)
		}
		remote := info("e", "h2", "/home/e")
		remote.Remote = "origin"
		if _, err := Register(ctx, Options{Store: s, Info: remote, TTL: 5 * time.Second}); err != nil {
			t.Fatalf("Register with git.remote: %v", err)
		}
	})
	t.Run("a dead daemon's registration of this home is ended", func(t *testing.T) {
		t.Parallel()
		s := openStore(t, srv, newPrefix())
		ctx := context.Background()
		dead := info("w", "h", "/home/x")
		dead.PID = 1 << 30 // no such process
		w1, err := Register(ctx, Options{Store: s, Info: dead, TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		old := w1.Lease()
		w2, err := Register(ctx, Options{Store: s, Info: info("w", "h", "/home/x"), TTL: 30 * time.Second})
		if err != nil {
			t.Fatalf("Register over a dead process's registration: %v", err)
		}
		if w2.Lease() == old || w2.Lease() == 0 {
			t.Fatalf("new lease %x; want a new one (old %x)", w2.Lease(), old)
		}
	})
	t.Run("a live worker on another machine with the same host name and home is not ended", func(t *testing.T) {
		t.Parallel()
		// Two machines cloned from one image: host name and home path
		// alike, the other's pid meaningless here. Its registration (put
		// as that machine's daemon would, lease kept alive) must survive.
		s := openStore(t, srv, newPrefix())
		ctx := context.Background()
		cli := s.EtcdClient()
		g, err := cli.Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		kctx, kstop := context.WithCancel(ctx)
		defer kstop()
		if _, err := cli.KeepAlive(kctx, g.ID); err != nil {
			t.Fatal(err)
		}
		other := registration{WorkerInfo: info("w", "h", "/home/x"), Boot: "another-machine"}
		other.PID = 1 << 30 // no such process here
		b, _ := json.Marshal(other)
		if _, err := cli.Put(ctx, s.EtcdPrefix()+"/"+WorkerKey("w"), string(b), clientv3.WithLease(g.ID)); err != nil {
			t.Fatal(err)
		}
		_, err = Register(ctx, Options{Store: s, Info: info("w", "h", "/home/x"), TTL: 30 * time.Second})
		var nt *NameTakenError
		if !errors.As(err, &nt) {
			t.Fatalf("Register over a live worker of another machine: error = %v; want *NameTakenError", err)
		}
		if ttl, err := cli.TimeToLive(ctx, g.ID); err != nil || ttl.TTL <= 0 {
			t.Fatalf("the other machine's lease was ended (TTL %v, err %v)", ttl.TTL, err)
		}
	})
}

func TestElectionAndListing(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	s := openStore(t, srv, newPrefix())
	ctx := context.Background()
	ttl := 2 * time.Second
	var ws []*Worker
	stops := map[string]func(){}
	for _, n := range []string{"a", "b", "c"} {
		w, err := Register(ctx, Options{Store: s, Info: info(n, "h", "/home/"+n), TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		stops[n] = run(t, w)
	}
	leader := func() *Worker {
		var l *Worker
		for _, w := range ws {
			if w.Scheduler() {
				if l != nil {
					t.Fatalf("two schedulers at once: %s and %s", l.Name(), w.Name())
				}
				l = w
			}
		}
		return l
	}
	waitFor(t, 5*time.Second, "a scheduler elected", func() bool { return leader() != nil })
	first := leader()
	for _, w := range ws {
		// Each worker campaigns from its own goroutine: the first may be
		// elected before the last has put its bid.
		waitFor(t, 5*time.Second, "worker "+w.Name()+"'s bid key under its lease", func() bool {
			found := false
			_ = s.View(func(tx *store.Tx) error {
				_, lease, ok := tx.Raw(w.BidKey())
				found = ok && lease == w.Lease()
				return nil
			})
			return found
		})
	}
	// Listing: every worker, the scheduler marked, running counted from leases.
	if err := s.Update(func(tx *store.Tx) error {
		return PutLease(tx, "L1", LoopLease{Worker: "b", Iteration: 1, Lease: LeaseHex(ws[1].Lease())}, ws[1].Lease())
	}); err != nil {
		t.Fatal(err)
	}
	list, sched, err := Workers(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sched != first.Name() || len(list) != 3 {
		t.Fatalf("Workers() = %d workers, scheduler %q; want 3, %q", len(list), sched, first.Name())
	}
	for _, w := range list {
		if w.Scheduler != (w.Name == first.Name()) || w.Running != map[bool]int{true: 1}[w.Name == "b"] || w.MaxLoops != 2 {
			t.Errorf("Workers() row %+v: scheduler/running/max_loops wrong", w)
		}
	}
	// The scheduler stops cleanly: another takes over at once (its bid is revoked).
	stops[first.Name()]()
	took := waitFor(t, 2*ttl, "another scheduler after a clean stop", func() bool { l := leader(); return l != nil && l != first })
	t.Logf("scheduler handover after a clean stop: %s", took)
	if _, _, err := Workers(ctx, s); err != nil {
		t.Fatal(err)
	}
	list, _, _ = Workers(ctx, s)
	if len(list) != 2 {
		t.Fatalf("Workers() after a clean stop = %d; want 2 (the registration went with the lease)", len(list))
	}
	// A scheduler whose process dies (no revoke): the lease runs out, one
	// of the others is elected within 2×TTL.
	second := leader()
	kill(second)
	took = waitFor(t, 2*ttl+time.Second, "a scheduler after the scheduler died", func() bool {
		for _, w := range ws {
			if w != first && w != second && w.Scheduler() {
				return true
			}
		}
		return false
	})
	t.Logf("scheduler failover after the scheduler died: %s (TTL %s)", took, ttl)
	if took > 2*ttl {
		t.Errorf("failover took %s; want ≤ 2×TTL %s", took, 2*ttl)
	}
}

// kill makes w behave as a dead process: its keepalive stops, nothing is revoked.
func kill(w *Worker) {
	w.mu.Lock()
	stop := w.kaStop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func TestSelfFencing(t *testing.T) {
	t.Run("a revoked lease is reported, and the worker registers again", func(t *testing.T) {
		srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
		s := openStore(t, srv, newPrefix())
		var lost atomic.Int32
		w, err := Register(context.Background(), Options{Store: s, Info: info("a", "h", "/home/a"), TTL: 2 * time.Second,
			OnLost: func(string) { lost.Add(1) }})
		if err != nil {
			t.Fatal(err)
		}
		run(t, w)
		waitFor(t, 5*time.Second, "elected", w.Scheduler)
		old := w.Lease()
		if _, err := s.EtcdClient().Revoke(context.Background(), clientLease(old)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "OnLost called", func() bool { return lost.Load() == 1 })
		waitFor(t, 5*time.Second, "registered again with a new lease", func() bool { l := w.Lease(); return l != 0 && l != old })
		waitFor(t, 5*time.Second, "elected again", w.Scheduler)
	})
	t.Run("no keepalive answer for 2/3 TTL fences before the lease can expire", func(t *testing.T) {
		srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
		s := openStore(t, srv, newPrefix())
		var lostAt, ackAt atomic.Int64
		ttl := 3 * time.Second
		var w *Worker
		w, err := Register(context.Background(), Options{Store: s, Info: info("a", "h", "/home/a"), TTL: ttl,
			OnLost: func(string) { ackAt.Store(w.lastAck.Load()); lostAt.Store(time.Now().UnixNano()) }})
		if err != nil {
			t.Fatal(err)
		}
		run(t, w)
		waitFor(t, 5*time.Second, "elected", w.Scheduler)
		srv.Stop() // a graceful stop: the member may answer keepalives for a while

		waitFor(t, 2*ttl, "OnLost while etcd is away", func() bool { return lostAt.Load() != 0 })
		after := time.Unix(0, lostAt.Load()).Sub(time.Unix(0, ackAt.Load()))
		t.Logf("fenced %s after the last keepalive answer (TTL %s)", after, ttl)
		if after >= ttl {
			t.Errorf("fenced %s after the last answer; want before the TTL %s", after, ttl)
		}
		if w.Scheduler() || w.Lease() != 0 {
			t.Error("still scheduler or holding a lease after being fenced")
		}
		srv.Restart(t)
		waitFor(t, 15*time.Second, "registered again after etcd came back", func() bool { return w.Lease() != 0 })
	})
}

func TestLocker(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	s := openStore(t, srv, newPrefix())
	ctx := context.Background()
	a, err := Register(ctx, Options{Store: s, Info: info("a", "h", "/home/a"), TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(ctx, Options{Store: s, Info: info("b", "h", "/home/b"), TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := a.Locker().Lock(ctx, "loopr/plan")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		u, err := b.Locker().Lock(ctx, "loopr/plan")
		if err == nil {
			close(got)
			u()
		}
	}()
	select {
	case <-got:
		t.Fatal("b took the lock while a held it")
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(testslack.Scale(5 * time.Second)):
		t.Fatal("b did not get the lock after a unlocked")
	}
	// Another name is not blocked by a held one.
	u1, err := a.Locker().Lock(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer u1()
	tctx, cancel := context.WithTimeout(ctx, testslack.Scale(2*time.Second))
	defer cancel()
	u2, err := b.Locker().Lock(tctx, "y")
	if err != nil {
		t.Fatalf("lock of another name: %v", err)
	}
	u2()
}

func TestDefaultName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ host, home, want string }{
		{"build-1", "/srv/web/.loopr", "build-1-"},
		{"my host", "/h", "my-host-"},
		{"", "/h", "host-"},
	} {
		got := DefaultName(tc.host, tc.home)
		if len(got) != len(tc.want)+6 || got[:len(tc.want)] != tc.want {
			t.Errorf("DefaultName(%q, %q) = %q; want %s + 6 hex", tc.host, tc.home, got, tc.want)
		}
	}
	if DefaultName("h", "/a") == DefaultName("h", "/b") {
		t.Error("DefaultName does not tell two homes apart")
	}
}

func clientLease(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }

// A campaign that fails (a watch error while it waits) is tried again: a
// worker that gave up would keep its bid, become the oldest and leave the
// store without a scheduler.
func TestCampaignFailureRetried(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	s := openStore(t, srv, newPrefix())
	var fails atomic.Int32
	real := campaignOnce
	campaignOnce = func(ctx context.Context, e *concurrency.Election, val string) error {
		if fails.Add(1) <= 2 {
			return errors.New("injected: watch failed while waiting")
		}
		return real(ctx, e, val)
	}
	t.Cleanup(func() { campaignOnce = real })
	w, err := Register(context.Background(), Options{Store: s, Info: info("a", "h", "/home/a"), TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	waitFor(t, 5*time.Second, "elected after two failed campaigns", w.Scheduler)
	if n := fails.Load(); n < 3 {
		t.Errorf("campaigned %d times; want 3 (two failures, then elected)", n)
	}
}
