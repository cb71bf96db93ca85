package daemon_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// scrape returns GET /metrics as series → value ("name{labels}" as the
// text format writes it).
func scrape(t *testing.T, d *testDaemon) map[string]float64 {
	t.Helper()
	hc := socketHTTP(d.paths.Socket())
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://loopr/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics Content-Type %q; want the Prometheus text format", ct)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// waitStatus waits until the loop's status is want.
func waitStatus(t *testing.T, d *testDaemon, id string, want loop.Status, within time.Duration) loop.Loop {
	t.Helper()
	deadline := time.Now().Add(testslack.Scale(within))
	for {
		l, err := d.c.Get(context.Background(), id)
		if err == nil && l.Status == want {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop %s: status %s after %s, want %s (err %v)", id, l.Status, within, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agentScript writes an executable shell script and returns its path.
func agentScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMetricsAndStats runs loops that pass, fail and hit a rate limit, and
// reads the counters, gauges and histograms back from /metrics and
// /v1/stats.
func TestMetricsAndStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Titles say what the agent does: "fail" always fails, "limit" is rate
	// limited on its first run, anything else passes.
	agent := agentScript(t, `title=$(cat "$LOOPR_HOME/title-$LOOPR_LOOP_ID" 2>/dev/null)
case "$title" in
fail) exit 1 ;;
limit) if [ ! -e "$LOOPR_HOME/limited-$LOOPR_LOOP_ID" ]; then touch "$LOOPR_HOME/limited-$LOOPR_LOOP_ID"; exit 75; fi ;;
esac
exit 0`)
	cfg := testConfig(agent)
	cfg.Retry.BackoffBaseSecs, cfg.Retry.BackoffMaxSecs = 0, 0
	cfg.RateLimit.InitialBackoffSecs, cfg.RateLimit.RecoveryPeriodSecs = 1, 0
	ls := cfg.Loops[loop.Ralph]
	ls.MaxIterations = 2
	cfg.Loops[loop.Ralph] = ls
	d := startDaemon(t, newPaths(t), cfg)

	// Paused loops for the gauges; they never run.
	for i := range 4 {
		l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: "held " + strconv.Itoa(i), RunnableAt: later()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.c.Act(ctx, l.ID, api.ActionPause, api.ActionRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	// The loops that run start together, once their titles are on disk.
	var run []string
	for _, title := range []string{"ok1", "ok2", "fail", "limit"} {
		l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: title, RunnableAt: time.Now().Add(300 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.paths.Home, "title-"+l.ID), []byte(title), 0o600); err != nil {
			t.Fatal(err)
		}
		run = append(run, l.ID)
	}
	if _, err := d.c.CreateBatch(ctx, []api.CreateRequest{{Type: loop.Ralph, Title: "ok3"}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, run[0], loop.Complete, 20*time.Second)
	waitStatus(t, d, run[1], loop.Complete, 20*time.Second)
	waitStatus(t, d, run[2], loop.Failed, 20*time.Second)
	waitStatus(t, d, run[3], loop.Complete, 20*time.Second)

	want := map[string]float64{
		`loopr_loops{status="complete",type="ralph"}`:                4, // ok1 ok2 limit ok3
		`loopr_loops{status="failed",type="ralph"}`:                  1,
		`loopr_loops{status="paused",type="ralph"}`:                  4,
		`loopr_loops{status="pending",type="plan"}`:                  0,
		`loopr_loop_starts_total{type="ralph"}`:                      7, // ok1 ok2 ok3, fail ×2, limit ×2
		`loopr_loop_completions_total{type="ralph"}`:                 4,
		`loopr_loop_failures_total{type="ralph"}`:                    1,
		`loopr_iterations_total{result="passed",type="ralph"}`:       4,
		`loopr_iterations_total{result="failed",type="ralph"}`:       2,
		`loopr_iterations_total{result="rate_limited",type="ralph"}`: 1,
		`loopr_iterations_total{result="requeued",type="ralph"}`:     0,
		`loopr_rate_limit_hits_total`:                                1,
		`loopr_dispatch_latency_seconds_count{type="ralph"}`:         7,
		`loopr_running{type="ralph"}`:                                0,
		`loopr_type_cap{type="ralph"}`:                               50,
		`loopr_max_loops`:                                            50,
		`loopr_webhook_deliveries_total{result="delivered"}`:         0,
	}
	var m map[string]float64
	got := map[string]float64{}
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for { // the metrics follow the journal: give them a moment, every counter of them
		m = scrape(t, d)
		for k := range want {
			got[k] = m[k]
		}
		if cmp.Equal(want, got) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics mismatch (-want +got):\n%s", diff)
	}
	if b := m["loopr_rate_limit_blocked_seconds_total"]; b < 0.9 || b > 1.5 {
		t.Errorf("loopr_rate_limit_blocked_seconds_total = %g; want about 1 (one backoff of 1 s)", b)
	}
	if n := m["loopr_scheduler_tick_seconds_count"]; n < 7 {
		t.Errorf("loopr_scheduler_tick_seconds_count = %g; want at least one tick per start", n)
	}
	if _, ok := m["go_goroutines"]; !ok {
		t.Error("no go_goroutines: the Go collector is not registered")
	}

	st, err := d.c.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats() = %v", err)
	}
	if !st.Daemon || st.Since.IsZero() || st.Total != 9 || st.FinishedOK != 4 || st.FinishedFailed != 1 || st.CompletedHour != 4 || st.CompletedDay != 4 {
		t.Errorf("Stats() = daemon %v since %v total %d ok %d failed %d hour %d day %d; want true, set, 9 4 1 4 4",
			st.Daemon, st.Since, st.Total, st.FinishedOK, st.FinishedFailed, st.CompletedHour, st.CompletedDay)
	}
	if st.SuccessRate != 0.8 {
		t.Errorf("Stats().SuccessRate = %g, want 0.8", st.SuccessRate)
	}
	var ralph api.TypeStats
	for _, ts := range st.Types {
		if ts.Type == loop.Ralph {
			ralph = ts
		}
	}
	// Complete loops used 1, 1, 1 and 1 iterations (a rate limit spends none).
	if ralph.MeanIterations != 1 || ralph.Starts != 7 || ralph.Completions != 4 || ralph.Failures != 1 || ralph.Iterations != 7 {
		t.Errorf("Stats() ralph = %+v; want mean 1, 7 starts, 4 completions, 1 failure, 7 iterations", ralph)
	}
	if st.RateLimit.Hits != 1 || st.RateLimit.BlockedSecs < 0.9 {
		t.Errorf("Stats().RateLimit = %+v; want 1 hit, about 1 s blocked", st.RateLimit)
	}
	if st.Dispatch.Count != 7 || st.Dispatch.Window != 7 || st.Dispatch.P50Ms <= 0 || st.Dispatch.P99Ms < st.Dispatch.P50Ms || st.Dispatch.MaxMs < st.Dispatch.P99Ms {
		t.Errorf("Stats().Dispatch = %+v; want 7 samples with p50 <= p99 <= max", st.Dispatch)
	}
	if st.Tick.Count < 7 || st.Tick.P50Ms <= 0 {
		t.Errorf("Stats().Tick = %+v; want ticks measured", st.Tick)
	}
	t.Logf("dispatch p50 %.1f ms p99 %.1f ms; tick p50 %.2f ms p99 %.2f ms", st.Dispatch.P50Ms, st.Dispatch.P99Ms, st.Tick.P50Ms, st.Tick.P99Ms)
}

// TestDeadlineSweepIsAnEvent: a pending loop past its deadline is swept to
// expired, and the stream carries the transition with the reason.
func TestDeadlineSweepIsAnEvent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDaemon(t, newPaths(t), testConfig())
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-ch // snapshot
	deadline := time.Now().Add(300 * time.Millisecond).UTC().Truncate(time.Millisecond)
	l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: "late", RunnableAt: later(), Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	m := waitFor(t, ch, 5*time.Second, "the expiry", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Loop == l.ID && m.Event.Kind == loop.EventTransition
	})
	wantMsg := "deadline " + deadline.Format(time.RFC3339) + " passed while pending"
	if m.Event.From != loop.Pending || m.Event.To != loop.Expired || m.Event.Message != wantMsg {
		t.Errorf("event = %s → %s %q; want pending → expired %q", m.Event.From, m.Event.To, m.Event.Message, wantMsg)
	}
	if m.Loop == nil || m.Loop.Status != loop.Expired || m.Loop.Reason != wantMsg || m.Loop.FinishedAt.Before(deadline) {
		t.Errorf("event loop = %+v; want expired with the reason, finished after the deadline", m.Loop)
	}
}

// TestGCThroughTheDaemon: the cleaner prunes at start, POST /v1/gc runs a
// pass now (dry run first), and the removal is a journal event.
func TestGCThroughTheDaemon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	paths := newPaths(t)
	cfg := testConfig()
	cfg.Retention.Days = 30
	d := startDaemon(t, paths, cfg)
	old := time.Now().Add(-40 * 24 * time.Hour).UTC().Truncate(time.Millisecond)
	mk := func(id, parent string, st loop.Status) loop.Loop {
		l := loop.Loop{ID: id, Type: loop.Ralph, Status: st, Parent: parent, Title: id, Iteration: 1, MaxIterations: 3,
			CreatedAt: old, UpdatedAt: old, RunnableAt: later()}
		if st.Terminal() {
			l.FinishedAt = old
		}
		return l
	}
	if _, err := d.c.Import(ctx, []loop.Loop{
		mk("oldroot", "", loop.Complete), mk("oldkid", "oldroot", loop.Failed),
		mk("keeper", "", loop.Complete), mk("livekid", "keeper", loop.Pending),
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"oldroot", "oldkid", "keeper"} {
		if err := os.MkdirAll(filepath.Join(paths.Home, "loops", id, "iterations", "001"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-ch

	dry, err := d.c.GC(ctx, api.GCRequest{DryRun: true})
	if err != nil {
		t.Fatalf("GC(dry run) = %v", err)
	}
	ids := func(r api.GCResult) []string {
		var out []string
		for _, g := range r.Removed {
			out = append(out, g.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"oldkid", "oldroot"}, ids(dry)); diff != "" || !dry.DryRun || dry.Kept != 1 || dry.Days != 30 {
		t.Errorf("GC(dry run) = %+v; want oldkid, oldroot, 1 kept (-want +got):\n%s", dry, diff)
	}
	if _, err := d.c.Get(ctx, "oldroot"); err != nil {
		t.Errorf("after a dry run, Get(oldroot) = %v; want it kept", err)
	}
	res, err := d.c.GC(ctx, api.GCRequest{})
	if err != nil || len(res.Removed) != 2 || res.Dirs != 2 {
		t.Fatalf("GC() = %+v, %v; want 2 loops and 2 directories removed", res, err)
	}
	for _, id := range []string{"oldroot", "oldkid"} {
		if _, err := d.c.Get(ctx, id); err == nil {
			t.Errorf("after GC, Get(%s) found it", id)
		}
		if _, err := os.Stat(filepath.Join(paths.Home, "loops", id)); !os.IsNotExist(err) {
			t.Errorf("after GC, loops/%s: %v; want removed", id, err)
		}
	}
	if _, err := d.c.Get(ctx, "keeper"); err != nil {
		t.Errorf("GC removed keeper, whose child is live: %v", err)
	}
	m := waitFor(t, ch, 5*time.Second, "the retention event", func(m api.StreamMsg) bool {
		return m.Type == api.StreamEvent && m.Event.Kind == loop.EventDaemon && strings.HasPrefix(m.Event.Message, "retention: removed 2 loops")
	})
	t.Log(m.Event.Message)
	if n := scrape(t, d)["loopr_gc_removed_loops_total"]; n != 2 {
		t.Errorf("loopr_gc_removed_loops_total = %g, want 2", n)
	}

	// A recently finished descendant keeps its old ancestor.
	if _, err := d.c.Act(ctx, "livekid", api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err = d.c.GC(ctx, api.GCRequest{})
	if err != nil || len(res.Removed) != 0 || res.Kept != 1 {
		t.Errorf("GC() with a recently cancelled child = %+v, %v; want nothing removed, 1 kept", res, err)
	}
}

// TestCleanerRunsAtStart: retention applies as soon as the daemon starts.
func TestCleanerRunsAtStart(t *testing.T) {
	t.Parallel()
	paths := newPaths(t)
	cfg := testConfig()
	cfg.Retention.Days = 1
	d := startDaemon(t, paths, cfg)
	old := time.Now().Add(-48 * time.Hour).UTC().Truncate(time.Millisecond)
	if _, err := d.c.Import(context.Background(), []loop.Loop{{ID: "stale", Type: loop.Ralph, Status: loop.Cancelled, Title: "stale",
		Iteration: 1, MaxIterations: 3, CreatedAt: old, UpdatedAt: old, FinishedAt: old}}); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, paths, cfg)
	deadline := time.Now().Add(testslack.Scale(10 * time.Second))
	for {
		_, err := d2.c.Get(context.Background(), "stale")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cleaner did not remove a loop finished 2 days ago (retention.days 1) at start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
