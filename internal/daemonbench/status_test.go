package daemonbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// The status benchmark's load: statusAgents agents at once, each writing a
// file on its loop's branch and sleeping statusAgentSecs; every pass is
// merged into the plan's branch. statusBatch loops per round keep the six
// busy for several seconds.
const (
	statusAgents    = 6
	statusBatch     = 8 * statusAgents
	statusAgentSecs = "1"
	statusPause     = 10 * time.Millisecond // between two status requests
	statusIdleReqs  = 200
)

// statusConfig runs the loops in git worktrees, six at a time.
var statusConfig = fmt.Sprintf(`scheduler: {poll_interval_secs: 1}
concurrency: {max_loops: %d, max_api_calls: %[1]d}
agent:
  command: ["sh", "-c", "cat >/dev/null; mkdir -p out; echo \"$LOOPR_LOOP_ID\" >\"out/$LOOPR_LOOP_ID.txt\"; sleep %s"]
  timeout_secs: 120
loops:
  ralph: {max_iterations: 2, validate: ["true"]}
git: {worktrees: true}
storage: {disk_quota_min_gb: 0}
retention: {days: 0}
`, statusAgents, statusAgentSecs)

// BenchmarkStatusUnderLoad: GET /v1/status (what `loopr status` asks)
// through the daemon's socket while six agents run and their passes are
// merged into the plan branch, next to the same requests on the same
// daemon idle, in the same run. Each round queues statusBatch loops and
// samples status from the moment six agents run until the queue is empty. Target:
// p99 ≤ 100 ms (status reads the store and the last preflight result; it
// waits for no tick and no git command).
func BenchmarkStatusUnderLoad(b *testing.B) {
	ws, plan, err := statusWorkspace()
	if err != nil {
		b.Fatal(err)
	}
	d, err := startDaemon(ws)
	if err != nil {
		b.Fatal(err)
	}
	defer d.stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, filepath.Join(home(ws), "loopr.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var idle, busy []time.Duration
	merges := 0
	for b.Loop() {
		for range statusIdleReqs {
			took, _, err := timeStatus(ctx, c)
			if err != nil {
				b.Fatal(err)
			}
			idle = append(idle, took)
			time.Sleep(statusPause)
		}
		round, n, err := loadRound(ctx, c, plan)
		if err != nil {
			b.Fatal(err)
		}
		busy = append(busy, round...)
		merges += n
	}
	p50, p99 := percentile(busy, 50), percentile(busy, 99)
	idle99 := percentile(idle, 99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(percentile(idle, 50)), "idle-p50-ms")
	b.ReportMetric(ms(idle99), "idle-p99-ms")
	b.ReportMetric(float64(p99)/float64(idle99), "x-idle")
	b.ReportMetric(float64(len(busy)), "requests")
	b.ReportMetric(float64(merges), "merges")
}

// loadRound queues statusBatch loops under plan and times status requests
// from when statusAgents of them run until none waits to start; it returns the times and how many loops
// passed (each merged into the plan branch) while they were taken.
func loadRound(ctx context.Context, c *client.Client, plan string) ([]time.Duration, int, error) {
	reqs := make([]api.CreateRequest, statusBatch)
	for i := range reqs {
		reqs[i] = api.CreateRequest{Type: loop.Ralph, Parent: plan, Title: fmt.Sprintf("Task %d", i)}
	}
	before, err := c.Status(ctx)
	if err != nil {
		return nil, 0, err
	}
	res, err := c.CreateBatch(ctx, reqs)
	if err != nil {
		return nil, 0, err
	}
	if res.Failed > 0 {
		return nil, 0, fmt.Errorf("batch: %d of %d refused", res.Failed, len(reqs))
	}
	var times []time.Duration
	var first, last api.Status
	deadline := time.Now().Add(5 * time.Minute)
wait:
	for time.Now().Before(deadline) {
		took, st, err := timeStatus(ctx, c)
		if err != nil {
			return nil, 0, err
		}
		switch {
		case st.Running >= statusAgents || times != nil && st.Counts[loop.Pending] > 0:
			if times == nil {
				first = st
			}
			times, last = append(times, took), st
		case times != nil:
			break wait // the queue is drained: fewer agents from now on
		}
		time.Sleep(statusPause)
	}
	if len(times) < 20 {
		return nil, 0, fmt.Errorf("only %d status requests while %d agents ran (counts %v)", len(times), statusAgents, last.Counts)
	}
	// Wait for the round to finish, every loop complete, before the next
	// idle sample.
	for time.Now().Before(deadline) {
		st, err := c.Status(ctx)
		if err != nil {
			return nil, 0, err
		}
		if done := st.Counts[loop.Complete] - before.Counts[loop.Complete]; done == statusBatch {
			return times, last.Counts[loop.Complete] - first.Counts[loop.Complete], nil
		}
		if bad := st.Counts[loop.Failed] + st.Counts[loop.NeedsHuman]; bad > 0 {
			return nil, 0, fmt.Errorf("%d loops failed or need a human (counts %v)", bad, st.Counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, 0, fmt.Errorf("round did not finish within 5 minutes")
}

// timeStatus times one status request.
func timeStatus(ctx context.Context, c *client.Client) (time.Duration, api.Status, error) {
	began := time.Now()
	st, err := c.Status(ctx)
	return time.Since(began), st, err
}

// statusWorkspace makes a git repository with statusConfig and a store
// holding one complete plan, whose branch the loops merge into; it
// returns the workspace and the plan's id.
func statusWorkspace() (string, string, error) {
	ws := filepath.Join(tmpRoot, "status")
	if err := os.MkdirAll(filepath.Join(ws, ".loopr"), 0o700); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(ws, "loopr.yml"), []byte(statusConfig), 0o644); err != nil {
		return "", "", err
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "loopr.yml"},
		{"-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	st, err := store.Open(filepath.Join(home(ws), "loopr.db"), store.Options{NoSync: true})
	if err != nil {
		return "", "", err
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	plan := loop.Loop{ID: fid("PL", 0), Type: loop.Plan, Status: loop.Complete, Title: "Status under load",
		Iteration: 1, MaxIterations: 3, CreatedAt: now, UpdatedAt: now, FinishedAt: now}
	return ws, plan.ID, st.Update(func(tx *store.Tx) error { return tx.Create(plan) })
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}
