package loopmgr

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// trivialAgent writes a one-task phase artifact for phase loops and does
// nothing for others: the work is loopr's, not the agent's.
const trivialAgent = `#!/bin/sh
cat >/dev/null
if [ "$LOOPR_LOOP_TYPE" = phase ]; then
  printf '# Phase: p\n\n## Tasks\n\n### Task 1: t\n\nDo it.\n' > "$LOOPR_ARTIFACT"
fi
`

// BenchmarkDispatchLatency measures the time from a parent's completion
// (its transaction committed) to its first child's agent process running,
// with the real store (fsync on), the real runner and a trivial agent,
// worktrees off. The poll interval is 1 s, so anything near it would mean
// the manager waited for a tick instead of waking on the event. Next to it,
// in the same run, the floor: starting the same agent process directly.
// Target: p99 ≤ 20 ms.
func BenchmarkDispatchLatency(b *testing.B) { dispatchLatency(b, false, false, false) }

// BenchmarkDispatchLatencyEtcd is BenchmarkDispatchLatency with the store
// on a real etcd (embedded on 127.0.0.1, fsync on): every transition is an
// etcd transaction, and the manager's index follows the store through an
// etcd watch. Target: p99 ≤ 50 ms.
func BenchmarkDispatchLatencyEtcd(b *testing.B) { dispatchLatency(b, false, true, false) }

// BenchmarkDispatchLatencyEtcdWorker is BenchmarkDispatchLatencyEtcd with
// the manager a worker of a cluster (Options.Cluster): the scheduler
// assigns the child to a worker (a listing of the workers and the
// assignment's transaction), and the worker starts it when its watch of
// the store delivers the assignment (and a read of the loop's lease key).
// Target: p99 ≤ 50 ms.
func BenchmarkDispatchLatencyEtcdWorker(b *testing.B) { dispatchLatency(b, false, true, true) }

// BenchmarkDispatchLatencyWorktrees is the same with git worktrees on, in
// a real repository: the parent's worktree is removed and the child's
// branch and worktree made between the two, as in a daemon with git.
func BenchmarkDispatchLatencyWorktrees(b *testing.B) { dispatchLatency(b, true, false, false) }

func dispatchLatency(b *testing.B, worktrees, onEtcd, worker bool) {
	home := b.TempDir()
	agent := filepath.Join(home, "agent.sh")
	if err := os.WriteFile(agent, []byte(trivialAgent), 0o755); err != nil {
		b.Fatal(err)
	}
	// The workspace is not the home (a daemon's home is <workspace>/.loopr
	// or elsewhere): with ws == home the stall watch of every agent would
	// walk the home's loops/ directory, growing with each sample.
	ws := b.TempDir()
	var git *gitflow.Repo
	if worktrees {
		ws = b.TempDir()
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
			{"-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false", "commit", "-q", "--allow-empty", "-m", "init"}} {
			if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
				b.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		var err error
		if git, err = gitflow.Open(ws, filepath.Join(ws, ".loopr"), nil); err != nil {
			b.Fatal(err)
		}
		home = filepath.Join(ws, ".loopr")
	}
	spawn := spawnFloor(b, agent)
	var st *store.Store
	var err error
	if onEtcd {
		srv := etcdtest.Start(b, etcdtest.Options{})
		st, err = store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/bench"}, store.Options{})
	} else {
		st, err = store.Open(filepath.Join(home, "loopr.db"), store.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	cfg.Agent.Command = []string{"sh", agent}
	cfg.Git.Worktrees = worktrees
	ralph := cfg.Loops[loop.Ralph]
	ralph.Validate = nil
	// The agent changes nothing: with require_changes (on for ralph by
	// default) each child would fail and start again, and that second
	// start be taken for the next sample's.
	ralph.RequireChanges = false
	cfg.Loops[loop.Ralph] = ralph
	svc := control.New(st, workspace.Paths{Workspace: ws, Home: home}, func() *config.Config { return cfg }, time.Now)

	var mu sync.Mutex
	finished := map[string]time.Time{}
	started := make(chan [2]string, 16) // child id, parent id
	var mgr *Manager
	run := &runner.Runner{OnAgentStart: func(id string, pid int) {
		mu.Lock()
		defer mu.Unlock()
		finished[id+"/agent"] = time.Now()
		mgr.RecordPID(id, pid)
		l, err := svc.Get(id)
		if err == nil && l.Parent != "" {
			started <- [2]string{id, l.Parent}
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var w *cluster.Worker
	if worker {
		w, err = cluster.Register(ctx, cluster.Options{Store: st, TTL: 15 * time.Second,
			Info: cluster.WorkerInfo{Name: "bench", Host: "h", Home: home, Workspace: ws, MaxLoops: 10}})
		if err != nil {
			b.Fatal(err)
		}
		wdone := make(chan struct{})
		wctx, stopW := context.WithCancel(context.Background())
		go func() { _ = w.Run(wctx); close(wdone) }()
		defer func() { stopW(); <-wdone }() // after the manager stopped (deferred later, runs first)
		for !w.Scheduler() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	mgr = New(Options{Service: svc, Runner: run, Owner: "bench", Git: git, Cluster: w,
		OnFinish: func(id string, at time.Time) {
			mu.Lock()
			finished[id] = at
			mu.Unlock()
		}})
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	defer func() { cancel(); <-done }()

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		p, err := svc.Create(api.CreateRequest{Type: loop.Phase, Task: "p"})
		if err != nil {
			b.Fatal(err)
		}
		mgr.Wake()
		select {
		case ids := <-started:
			if ids[1] != p.ID {
				b.Fatalf("child of %s started, want a child of %s", ids[1], p.ID)
			}
			mu.Lock()
			lat = append(lat, finished[ids[0]+"/agent"].Sub(finished[p.ID]))
			mu.Unlock()
		case <-time.After(10 * time.Second):
			b.Fatal("child did not start within 10s")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(pct(0.50)), "p50-ms")
	b.ReportMetric(ms(pct(0.99)), "p99-ms")
	b.ReportMetric(ms(spawn), "spawn-p50-ms")
	b.ReportMetric(float64(pct(0.50))/float64(spawn), "x-spawn")
	b.ReportMetric(float64(cfg.PollInterval().Milliseconds()), "poll-ms")
}

// spawnFloor is the median time to start the trivial agent process
// directly (fork, exec, the shell running): what no scheduler can beat.
func spawnFloor(b *testing.B, agent string) time.Duration {
	b.Helper()
	var ds []time.Duration
	for range 30 {
		cmd := exec.Command("sh", agent)
		cmd.Stdin = strings.NewReader("")
		began := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(began))
		cmd.Wait()
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
