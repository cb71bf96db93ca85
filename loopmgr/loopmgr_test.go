package loopmgr

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// fakeRunner answers each iteration with a function of the job. It is a
// hand-written fake for unit tests; the e2e tests run real agents.
type fakeRunner struct {
	mu    sync.Mutex
	calls []runner.Job
	fn    func(ctx context.Context, j runner.Job) runner.Result
}

func (f *fakeRunner) Run(ctx context.Context, j runner.Job) runner.Result {
	f.mu.Lock()
	f.calls = append(f.calls, j)
	f.mu.Unlock()
	return f.fn(ctx, j)
}

func (f *fakeRunner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

type harness struct {
	t    *testing.T
	svc  *control.Service
	mgr  *Manager
	st   *store.Store
	cfg  *config.Config
	home string
	fake *fakeRunner
	stop context.CancelFunc
	done chan error
}

// limit returns the persisted rate-limit state of an agent profile.
func (h *harness) limit(profile string) ratelimit.State {
	var m map[string]ratelimit.State
	h.st.View(func(tx *store.Tx) (err error) { m, err = control.LoadLimits(tx); return err })
	return m[profile]
}

// newHarness opens a real store in a temp home. The manager is built but not run.
func newHarness(t *testing.T, edit func(*config.Config), fn func(context.Context, runner.Job) runner.Result) *harness {
	t.Helper()
	home := t.TempDir()
	st, err := store.Open(filepath.Join(home, "loopr.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	cfg.Retry.BackoffBaseSecs = 1
	cfg.Retry.BackoffMaxSecs = 1
	if edit != nil {
		edit(cfg)
	}
	paths := workspace.Paths{Workspace: home, Home: home}
	svc := control.New(st, paths, func() *config.Config { return cfg }, time.Now)
	h := &harness{t: t, svc: svc, st: st, cfg: cfg, home: home, fake: &fakeRunner{fn: fn}}
	h.mgr = New(Options{Service: svc, Runner: h.fake, Owner: "test"})
	t.Cleanup(func() {
		h.shutdown()
		st.Close()
	})
	return h
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.mgr.Run(ctx) }()
}

func (h *harness) shutdown() {
	if h.stop != nil {
		h.stop()
		if err := <-h.done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
		h.stop = nil
	}
}

func (h *harness) create(req api.CreateRequest) loop.Loop {
	h.t.Helper()
	l, err := h.svc.Create(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mgr.Wake()
	return l
}

func (h *harness) get(id string) loop.Loop {
	h.t.Helper()
	l, err := h.svc.Get(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// waitFor polls cond (state lives in the store, changed by the manager's
// goroutine) until it holds or the deadline passes.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(testslack.Scale(10 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) status(id string) loop.Status { return h.get(id).Status }

// writeArtifact makes the runner result of a plan/spec/phase that passed.
func writeArtifact(t *testing.T, j runner.Job, body string) runner.Result {
	t.Helper()
	path := runner.ArtifactPath(j.Home, j.Loop)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := artifact.Parse(j.Loop.Type, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return runner.Result{Outcome: runner.Passed, Artifact: path, Doc: &doc}
}

const phaseArtifact = "# Phase: P\n\n## Tasks\n\n### Task 1: one\n\nDo one.\n\n### Task 2: two\n\nDo two.\n"

func TestPassSpawnsChildrenInOrder(t *testing.T) {
	t.Parallel()
	var h *harness
	h = newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		if j.Loop.Type == loop.Phase {
			return writeArtifact(t, j, phaseArtifact)
		}
		return runner.Result{Outcome: runner.Passed}
	})
	h.start()
	phase := h.create(api.CreateRequest{Type: loop.Phase, Task: "P"})
	h.waitFor("phase and its tasks complete", func() bool {
		kids, _ := h.st.List(store.Filter{Parent: phase.ID})
		if len(kids) != 2 || h.status(phase.ID) != loop.Complete {
			return false
		}
		for _, k := range kids {
			if k.Status != loop.Complete {
				return false
			}
		}
		return true
	})
	kids, _ := h.st.List(store.Filter{Parent: phase.ID})
	p := h.get(phase.ID)
	for i, k := range kids {
		if k.Type != loop.Ralph || k.Depth != 1 || k.TriggeredBy != p.Artifact || k.Title != []string{"one", "two"}[i] {
			t.Errorf("child %d = %+v", i, k)
		}
		if !strings.HasPrefix(k.Task, "### Task") {
			t.Errorf("child task %q lacks its heading", k.Task)
		}
	}
}

func TestFailedIterationBacksOffThenParks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		return runner.Result{Outcome: runner.Failed, Reason: "validate exited 1", Feedback: "FAIL: TestX"}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 2})
	h.waitFor("iteration 2 pending", func() bool { g := h.get(l.ID); return g.Iteration == 2 })
	got := h.get(l.ID)
	if got.Status != loop.Pending && got.Status != loop.Running {
		t.Fatalf("after one failure: %s", got.Status)
	}
	if !strings.Contains(got.Feedback, "FAIL: TestX") || !strings.Contains(got.Feedback, "validate exited 1") {
		t.Errorf("feedback = %q", got.Feedback)
	}
	if got.Status == loop.Pending && got.RunnableAt.Sub(got.UpdatedAt) != time.Second {
		t.Errorf("backoff = %s, want 1s (retry.backoff_base_secs)", got.RunnableAt.Sub(got.UpdatedAt))
	}
	h.waitFor("parked", func() bool { return h.status(l.ID) == loop.Failed })
	got = h.get(l.ID)
	if !strings.Contains(got.Reason, "max_iterations 2 reached") {
		t.Errorf("reason = %q", got.Reason)
	}
	n := h.fake.count()
	h.mgr.Wake()
	time.Sleep(50 * time.Millisecond)
	if h.fake.count() != n {
		t.Error("a parked loop was run again")
	}
}

func TestRateLimitCostsNoIteration(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hit := false
	h := newHarness(t, func(c *config.Config) { c.RateLimit.InitialBackoffSecs = 1; c.RateLimit.RecoveryPeriodSecs = 1 },
		func(_ context.Context, j runner.Job) runner.Result {
			mu.Lock()
			defer mu.Unlock()
			if !hit {
				hit = true
				return runner.Result{Outcome: runner.RateLimited, RateLimitAfter: 2 * time.Second}
			}
			return runner.Result{Outcome: runner.Passed}
		})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	h.waitFor("rate limit recorded", func() bool { return h.limit(config.DefaultProfile).Hits == 1 })
	st := h.limit(config.DefaultProfile)
	if d := st.BackoffUntil.Sub(st.LastHit); d < 2*time.Second {
		t.Errorf("backoff %s, want retry-after 2s to win over initial 1s", d)
	}
	h.waitFor("complete", func() bool { return h.status(l.ID) == loop.Complete })
	if got := h.get(l.ID); got.Iteration != 1 {
		t.Errorf("iteration = %d after a 429, want 1 (no iteration spent)", got.Iteration)
	}
	if time.Since(st.LastHit) < 2*time.Second-50*time.Millisecond {
		t.Error("the loop restarted before the backoff ended")
	}
}

func TestCancelWhileRunningDropsResult(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	h := newHarness(t, nil, func(ctx context.Context, j runner.Job) runner.Result {
		close(started)
		<-ctx.Done()
		return runner.Result{Outcome: runner.Cancelled}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	<-started
	res, err := h.svc.Act(l.ID, api.ActionCancel, api.ActionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h.mgr.Stop(res.Affected)
	h.waitFor("agent stopped", func() bool { return len(h.mgr.Running()) == 0 })
	if got := h.get(l.ID); got.Status != loop.Cancelled || got.Iteration != 1 {
		t.Errorf("after cancel: %s iteration %d", got.Status, got.Iteration)
	}
}

func TestShutdownRequeuesAtSameIteration(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	h := newHarness(t, nil, func(ctx context.Context, j runner.Job) runner.Result {
		close(started)
		<-ctx.Done()
		return runner.Result{Outcome: runner.Cancelled}
	})
	h.start()
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x"})
	<-started
	h.shutdown()
	got := h.get(l.ID)
	if got.Status != loop.Pending || got.Iteration != 1 || got.Lease != nil {
		t.Errorf("after clean stop: %s iteration %d lease %v; want pending, 1, none", got.Status, got.Iteration, got.Lease)
	}
}

func TestPlanAwaitsApproval(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		return writeArtifact(t, j, "# Plan: P\n\n## Specs\n\n### Spec 1: S\n\nBody.\n")
	})
	h.start()
	p := h.create(api.CreateRequest{Type: loop.Plan, Task: "P"})
	h.waitFor("awaiting approval", func() bool { return h.status(p.ID) == loop.AwaitingApproval })
	if kids, _ := h.st.List(store.Filter{Parent: p.ID}); len(kids) != 0 {
		t.Fatalf("children before approval: %d", len(kids))
	}
	res, err := h.svc.Act(p.ID, api.ActionApprove, api.ActionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loop.Status != loop.Complete || len(res.Affected) != 1 {
		t.Errorf("approve: %s, %d children", res.Loop.Status, len(res.Affected))
	}
}

// TestRecoverKillsStaleAgentAndCountsAttempt: a loop left running by a
// crashed daemon, with a live agent process group recorded in its lease.
func TestRecoverKillsStaleAgentAndCountsAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		return runner.Result{Outcome: runner.Passed}
	})
	agent := exec.Command("sleep", "60")
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- agent.Wait() }()
	l, err := h.svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", MaxIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	err = h.st.Update(func(tx *store.Tx) error {
		cur, _ := tx.Get(l.ID)
		return control.Move(tx, cur, loop.Running, now, "iteration 1 started", func(n *loop.Loop) {
			n.Lease = &loop.Lease{Owner: "crashed", ExpiresAt: now.Add(time.Hour), PID: agent.Process.Pid, PIDStart: procStart(agent.Process.Pid)}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	select {
	case <-waited:
	case <-time.After(testslack.Scale(5 * time.Second)):
		agent.Process.Kill()
		t.Fatal("the stale agent was not killed on recovery")
	}
	h.waitFor("complete after recovery", func() bool { return h.status(l.ID) == loop.Complete })
	if got := h.get(l.ID); got.Iteration != 2 {
		t.Errorf("iteration = %d, want 2: the interrupted attempt counts once", got.Iteration)
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	c := config.Default()
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 6: 60 * time.Second, 50: 60 * time.Second} {
		if got := c.Retry.Delay(n); got != want {
			t.Errorf("Retry.Delay(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestPromptFileResolution(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(context.Context, runner.Job) runner.Result { return runner.Result{Outcome: runner.Passed} })
	if got := h.mgr.promptFile("ralph", ""); got != "" {
		t.Errorf("no override: %q, want built-in", got)
	}
	own := filepath.Join(h.home, "prompts", "ralph.md")
	os.MkdirAll(filepath.Dir(own), 0o755)
	os.WriteFile(own, []byte("{{.Task}}"), 0o644)
	if got := h.mgr.promptFile("ralph", ""); got != own {
		t.Errorf("home override: %q, want %q", got, own)
	}
	if got := h.mgr.promptFile("ralph", "p/r.md"); got != filepath.Join(h.home, "p/r.md") {
		t.Errorf("configured relative: %q", got)
	}
	if got := h.mgr.promptFile("ralph", "/abs/r.md"); got != "/abs/r.md" {
		t.Errorf("configured absolute: %q", got)
	}
}
