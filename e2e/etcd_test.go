package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestEtcdStoreDaemon runs the real daemon with store.backend etcd, on a
// real etcd embedded on 127.0.0.1 (issue 14): a whole plan tree completes
// with no loopr.db written; status names the daemon's worker, which is the
// scheduler; a second daemon in another repository on the same store is
// refused (no git.remote) with a line naming the first worker; `loopr
// store check` refuses; with the daemon stopped, the direct CLI reads and
// writes the etcd store, and a new daemon sees what it wrote.
func TestEtcdStoreDaemon(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	storeYML := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: /loopr/e2e\n", srv.Endpoint())
	r := newRepo(t, treeConfig(t, 3, validateCmd(t), "tree")+storeYML)
	d := startDaemon(t, r)

	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Build the e2e widget", "--json"), &plan)
	waitEvery(t, 90*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	loops := list(t, r)
	if got := checkTree(t, loops); got.ID != plan.ID {
		t.Fatalf("tree root %s, want the plan %s", got.ID, plan.ID)
	}
	planBranch := gitflow.BranchName(plan.ID, plan.Title)
	files := strings.Fields(r.git(t, "ls-tree", "-r", "--name-only", planBranch))
	for _, l := range loops {
		if l.Type == loop.Ralph && !slices.Contains(files, "out/"+l.ID+".txt") {
			t.Errorf("out/%s.txt (ralph %q) is not on branch %s", l.ID, l.Title, planBranch)
		}
	}
	if st, want := status(t, r).Store, "etcd "+srv.Endpoint()+" /loopr/e2e"; st != want {
		t.Errorf("status store = %q, want %q", st, want)
	}
	if out := ok(t, r.dir, "status"); !regexp.MustCompile(`(?m)^store +etcd ` + regexp.QuoteMeta(srv.Endpoint()) + ` /loopr/e2e$`).MatchString(out) {
		t.Errorf("loopr status lacks the store line:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(r.home, "loopr.db")); err == nil {
		t.Error("the daemon wrote loopr.db although the store is on etcd")
	}
	c := status(t, r).Cluster
	if c == nil || c.Worker == "" || c.Scheduler != c.Worker || len(c.Workers) != 1 || c.Workers[0].Running != 0 || c.LeaseTTLSecs != 15 {
		t.Errorf("status cluster = %+v; want this daemon's worker alone, the scheduler, lease 15 s", c)
	} else if out := ok(t, r.dir, "status"); !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.Worker) + ` +\S+ +0/\d+ +- +scheduler, this daemon$`).MatchString(out) {
		t.Errorf("loopr status lacks the WORKERS row of %s:\n%s", c.Worker, out)
	}

	if out := ok(t, r.dir, "debug", "scheduler"); c != nil && !strings.HasPrefix(out, "scheduler: worker "+c.Worker+" (elected among 1)") {
		t.Errorf("loopr debug scheduler does not name the scheduler %s first:\n%s", c.Worker, out)
	}

	// A second daemon (another repository, another home) on the same store.
	r2 := newRepo(t, treeConfig(t, 3, validateCmd(t), "tree")+storeYML)
	res := run(t, r2.dir, "", "daemon")
	if res.code == 0 || !strings.Contains(res.stderr, "worker "+c.Worker+" shares this store from host") ||
		!strings.Contains(res.stderr, "set git.remote in loopr.yml") {
		t.Errorf("second daemon on the store from another repository: exit %d, stderr %q; want a refusal naming the first worker and git.remote", res.code, res.stderr)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit %d after SIGTERM:\n%s", code, tail(d.output(), 40))
	}
	res = run(t, r.dir, "", "store", "check")
	if res.code == 0 || !strings.Contains(res.stderr, "works on the bbolt file only; this workspace's store is on etcd") {
		t.Errorf("store check on etcd: exit %d, stderr %q", res.code, res.stderr)
	}

	// The direct CLI path: no daemon, the store read and written in etcd.
	var direct []loop.Loop
	mustJSON(t, ok(t, r.dir, "list", "--json"), &direct)
	if len(direct) != len(loops) {
		t.Errorf("direct list: %d loops, want the daemon's %d", len(direct), len(loops))
	}
	var added loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Written without a daemon", "--json"), &added)

	// The registration went with the first daemon's clean stop: another
	// starts at once, and runs what the CLI added.
	d2 := startDaemon(t, r)
	waitEvery(t, 30*time.Second, slowPoll, "the loop added without a daemon to finish", func() bool {
		if d2.exited() {
			t.Fatalf("second daemon exited: %v\n%s", d2.cmd.ProcessState, tail(d2.output(), 40))
		}
		return show(t, r, added.ID).Status.Terminal()
	})
	if got := show(t, r, added.ID); got.Status != loop.Complete {
		t.Errorf("loop added without a daemon ended %s, want complete", got.Status)
	}
	if code := d2.stop(); code != 0 {
		t.Errorf("second daemon exit %d", code)
	}

	// What is in etcd is a whole store: it passes the index check.
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/e2e"}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		t.Errorf("store check of the etcd store: %v", err)
	}
	var evs []loop.Event
	if err := s.View(func(tx *store.Tx) (err error) { evs, err = tx.EventsSince(0, 0); return err }); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(evs[len(evs)-1])
	if len(evs) < 2*len(loops) {
		t.Errorf("%d journal events for %d loops; last %s", len(evs), len(loops), b)
	}
}

// TestEtcdStoreTakeover: the daemon on an etcd store is killed with
// SIGKILL mid-run and started again at once in the same home: its dead
// registration (same host, same home, a pid that is gone) is ended at the
// start instead of waiting out the lease, and the new daemon — the only
// worker, so the scheduler — recovers the interrupted loops (one attempt
// charged each) and runs the tree to completion.
func TestEtcdStoreTakeover(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	storeYML := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: /loopr/takeover\n", srv.Endpoint())
	runLog := filepath.Join(t.TempDir(), "runs.log")
	r := newRepo(t, treeConfig(t, 5, validateCmd(t), "crash", runLog, "2")+storeYML)
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Survive a lost machine", "--json"), &plan)
	waitFor(t, 30*time.Second, "an agent run to start", func() bool {
		b, _ := os.ReadFile(runLog)
		return strings.Contains(string(b), "start ")
	})
	d.crash(t)
	killed := time.Now()
	d2 := startDaemon(t, r)
	waitFor(t, 10*time.Second, "the restarted daemon to be the scheduler", func() bool {
		c := status(t, r).Cluster
		return c != nil && c.Scheduler != "" && len(c.Workers) == 1 && c.Workers[0].PID == d2.cmd.Process.Pid
	})
	took := time.Since(killed)
	t.Logf("restarted daemon scheduling %s after the SIGKILL (lease 15 s)", took.Round(100*time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the restarted daemon took %s to schedule; want well within the 15 s lease (the dead registration ended at start)", took)
	}
	waitEvery(t, 90*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if d2.exited() {
			t.Fatalf("daemon exited: %v\n%s", d2.cmd.ProcessState, tail(d2.output(), 40))
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	loops := list(t, r)
	checkTree(t, loops)
	completeWithARetry(t, loops)
}

func etcdClientE2E(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: testslack.Scale(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestEtcdStandbyFailover: daemon A (home A) is a worker and the
// scheduler; daemon B (`loopr --home B daemon --standby`, same workspace)
// is a worker that runs no loops. A is killed with SIGKILL mid-run: B is
// elected scheduler within 2× the lease TTL (worker.lease_ttl_secs 4),
// recovers A's interrupted loops (one attempt charged each), and once A
// is started again (its dead registration ended at once) assigns the
// tree to it, to completion. B never runs a loop.
func TestEtcdStandbyFailover(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	storeYML := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: /loopr/standby\nworker:\n  lease_ttl_secs: 4\n", srv.Endpoint())
	runLog := filepath.Join(t.TempDir(), "runs.log")
	r := newRepo(t, treeConfig(t, 5, validateCmd(t), "crash", runLog, "2")+storeYML)
	a := startDaemon(t, r)
	waitFor(t, 15*time.Second, "A to be the scheduler", func() bool {
		c := status(t, r).Cluster
		return c != nil && c.Scheduler != "" && c.Scheduler == c.Worker
	})
	nameA := status(t, r).Cluster.Worker

	homeB := filepath.Join(t.TempDir(), "b")
	logB := filepath.Join(r.logs, "standby.log")
	lf, err := os.Create(logB)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	b := exec.Command(bin, "--home", homeB, "daemon", "--standby")
	b.Dir = r.dir
	b.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1", "LOOPR_E2E_DAEMON=2")
	b.Stdout, b.Stderr = lf, lf
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan struct{})
	go func() { _ = b.Wait(); close(bDone) }()
	t.Cleanup(func() {
		_ = b.Process.Signal(syscall.SIGTERM)
		select {
		case <-bDone:
		case <-time.After(testslack.Scale(10 * time.Second)):
			_ = b.Process.Kill()
			<-bDone
		}
	})
	logged := func() string { out, _ := os.ReadFile(logB); return string(out) }
	var nameB string
	waitFor(t, 15*time.Second, "the standby to register", func() bool {
		select {
		case <-bDone:
			t.Fatalf("standby exited: %v\n%s", b.ProcessState, tail(logged(), 40))
		default:
		}
		res := run(t, r.dir, "", "--home", homeB, "status", "--json")
		var st api.Status
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &st) != nil || !st.Daemon || st.Cluster == nil {
			return false
		}
		nameB = st.Cluster.Worker
		return len(st.Cluster.Workers) == 2
	})
	for _, w := range bStatus(t, r.dir, homeB).Cluster.Workers {
		if w.Name == nameB && (w.MaxLoops != 0 || w.Scheduler) {
			t.Errorf("standby worker %+v: want max_loops 0, not the scheduler", w)
		}
	}

	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Survive a lost machine", "--json"), &plan)
	waitFor(t, 30*time.Second, "an agent run to start", func() bool {
		out, _ := os.ReadFile(runLog)
		return strings.Contains(string(out), "start ")
	})
	a.crash(t)
	killed := time.Now()
	waitFor(t, 20*time.Second, "the standby to be elected scheduler", func() bool {
		c := bStatus(t, r.dir, homeB).Cluster
		return c != nil && c.Scheduler == nameB
	})
	failover := time.Since(killed)
	t.Logf("standby elected scheduler %s after the SIGKILL (lease 4 s)", failover.Round(100*time.Millisecond))
	if limit := 2 * 4 * time.Second; failover > limit {
		t.Errorf("failover took %s, want within 2× the lease TTL (%s)", failover, limit)
	}
	waitFor(t, 20*time.Second, "the loops of A recovered", func() bool {
		return bStatus(t, r.dir, homeB).Counts[loop.Running] == 0
	})
	a2 := startDaemon(t, r) // A again: the standby assigns it the tree
	waitEvery(t, 90*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if a2.exited() {
			t.Fatalf("daemon A exited: %v\n%s", a2.cmd.ProcessState, tail(a2.output(), 40))
		}
		st := bStatus(t, r.dir, homeB)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	var loops []loop.Loop
	mustJSON(t, ok(t, r.dir, "--home", homeB, "list", "--json"), &loops)
	checkTree(t, loops)
	completeWithARetry(t, loops)
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/standby"}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []loop.Event
	if err := s.View(func(tx *store.Tx) (err error) { evs, err = tx.EventsSince(0, 0); return err }); err != nil {
		t.Fatal(err)
	}
	lost := false
	for _, e := range evs {
		if strings.Contains(e.Message, "started on worker "+nameB) {
			t.Errorf("the standby ran a loop: %s %s", e.Loop, e.Message)
		}
		lost = lost || strings.Contains(e.Message, "worker "+nameA+" was lost; iteration")
	}
	if !lost {
		t.Errorf("no journal event says worker %s was lost", nameA)
	}
}

// bStatus is `loopr --home home status --json` in dir.
func bStatus(t *testing.T, dir, home string) api.Status {
	t.Helper()
	var st api.Status
	mustJSON(t, ok(t, dir, "--home", home, "status", "--json"), &st)
	return st
}

// TestDaemonStandbyUsage: --standby is refused where it means nothing.
func TestDaemonStandbyUsage(t *testing.T) {
	t.Parallel()
	r := newRepo(t, "scheduler:\n  poll_interval_secs: 1\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"daemon", "--standby"}, "--standby needs store.backend etcd"},
	} {
		res := run(t, r.dir, "", tc.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("loopr %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
		}
	}
	etcdYML := "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://127.0.0.1:1\"]}\n"
	r2 := newRepo(t, etcdYML)
	res := run(t, r2.dir, "", "daemon", "--standby", "--detach")
	if res.code != 2 || !strings.Contains(res.stderr, "--standby with --detach") {
		t.Errorf("loopr daemon --standby --detach: exit %d, stderr %q", res.code, res.stderr)
	}
}

// completeWithARetry asserts that every loop completed and that at least
// one was charged an attempt: the run a dead daemon left was recovered.
func completeWithARetry(t *testing.T, loops []loop.Loop) {
	t.Helper()
	retried := 0
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("loop %s (%s) ended %s", l.ID, l.Type, l.Status)
		}
		if l.Iteration > 1 {
			retried++
		}
	}
	if retried == 0 {
		t.Errorf("no loop was charged an attempt: the interrupted run was not recovered\n%s", describe(loops))
	}
}

// TestEtcdDaemonStopsWithoutEtcd: with its etcd gone, a daemon told to
// stop does so in bounded time — every store call of its shutdown gives
// up after a short wait once one found etcd unreachable, and the claim is
// left to its lease instead of waited on.
func TestEtcdDaemonStopsWithoutEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	storeYML := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: /loopr/gone\n", srv.Endpoint())
	r := newRepo(t, treeConfig(t, 3, validateCmd(t), "tree")+storeYML)
	d := startDaemon(t, r)
	srv.Stop()
	began := time.Now()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(testslack.Scale(30 * time.Second)):
		t.Fatalf("daemon still running 30 s after SIGTERM with etcd gone:\n%s", tail(d.output(), 20))
	}
	took := time.Since(began)
	t.Logf("daemon stopped %s after SIGTERM, etcd gone", took.Round(100*time.Millisecond))
	if took > 20*time.Second {
		t.Errorf("daemon took %s to stop with etcd gone, want under 20 s", took)
	}
}

// TestEtcdTwoWorkersOneRepository: two daemons (two homes) in one
// workspace, both workers of one etcd store (worker.max_loops 2 each, no
// git.remote): the scheduler spreads the tree over both, every loop
// completes once, and every ralph's output is on the plan branch — merged
// from both homes' integration worktrees under the shared lock. The
// webhook of each completion is delivered once (by the scheduler only).
func TestEtcdTwoWorkersOneRepository(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	var hookMu sync.Mutex
	hooks := map[string]int{} // loop → complete deliveries
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p api.WebhookPayload
		if err := json.NewDecoder(req.Body).Decode(&p); err == nil && p.Event == "complete" {
			hookMu.Lock()
			hooks[p.Loop.ID]++
			hookMu.Unlock()
		}
	}))
	t.Cleanup(hookSrv.Close)
	storeYML := fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: /loopr/two\nworker:\n  max_loops: 2\nwebhooks:\n  - url: %s/loopr\n    events: [complete]\n", srv.Endpoint(), hookSrv.URL)
	r := newRepo(t, treeConfig(t, 3, validateCmd(t), "tree")+storeYML)
	a := startDaemon(t, r)
	homeB := filepath.Join(t.TempDir(), "b")
	logB := filepath.Join(r.logs, "worker-b.log")
	lf, err := os.Create(logB)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	b := exec.Command(bin, "--home", homeB, "daemon")
	b.Dir = r.dir
	b.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1", "LOOPR_E2E_DAEMON=2")
	b.Stdout, b.Stderr = lf, lf
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan struct{})
	go func() { _ = b.Wait(); close(bDone) }()
	t.Cleanup(func() {
		_ = b.Process.Signal(syscall.SIGTERM)
		select {
		case <-bDone:
		case <-time.After(testslack.Scale(10 * time.Second)):
			_ = b.Process.Kill()
			<-bDone
		}
	})
	waitFor(t, 15*time.Second, "two workers registered", func() bool {
		c := status(t, r).Cluster
		return c != nil && len(c.Workers) == 2
	})
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Build it on two workers", "--json"), &plan)
	waitEvery(t, 120*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if a.exited() {
			t.Fatalf("daemon A exited: %v\n%s", a.cmd.ProcessState, tail(a.output(), 40))
		}
		select {
		case <-bDone:
			out, _ := os.ReadFile(logB)
			t.Fatalf("daemon B exited: %v\n%s", b.ProcessState, tail(string(out), 40))
		default:
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	loops := list(t, r)
	checkTree(t, loops)
	planBranch := gitflow.BranchName(plan.ID, plan.Title)
	files := strings.Fields(r.git(t, "ls-tree", "-r", "--name-only", planBranch))
	ralphs := 0
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("loop %s (%s) ended %s", l.ID, l.Type, l.Status)
		}
		if l.Type == loop.Ralph {
			ralphs++
			if !slices.Contains(files, "out/"+l.ID+".txt") {
				t.Errorf("out/%s.txt (ralph %q) is not on branch %s", l.ID, l.Title, planBranch)
			}
		}
	}
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/two"}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []loop.Event
	if err := s.View(func(tx *store.Tx) (err error) { evs, err = tx.EventsSince(0, 0); return err }); err != nil {
		t.Fatal(err)
	}
	// Every start of a loop is followed by its outcome (passed, failed,
	// rate limited and requeued, …) before the next start: never two
	// runs of one loop at once.
	on := map[string]int{}
	open := map[string]string{}
	for _, e := range evs {
		if _, w, ok := strings.Cut(e.Message, " started on worker "); ok {
			on[strings.Fields(w)[0]]++
			if prev, ok := open[e.Loop]; ok {
				t.Errorf("loop %s started again (%q) while %q ran", e.Loop, e.Message, prev)
			}
			open[e.Loop] = e.Message
		} else if e.Loop != "" {
			delete(open, e.Loop)
		}
	}
	t.Logf("%d loops (%d ralphs); iterations started per worker: %v", len(loops), ralphs, on)
	if len(on) != 2 {
		t.Errorf("iterations ran on workers %v; want both", on)
	}
	// `loopr logs` (daemon A) of a loop whose last iteration ran on B says
	// where its log is, instead of printing nothing; one that ran on A
	// gets its log (the tree's agents may print nothing: then it says so).
	self := status(t, r).Cluster.Worker
	lastOn := map[string]string{}
	for _, e := range evs {
		if _, w, ok := strings.Cut(e.Message, " started on worker "); ok {
			lastOn[e.Loop] = strings.Fields(w)[0]
		}
	}
	var onA, onB string
	for id, w := range lastOn {
		if w == self {
			onA = id
		} else {
			onB = id
		}
	}
	if onB != "" {
		res := run(t, r.dir, "", "logs", onB)
		if res.code != 2 || !strings.Contains(res.stderr, "ran on worker "+lastOn[onB]) || !strings.Contains(res.stderr, "run loopr logs "+onB+" on that machine") {
			t.Errorf("loopr logs %s (ran on %s) via %s: exit %d, stderr %q; want the worker named", onB, lastOn[onB], self, res.code, res.stderr)
		}
	}
	if onA != "" {
		if res := run(t, r.dir, "", "logs", onA); res.code != 0 || strings.Contains(res.stderr, "ran on worker") {
			t.Errorf("loopr logs %s (ran here): exit %d, stderr %q; want its log (or that the agent wrote none)", onA, res.code, res.stderr)
		}
	}
	waitFor(t, 15*time.Second, "a complete webhook for every loop", func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		return len(hooks) == len(loops)
	})
	time.Sleep(2 * time.Second) // a second daemon delivering too would have by now
	hookMu.Lock()
	defer hookMu.Unlock()
	for _, l := range loops {
		if hooks[l.ID] != 1 {
			t.Errorf("loop %s: %d complete webhooks; want exactly one per cluster", l.ID, hooks[l.ID])
		}
	}
}
