package e2e

import (
	"bufio"
	"context"
	"github.com/go-json-experiment/json/v1"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// The daemon half of the policy issue, through the real binary: hot reload
// of loopr.yml, webhooks, /metrics, loopr stats, loopr gc, add --file.

// daemonOpsConfig runs agents as `true`, without git worktrees, approval
// or validation; extra is appended.
func daemonOpsConfig(extra string) string {
	return `agent:
  command: ["true"]
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
loops:
  plan: {require_approval: false, validate: []}
  ralph: {validate: []}
` + extra
}

// replaceFile writes data over path the way editors do: a new file renamed
// over the old one.
func replaceFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// scrapeMetrics reads GET /metrics over the daemon's socket.
func scrapeMetrics(t *testing.T, r repo) map[string]float64 {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(r.home, "loopr.sock"))
	}}, Timeout: 10 * time.Second}
	resp, err := hc.Get("http://loopr/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// schedulerPriority returns the PRIORITY column of `loopr debug scheduler`
// for the loop id.
func schedulerPriority(t *testing.T, r repo, id string) string {
	t.Helper()
	for _, line := range strings.Split(ok(t, r.dir, "debug", "scheduler"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == id {
			return f[2]
		}
	}
	return ""
}

// TestHotReloadThroughTheBinary: editing loopr.yml changes what `loopr
// debug scheduler` shows without a restart; a broken edit is refused with
// its line and key, and the daemon goes on with the old configuration.
func TestHotReloadThroughTheBinary(t *testing.T) {
	t.Parallel()
	// The tree term off: the priorities are the formula's first five terms.
	const noTree = "    tree_boost_max: 0\n    tree_age_boost_max: 0\n"
	r := newRepo(t, daemonOpsConfig("scheduler:\n  priority:\n"+noTree))
	d := startDaemon(t, r)
	cfgPath := filepath.Join(r.dir, "loopr.yml")
	var waiting loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "waits an hour", "--in", "1h", "--json"), &waiting)
	if p := schedulerPriority(t, r, waiting.ID); p != "100" {
		t.Fatalf("debug scheduler priority = %q, want 100", p)
	}

	replaceFile(t, cfgPath, daemonOpsConfig("scheduler:\n  priority:\n    ralph: 120\n"+noTree))
	waitFor(t, 10*time.Second, "debug scheduler to show the new priority", func() bool {
		return schedulerPriority(t, r, waiting.ID) == "120"
	})
	if !strings.Contains(d.output(), "scheduler.priority.ralph: 100 → 120") {
		t.Errorf("the daemon log does not list the change:\n%s", tail(d.output(), 10))
	}

	// Broken: a string where an integer goes, written in place.
	if err := os.WriteFile(cfgPath, []byte(daemonOpsConfig("scheduler:\n  priority:\n    ralph: lots\n"+noTree)), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the refused reload in the log", func() bool {
		return strings.Contains(d.output(), "config reload refused")
	})
	if want := `loopr.yml:12: scheduler.priority.ralph: must be an integer, got \"lots\"`; !strings.Contains(d.output(), want) {
		t.Errorf("the refusal does not name line and key (%s):\n%s", want, tail(d.output(), 10))
	}
	if p := schedulerPriority(t, r, waiting.ID); p != "120" {
		t.Errorf("after a broken edit, debug scheduler priority = %q, want 120 (the configuration in force)", p)
	}
	// Commands still go through the daemon, warning about the file.
	if res := run(t, r.dir, "", "status"); res.code != 0 || !strings.Contains(res.stderr, "warning: loopr.yml:12: scheduler.priority.ralph") {
		t.Errorf("loopr status with a broken loopr.yml = exit %d, stderr %q; want 0 and a warning naming line and key", res.code, res.stderr)
	}
	var now loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "runs now", "--json"), &now)
	waitFor(t, 15*time.Second, "a loop to complete after the refused reload", func() bool {
		return show(t, r, now.ID).Status == loop.Complete
	})
	m := scrapeMetrics(t, r)
	if m[`loopr_config_reloads_total{result="applied"}`] != 1 || m[`loopr_config_reloads_total{result="refused"}`] != 1 {
		t.Errorf("reload counters applied %g refused %g, want 1 1",
			m[`loopr_config_reloads_total{result="applied"}`], m[`loopr_config_reloads_total{result="refused"}`])
	}
}

// TestWebhooksMetricsStatsGCThroughTheBinary: a receiver configured in
// loopr.yml gets the events of loops added from a file; /metrics and
// loopr stats count them; loopr gc goes through the daemon.
func TestWebhooksMetricsStatsGCThroughTheBinary(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []api.WebhookPayload
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p api.WebhookPayload
		if err := json.NewDecoder(req.Body).Decode(&p); err == nil {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	r := newRepo(t, daemonOpsConfig("webhooks:\n  - url: "+srv.URL+"/loopr\n    events: [complete, failed]\n"))
	startDaemon(t, r)

	file := filepath.Join(t.TempDir(), "loops.yaml")
	if err := os.WriteFile(file, []byte("- {type: ralph, task: one}\n- {type: ralph, task: two}\n- {type: nosuch, task: three}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, r.dir, "", "add", "--file", file)
	if res.code != 1 || !strings.Contains(res.stdout, "2 created, 1 failed") || !strings.Contains(res.stdout, `unknown type "nosuch"`) {
		t.Errorf("add --file = exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	waitFor(t, 15*time.Second, "two webhook deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	mu.Lock()
	for _, p := range got {
		if p.Event != "complete" || p.Loop.Status != loop.Complete || p.Loop.Type != loop.Ralph {
			t.Errorf("webhook delivery %+v; want complete events with the loop", p)
		}
	}
	mu.Unlock()

	m := scrapeMetrics(t, r)
	for k, want := range map[string]float64{
		`loopr_loops{status="complete",type="ralph"}`:        2,
		`loopr_loop_completions_total{type="ralph"}`:         2,
		`loopr_webhook_deliveries_total{result="delivered"}`: 2,
	} {
		if m[k] != want {
			t.Errorf("%s = %g, want %g", k, m[k], want)
		}
	}
	if m[`loopr_dispatch_latency_seconds_count{type="ralph"}`] != 2 || m["loopr_scheduler_tick_seconds_count"] < 1 {
		t.Errorf("histograms: dispatch count %g, tick count %g", m[`loopr_dispatch_latency_seconds_count{type="ralph"}`], m["loopr_scheduler_tick_seconds_count"])
	}
	stats := ok(t, r.dir, "stats")
	for _, want := range []string{"daemon      up ", "success     100.0% (2 complete, 0 failed)", "dispatch    p50 "} {
		if !strings.Contains(stats, want) {
			t.Errorf("loopr stats lacks %q:\n%s", want, stats)
		}
	}
	if out := ok(t, r.dir, "gc", "--dry-run"); !strings.HasPrefix(out, "nothing to remove: no finished loop is older than 30 days") {
		t.Errorf("loopr gc --dry-run = %q", out)
	}
}
