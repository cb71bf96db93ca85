package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestClusterOfThreeDaemons is issue 14's multi-process test: one queue
// on a 3-member etcd cluster of real etcd processes, worked by three loopr
// daemons — each its own "machine": its own home, its own clone of one
// bare repository (git.remote: origin) and its own TCP proxies to the etcd
// members — running a 60-loop tree with a scripted agent
// (testdata/clusteragent.sh). Mid-run it kills with SIGKILL one worker
// that is running loops, cuts another off from etcd (its proxies drop
// every connection) and heals the cut, kills the current scheduler, and
// kills and restarts one etcd member (the raft leader). It asserts:
//
//   - every loop ends complete, with exactly one transition to complete in
//     the journal;
//   - no loop ran on two workers at once (the agent holds an flock per
//     loop id and logs an overlap);
//   - a killed worker's processes are gone within 2 s (its guard), and a
//     worker cut off from etcd stops its agents within the lease TTL, stays
//     up, and joins again once the cut heals;
//   - the interrupted loops were charged an attempt; every worker ran
//     loops, each agent run on the worker the journal names;
//   - every ralph's output file is on the plan branch of the BARE
//     repository, as its passing iteration wrote it;
//   - another daemon names a new scheduler within 2× worker.lease_ttl_secs
//     of the scheduler's SIGKILL (measured and logged);
//   - no agent process is left once the daemons have stopped.
func TestClusterOfThreeDaemons(t *testing.T) {
	t.Parallel()
	needTool(t, "flock", "util-linux")
	const ttl = 4 // worker.lease_ttl_secs
	etcd := etcdtest.StartProcesses(t, 3, etcdtest.ProcOptions{
		// A SIGKILLed process loses nothing to a missing fsync (the page
		// cache outlives it); only a machine's crash would.
		NoFsync: true,
	})
	c := newCluster(t, etcd, ttl)
	// Deferred, not a Cleanup: it runs before the daemons are stopped.
	defer func() {
		if t.Failed() {
			c.explain()
		}
	}()
	began := time.Now()
	for i := range c.nodes {
		c.start(i)
	}

	var plan loop.Loop
	mustJSON(t, ok(t, c.nodes[0].r.dir, "plan", "Build the cluster widget", "--json"), &plan)

	// 1. A fifth of the ralphs done: SIGKILL a worker that runs loops.
	c.waitRalphs(10, 90*time.Second)
	victim := c.busyWorker()
	t.Logf("%s killed (SIGKILL) while running loops, %s into the run", victim.name, time.Since(began).Round(time.Second))
	killed := c.kill(victim)
	c.waitGone(victim, 6*ttl*time.Second)
	t.Logf("%s left the cluster %s after its SIGKILL", victim.name, time.Since(killed).Round(100*time.Millisecond))
	c.start(slices.Index(c.nodes, victim)) // back on its own home: the name is free again

	// 2. Cut a worker off from etcd while its agents run: it must stop
	// them before its lease can have run out, stay up, and come back.
	c.waitRalphs(18, 90*time.Second)
	cut := c.busyWorker()
	waitFor(t, 20*time.Second, "an agent of "+cut.name+" to run", func() bool { return len(c.agents(cut)) > 0 })
	t.Logf("%s cut off from etcd with %d agent processes running, %s into the run", cut.name, len(c.agents(cut)), time.Since(began).Round(time.Second))
	c.setCut(cut, true)
	cutAt := time.Now()
	c.event(cut, cutAt, ttl*time.Second, "cut off from etcd")
	waitFor(t, 3*ttl*time.Second, "the agents of "+cut.name+" to stop once it is cut off", func() bool { return len(c.agents(cut)) == 0 })
	fenced := time.Since(cutAt)
	t.Logf("%s stopped its agents %s after it was cut off (lease TTL %d s)", cut.name, fenced.Round(100*time.Millisecond), ttl)
	if fenced > ttl*time.Second {
		t.Errorf("%s stopped its agents %s after it was cut off from etcd, want within the lease TTL (%d s): its loops may have been given to another worker meanwhile", cut.name, fenced.Round(100*time.Millisecond), ttl)
	}
	c.waitGone(cut, 6*ttl*time.Second)
	if cut.d.exited() {
		t.Fatalf("%s exited while cut off from etcd: %v\n%s", cut.name, cut.d.cmd.ProcessState, tail(cut.d.output(), 30))
	}
	c.setCut(cut, false)
	healed := time.Now()
	waitEvery(t, 6*ttl*time.Second, quickPoll, cut.name+" to join the cluster again", func() bool {
		cl := c.cluster(c.live(), 5*time.Second)
		return slices.ContainsFunc(cl.Workers, func(w clusterWorker) bool { return w.Name == cut.name })
	})
	t.Logf("%s registered again %s after the cut was healed", cut.name, time.Since(healed).Round(100*time.Millisecond))

	// 3. SIGKILL the scheduler: another daemon must name a new one within
	// 2× TTL.
	c.waitRalphs(26, 90*time.Second)
	sched := c.scheduler(30 * time.Second)
	t.Logf("%s, the scheduler, killed (SIGKILL), %s into the run", sched.name, time.Since(began).Round(time.Second))
	killed = c.kill(sched)
	var next string
	waitEvery(t, 6*ttl*time.Second, quickPoll, "another daemon to name a new scheduler", func() bool {
		cl := c.cluster(c.live(), 5*time.Second)
		next = cl.Scheduler
		return next != "" && next != sched.name
	})
	failover := time.Since(killed)
	t.Logf("scheduler failover: %s named %s after the SIGKILL of %s (lease TTL %d s)", next, failover.Round(100*time.Millisecond), sched.name, ttl)
	if limit := 2 * ttl * time.Second; failover > limit {
		t.Errorf("scheduler failover took %s, want within 2× the lease TTL (%s)", failover.Round(100*time.Millisecond), limit)
	}

	// 4. The etcd leader goes away mid-run and comes back.
	leader := etcd.Leader()
	t.Logf("etcd member %s (the leader) killed (SIGKILL), %s into the run", etcd.Members[leader].Name, time.Since(began).Round(time.Second))
	etcd.Kill(leader)
	time.Sleep(2 * time.Second)
	etcd.Restart(leader)
	c.start(slices.Index(c.nodes, sched))

	waitEvery(t, 150*time.Second, slowPoll, "the 60 loops to complete", func() bool {
		st := c.status(c.live())
		return settled(st.Status) && st.Counts[loop.Complete] > 0
	})
	took := time.Since(began)
	loops := list(t, c.live().r)
	c.checkTree(loops)

	// The journal, read from etcd: one transition to complete per loop.
	evs := c.journal()
	completed := map[loop.ID]int{}
	lostMsgs := 0
	startedOn := map[string]string{} // "<loop> <iteration>" → the worker the journal names
	startRe := regexp.MustCompile(`\biteration (\d+) started on worker (\S+)`)
	for _, e := range evs {
		if e.Kind == loop.EventTransition && e.To == loop.Complete {
			completed[e.Loop]++
		}
		if strings.Contains(e.Message, "was lost") {
			lostMsgs++
		}
		if m := startRe.FindStringSubmatch(e.Message); m != nil {
			startedOn[string(e.Loop)+" "+m[1]] = strings.TrimRight(m[2], ".,;:)")
		}
	}
	charged := 0
	for _, l := range loops {
		if n := completed[l.ID]; n != 1 {
			t.Errorf("loop %s (%s %q): %d transitions to complete in the journal, want exactly 1", l.ID, l.Type, l.Title, n)
		}
		if l.Iteration > 1 {
			charged++
		}
	}

	c.checkKills()
	runs := c.runs()
	if b, _ := os.ReadFile(filepath.Join(c.shared, "overlap.log")); len(b) > 0 {
		t.Errorf("a loop ran on two workers at once (agent-side flock held by another run):\n%s", b)
	}
	byWorker, afterHeal := map[string]int{}, 0
	for _, r := range runs {
		byWorker[r.worker]++
		if r.worker == cut.name && r.started.After(healed) {
			afterHeal++
		}
		// The agent's LOOPR_WORKER is the worker the journal says ran it.
		if w := startedOn[fmt.Sprintf("%s %d", r.id, r.iteration)]; w != r.worker {
			t.Errorf("loop %s iteration %d: the agent ran on worker %q, the journal says %q", r.id, r.iteration, r.worker, w)
		}
	}
	// The runs a kill or the cut interrupted: none may have gone on past
	// the guard's second (a kill) or the lease TTL (the cut).
	interrupted, seen := 0, map[int]bool{}
	for _, e := range c.events {
		for i, r := range runs {
			if seen[i] || r.worker != e.worker || !r.started.Before(e.at) || (r.ended && r.endedAt.Before(e.at)) {
				continue
			}
			seen[i] = true
			interrupted++
			if r.ended && r.endedAt.After(e.at.Add(e.slack)) {
				t.Errorf("the agent of loop %s (iteration %d) on %s ended %s after %s was %s: it should have been stopped within %s",
					r.id, r.iteration, r.worker, r.endedAt.Sub(e.at).Round(100*time.Millisecond), e.worker, e.what, e.slack)
			}
		}
	}
	for _, n := range c.nodes {
		if byWorker[n.name] == 0 {
			t.Errorf("worker %s ran no agent (runs by worker: %v)", n.name, byWorker)
		}
	}
	if afterHeal == 0 {
		t.Errorf("%s ran no agent after it was reconnected to etcd", cut.name)
	}
	if interrupted == 0 || lostMsgs == 0 || charged == 0 {
		t.Errorf("the kills interrupted %d agent runs, the journal says %d times that a worker was lost, %d loops were charged an attempt; want each > 0 (a SIGKILLed worker was running loops)", interrupted, lostMsgs, charged)
	}

	// Every ralph's work is on the plan branch of the bare repository.
	branch := gitflow.BranchName(plan.ID, plan.Title)
	files := strings.Fields(gitOut(t, c.bare, "ls-tree", "-r", "--name-only", branch, "out/"))
	ralphs := 0
	for _, l := range loops {
		if l.Type != loop.Ralph {
			continue
		}
		ralphs++
		f := "out/" + string(l.ID) + ".txt"
		if !slices.Contains(files, f) {
			t.Errorf("%s (ralph %q) is not on %s in the bare repository", f, l.Title, branch)
			continue
		}
		// The work merged is that of the iteration recorded as passed,
		// never that of a run fenced out with its worker.
		w := startedOn[fmt.Sprintf("%s %d", l.ID, l.Iteration)]
		if body, want := gitOut(t, c.bare, "show", branch+":"+f), fmt.Sprintf("done by %s on %s, iteration %d", l.ID, w, l.Iteration); body != want {
			t.Errorf("%s on %s: %q, want %q (the iteration that passed)", f, branch, body, want)
		}
	}
	if len(files) != ralphs {
		t.Errorf("%d files under out/ on %s, want one per ralph (%d): %q", len(files), branch, ralphs, files)
	}

	for _, n := range c.nodes {
		if code := n.d.stop(); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM:\n%s", n.name, code, tail(n.d.output(), 30))
		}
	}
	c.noAgentsLeft(3 * time.Second)
	t.Logf("%d loops complete in %s on 3 workers (agent runs by worker %v); %d runs interrupted by the kills and the cut, %d loops charged an attempt, %d 'worker lost' events; agents stopped %s after the cut; scheduler failover %s",
		len(loops), took.Round(time.Second), byWorker, interrupted, charged, lostMsgs, fenced.Round(100*time.Millisecond), failover.Round(100*time.Millisecond))
}

// cluster is the test's three "machines" and what they share.
type cluster struct {
	t         *testing.T
	ttl       int // worker.lease_ttl_secs
	etcd      *etcdtest.Processes
	prefix    string
	bare      string // the shared bare repository (git.remote origin)
	shared    string // the agents' shared directory: locks, runs.log, overlap.log
	nodes     []*clusterNode
	events    []clusterEvent // kills and cuts of workers, in order
	leftovers []func()       // kill's checks of the processes left
}

// clusterEvent is a worker killed or cut off: its agents running then
// must be gone within slack.
type clusterEvent struct {
	worker, what string
	at           time.Time
	slack        time.Duration
}

func (c *cluster) event(n *clusterNode, at time.Time, slack time.Duration, what string) {
	c.events = append(c.events, clusterEvent{worker: n.name, what: what, at: at, slack: slack})
}

// clusterNode is one worker: a clone of the bare repository (its
// workspace, with its home inside) and the daemon running there.
type clusterNode struct {
	name    string // worker.name
	r       repo
	d       *daemonProc
	starts  int    // daemons started here so far
	marker  string // LOOPR_E2E_NODE of the running daemon: <name>.<starts>.<run>
	proxies []*cutProxy
	cut     bool // its proxies to etcd are cut
}

// newCluster makes the bare repository (one commit: a README and a
// .gitignore for the per-clone loopr.yml) and three clones w1, w2, w3, each
// with a loopr.yml for the etcd store, git.remote origin and a worker
// section of its own.
func newCluster(t *testing.T, etcd *etcdtest.Processes, ttl int) *cluster {
	t.Helper()
	c := &cluster{t: t, etcd: etcd, ttl: ttl, prefix: "/loopr/cluster-test", shared: t.TempDir()}
	root := t.TempDir()
	c.bare = filepath.Join(root, "shared.git")
	gitOut(t, root, "init", "-q", "--bare", "-b", "main", c.bare)
	seed := filepath.Join(root, "seed")
	gitOut(t, root, "clone", "-q", c.bare, seed)
	for name, body := range map[string]string{"README.md": "# cluster e2e\n", ".gitignore": "/loopr.yml\n"} {
		if err := os.WriteFile(filepath.Join(seed, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, seed, "add", "-A")
	gitOut(t, seed, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "-m", "initial commit")
	gitOut(t, seed, "push", "-q", "origin", "main")

	argv, _ := json.Marshal([]string{"sh", abs(t, "testdata/clusteragent.sh"), c.shared, "5"})
	for i := 1; i <= 3; i++ {
		n := &clusterNode{name: fmt.Sprintf("w%d", i)}
		// The node reaches each etcd member through a proxy of its own,
		// which the test can cut: a network partition of this node alone.
		var urls []string
		for _, e := range etcd.Endpoints() {
			p := newCutProxy(t, strings.TrimPrefix(e, "http://"))
			n.proxies = append(n.proxies, p)
			urls = append(urls, "http://"+p.addr())
		}
		endpoints, _ := json.Marshal(urls)
		dir := filepath.Join(root, n.name)
		gitOut(t, root, "clone", "-q", c.bare, dir)
		n.r = repo{dir: dir, home: filepath.Join(dir, ".loopr"), logs: t.TempDir()}
		cfg := fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 20
  max_api_calls: 20
rate_limit:
  initial_backoff_secs: 1
  max_backoff_secs: 4
  recovery_period_secs: 0
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  preset: command
  command: %s
  timeout_secs: 60
loops:
  plan: {require_approval: false, max_iterations: 5}
  spec: {max_iterations: 5}
  phase: {max_iterations: 5}
  ralph: {max_iterations: 5, validate: [], conflict_group: ""}
git:
  worktrees: true
  remote: origin
storage:
  disk_quota_min_gb: 0
store:
  backend: etcd
  etcd:
    endpoints: %s
    prefix: %s
worker:
  name: %s
  max_loops: 3
  lease_ttl_secs: %d
`, argv, endpoints, c.prefix, n.name, ttl)
		if err := os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	return c
}

// start starts node i's daemon (again, after a kill). LOOPR_E2E_CLUSTER marks
// every process the cluster's daemons start, LOOPR_E2E_NODE those of this one.
func (c *cluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	n.starts++
	// The shared directory is this run's own: another run of the test on
	// the machine (another worktree) has other markers.
	n.marker = fmt.Sprintf("%s.%d.%s", n.name, n.starts, filepath.Base(c.shared))
	n.d = startDaemonEnv(c.t, n.r, "LOOPR_E2E_CLUSTER="+c.shared, "LOOPR_E2E_NODE="+n.marker)
}

// kill kills a node's daemon with SIGKILL, as a lost machine would, and
// returns when. In the background it checks that the processes the
// daemon started (agents, its guard) are gone within 2 s — its guard
// (loopr _guard) kills them, so no agent of a dead worker runs on while
// its loop is given to another; checkKills reports what it found.
func (c *cluster) kill(n *clusterNode) time.Time {
	c.t.Helper()
	n.d.crash(c.t)
	at := time.Now()
	c.event(n, at, time.Second, "killed")
	marker, left := n.marker, make(chan []string, 1)
	go func() { left <- c.processes("LOOPR_E2E_NODE="+marker, 2*time.Second) }()
	c.leftovers = append(c.leftovers, func() {
		if l := <-left; len(l) > 0 {
			c.t.Errorf("2 s after the SIGKILL of %s, %d processes it started still ran:\n%s", n.name, len(l), strings.Join(l, "\n"))
		}
	})
	return at
}

// checkKills reports the processes found alive 2 s after each kill.
func (c *cluster) checkKills() {
	c.t.Helper()
	for _, f := range c.leftovers {
		f()
	}
}

// live is the first node whose daemon runs and reaches etcd.
func (c *cluster) live() *clusterNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.d != nil && !n.d.exited() && !n.cut {
			return n
		}
	}
	c.t.Fatal("no daemon of the cluster is running")
	return nil
}

func (c *cluster) node(name string) *clusterNode {
	c.t.Helper()
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no worker named %q in the cluster", name)
	return nil
}

// clusterStatus is `loopr status --json` with the cluster section of an
// etcd store (docs/several-machines.md), decoded from the JSON: the test
// holds the daemon to the documented fields, not to a Go type.
type clusterStatus struct {
	api.Status
	Cluster *clusterInfo `json:"cluster"`
}

type clusterInfo struct {
	Worker       string          `json:"worker"`
	Scheduler    string          `json:"scheduler"`
	LeaseTTLSecs int             `json:"lease_ttl_secs"`
	Workers      []clusterWorker `json:"workers"`
}

type clusterWorker struct {
	Name      string   `json:"name"`
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	Home      string   `json:"home"`
	MaxLoops  int      `json:"max_loops"`
	Labels    []string `json:"labels"`
	Scheduler bool     `json:"scheduler"`
	Running   int      `json:"running"`
}

// status is `loopr status --json` on node n, which must answer from its
// daemon.
func (c *cluster) status(n *clusterNode) clusterStatus {
	c.t.Helper()
	var st clusterStatus
	mustJSON(c.t, ok(c.t, n.r.dir, "status", "--json"), &st)
	if !st.Daemon {
		c.t.Fatalf("loopr status on %s: no daemon answered", n.name)
	}
	return st
}

// cluster is node n's cluster section, waiting up to timeout for it to
// appear.
func (c *cluster) cluster(n *clusterNode, timeout time.Duration) clusterInfo {
	c.t.Helper()
	var cl *clusterInfo
	waitFor(c.t, timeout, "the cluster section of loopr status --json on "+n.name, func() bool {
		cl = c.status(n).Cluster
		return cl != nil
	})
	if cl.Worker != n.name {
		c.t.Fatalf("loopr status on %s says it is worker %q", n.name, cl.Worker)
	}
	if cl.LeaseTTLSecs != c.ttl {
		c.t.Fatalf("loopr status on %s: lease_ttl_secs %d, want worker.lease_ttl_secs %d", n.name, cl.LeaseTTLSecs, c.ttl)
	}
	for _, w := range cl.Workers {
		if w.MaxLoops != 3 || w.Scheduler != (w.Name == cl.Scheduler) {
			c.t.Fatalf("loopr status on %s lists worker %+v (scheduler %q); want max_loops 3 and the scheduler marked", n.name, w, cl.Scheduler)
		}
	}
	return *cl
}

// scheduler is the node a live daemon names as the scheduler.
func (c *cluster) scheduler(timeout time.Duration) *clusterNode {
	c.t.Helper()
	var name string
	waitEvery(c.t, timeout, slowPoll, "a scheduler to be elected", func() bool {
		name = c.cluster(c.live(), 5*time.Second).Scheduler
		return name != ""
	})
	return c.node(name)
}

// busyWorker waits for a worker other than the scheduler to run loops,
// and returns it.
func (c *cluster) busyWorker() *clusterNode {
	c.t.Helper()
	var busy *clusterNode
	waitEvery(c.t, 30*time.Second, slowPoll, "a worker other than the scheduler to run loops", func() bool {
		cl := c.cluster(c.live(), 5*time.Second)
		for _, w := range cl.Workers {
			if w.Name != cl.Scheduler && w.Running > 0 && !c.node(w.Name).cut {
				busy = c.node(w.Name)
				return true
			}
		}
		return false
	})
	return busy
}

// waitGone waits until the workers a live daemon lists no longer include
// n: its session's lease has run out.
func (c *cluster) waitGone(n *clusterNode, timeout time.Duration) {
	c.t.Helper()
	waitEvery(c.t, timeout, quickPoll, n.name+" to leave the cluster", func() bool {
		cl := c.cluster(c.live(), 5*time.Second)
		return !slices.ContainsFunc(cl.Workers, func(w clusterWorker) bool { return w.Name == n.name })
	})
}

// setCut cuts node n off from etcd (every connection of its proxies
// dropped, new ones held unanswered) or heals the cut.
func (c *cluster) setCut(n *clusterNode, cut bool) {
	n.cut = cut
	for _, p := range n.proxies {
		p.setCut(cut)
	}
}

// agents are the agent processes of node n's daemon: the processes with
// its marker other than loopr itself (the daemon, its guard) and git.
func (c *cluster) agents(n *clusterNode) []string {
	var out []string
	for _, p := range c.processes("LOOPR_E2E_NODE="+n.marker, 0) {
		argv := strings.Fields(p)
		if len(argv) > 1 && argv[1] != bin && filepath.Base(argv[1]) != "git" {
			out = append(out, p)
		}
	}
	return out
}

// waitRalphs waits until n ralph loops are complete.
func (c *cluster) waitRalphs(n int, timeout time.Duration) {
	c.t.Helper()
	waitEvery(c.t, timeout, slowPoll, fmt.Sprintf("%d ralph loops to complete", n), func() bool {
		done := 0
		for _, l := range list(c.t, c.live().r) {
			if l.Type == loop.Ralph && l.Status == loop.Complete {
				done++
			}
		}
		return done >= n
	})
}

// checkTree asserts the 60-loop tree of clusteragent.sh: 1 plan, 3 specs,
// 9 phases, 47 ralphs, all complete.
func (c *cluster) checkTree(loops []loop.Loop) {
	c.t.Helper()
	byType := map[string]int{}
	for _, l := range loops {
		byType[l.Type]++
		if l.Status != loop.Complete {
			c.t.Errorf("loop %s (%s %q) is %s, want complete (reason %q)", l.ID, l.Type, l.Title, l.Status, l.Reason)
		}
	}
	want := map[string]int{loop.Plan: 1, loop.Spec: 3, loop.Phase: 9, loop.Ralph: 47}
	for typ, n := range want {
		if byType[typ] != n {
			c.t.Errorf("%d %s loops, want %d", byType[typ], typ, n)
		}
	}
	if len(loops) != 60 {
		c.t.Fatalf("%d loops, want the tree of 60:\n%s", len(loops), describe(loops))
	}
}

// journal reads every event of the store from etcd.
func (c *cluster) journal() []loop.Event {
	c.t.Helper()
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: c.etcd.Endpoints(), Prefix: c.prefix}, store.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	defer s.Close()
	var evs []loop.Event
	if err := s.View(func(tx *store.Tx) (err error) { evs, err = tx.EventsSince(0, 0); return err }); err != nil {
		c.t.Fatal(err)
	}
	return evs
}

// clusterRun is one agent run of runs.log.
type clusterRun struct {
	id, worker       string
	iteration        int
	started, endedAt time.Time
	ended            bool
}

// runs parses the agents' run log: one run per start line, ended when
// the same pid wrote its end line.
func (c *cluster) runs() []clusterRun {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.shared, "runs.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	var runs []clusterRun
	at := map[string]int{} // pid → index in runs
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line) // id worker iteration start|end unix-ns pid
		if len(f) != 6 {
			c.t.Fatalf("runs.log: malformed line %q", line)
		}
		it, _ := strconv.Atoi(f[2])
		ns, _ := strconv.ParseInt(f[4], 10, 64)
		switch f[3] {
		case "start":
			at[f[5]] = len(runs)
			runs = append(runs, clusterRun{id: f[0], worker: f[1], iteration: it, started: time.Unix(0, ns)})
		case "end":
			if i, ok := at[f[5]]; ok {
				runs[i].ended, runs[i].endedAt = true, time.Unix(0, ns)
			}
		}
	}
	return runs
}

// noAgentsLeft fails the test if any process started by the cluster's
// daemons (marked by LOOPR_E2E_CLUSTER in its environment) is still alive
// after grace.
func (c *cluster) noAgentsLeft(grace time.Duration) {
	c.t.Helper()
	if left := c.processes("LOOPR_E2E_CLUSTER="+c.shared, grace); len(left) > 0 {
		c.t.Errorf("%d processes of the cluster's daemons still run after every daemon stopped:\n%s", len(left), strings.Join(left, "\n"))
	}
}

// processes waits up to grace for every process with env (NAME=value) in
// its environment to be gone, and returns those left ("pid argv").
func (c *cluster) processes(env string, grace time.Duration) []string {
	var left []string
	deadline := time.Now().Add(grace)
	for {
		left = left[:0]
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "environ"))
			if err != nil || !slices.Contains(strings.Split(string(b), "\x00"), env) {
				continue
			}
			if st, _ := os.ReadFile(filepath.Join(d, "stat")); strings.Contains(string(st), ") Z ") {
				continue // a zombie has exited; its parent has yet to reap it
			}
			cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
			left = append(left, filepath.Base(d)+" "+strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " "))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(poll)
	}
}

// explain logs what the next person needs to see why the test failed:
// each daemon's last log lines, the agents' run log, the loops. With
// LOOPR_CLUSTER_KEEP=DIR it also copies every daemon's log and the
// agents' shared directory there.
func (c *cluster) explain() {
	if keep := os.Getenv("LOOPR_CLUSTER_KEEP"); keep != "" {
		dirs := []string{c.shared}
		for _, n := range c.nodes {
			dst := filepath.Join(keep, n.name)
			_ = os.MkdirAll(dst, 0o755)
			if out, err := exec.Command("cp", "-r", n.r.logs+"/.", dst).CombinedOutput(); err != nil {
				c.t.Logf("keep %s: %v %s", n.name, err, out)
			}
		}
		for _, m := range c.etcd.Members {
			dirs = append(dirs, m.Log)
		}
		if out, err := exec.Command("cp", append(append([]string{"-r"}, dirs...), keep)...).CombinedOutput(); err != nil {
			c.t.Logf("keep: %v %s", err, out)
		}
		c.t.Logf("daemon logs, runs.log and etcd logs copied to %s", keep)
	}
	for _, n := range c.nodes {
		if n.d != nil {
			c.t.Logf("daemon %s (%s), last lines of %s:\n%s", n.name, n.r.dir, n.d.log, tail(n.d.output(), 40))
		}
	}
	b, _ := os.ReadFile(filepath.Join(c.shared, "runs.log"))
	c.t.Logf("runs.log, last lines:\n%s", tail(string(b), 60))
	for _, n := range c.nodes {
		if n.d != nil && !n.d.exited() {
			if r := run(c.t, n.r.dir, "", "list"); r.code == 0 {
				c.t.Logf("loopr list on %s:\n%s", n.name, r.stdout)
			}
			if r := run(c.t, n.r.dir, "", "status"); r.code == 0 {
				c.t.Logf("loopr status on %s:\n%s", n.name, r.stdout)
			}
			break
		}
	}
}

// gitOut runs git in dir and returns its stdout, trimmed.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// needTool skips the test when a command it needs is missing, but fails
// it under CI (.ci/run installs pkg).
func needTool(t *testing.T, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found on PATH: .ci/run installs %s; CI must run this test", name, pkg)
		}
		t.Skipf("%s not found on PATH (install %s to run this test)", name, pkg)
	}
}

// cutProxy forwards TCP connections from a port of 127.0.0.1 to target
// until it is cut: then no byte goes through, either way, on any
// connection, old or new — they stay open, unanswered, as over a lost
// route — until it is healed and the bytes held flow again.
type cutProxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed when the test ends
	mu     sync.Mutex
	gate   chan struct{} // closed while traffic flows
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, done: make(chan struct{}), gate: make(chan struct{}), conns: map[net.Conn]bool{}}
	close(p.gate)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		close(p.done)
		p.mu.Lock()
		defer p.mu.Unlock()
		for c := range p.conns {
			c.Close()
		}
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// open waits until traffic may flow; false when the test is over.
func (p *cutProxy) open() bool {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	select {
	case <-gate:
		return true
	case <-p.done:
		return false
	}
}

func (p *cutProxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *cutProxy) handle(c net.Conn) {
	p.track(c, true)
	defer p.track(c, false)
	defer c.Close()
	if !p.open() {
		return
	}
	d, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(d, true)
	defer p.track(d, false)
	defer d.Close()
	go p.pipe(d, c)
	p.pipe(c, d)
}

// pipe copies src to dst, each chunk only while the proxy is not cut,
// and closes both at the end.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.open() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// setCut cuts the proxy or heals it.
func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate: // open
		if cut {
			p.gate = make(chan struct{})
		}
	default: // cut
		if !cut {
			close(p.gate)
		}
	}
}

// quickPoll paces waits whose duration is measured.
func quickPoll() time.Duration { return poll }
