package daemon_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/workspace"
)

// reloadYAML is a loopr.yml equal to testConfig(), with extra appended.
func reloadYAML(extra string) string {
	return `agent:
  command: ["true"]
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
loops:
  plan: {require_approval: false, validate: []}
  spec: {validate: []}
  phase: {validate: []}
  ralph: {validate: []}
` + extra
}

// writeAtomic replaces path the way editors do: a temporary file renamed
// over it.
func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".loopr.yml.swp")
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// configWorkspace writes loopr.yml into a fresh workspace and returns its
// paths and the parsed configuration the daemon starts with.
func configWorkspace(t *testing.T, yml string) (workspace.Paths, *config.Config) {
	t.Helper()
	paths := newPaths(t)
	paths.Config = filepath.Join(paths.Workspace, "loopr.yml")
	if err := os.WriteFile(paths.Config, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(paths.Config)
	if err != nil {
		t.Fatal(err)
	}
	return paths, cfg
}

func ralphPriority(t *testing.T, d *testDaemon, id string) int {
	t.Helper()
	v, err := d.c.Scheduler(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range v.Rows {
		if r.ID == id { // without the tree term (on by default), whose tree age grows with the test's time
			return r.Priority - r.TreeBoost - r.TreeAgeBoost
		}
	}
	t.Fatalf("loop %s not in the scheduler view", id)
	return 0
}

// TestHotReload: a valid change of loopr.yml applies without a restart and
// is an event naming what changed; a broken file is refused with its line
// and key, the old configuration stays, and loops keep running.
func TestHotReload(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	paths, cfg := configWorkspace(t, reloadYAML(""))
	d := startDaemon(t, paths, cfg)
	ch, err := d.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	waiting := create(t, d.c, "waiting", false)
	if p := ralphPriority(t, d, waiting.ID); p != 100 {
		t.Fatalf("priority before the reload = %d, want 100", p)
	}
	configEvent := func(what string) string {
		t.Helper()
		m := waitFor(t, ch, 10*time.Second, what, func(m api.StreamMsg) bool {
			return m.Type == api.StreamEvent && m.Event.Kind == loop.EventConfig
		})
		return m.Event.Message
	}

	// An editor's rename-over: priorities and caps change, and a setting
	// that needs a restart says so.
	writeAtomic(t, paths.Config, reloadYAML(`scheduler:
  priority: {ralph: 120}
concurrency:
  per_type: {spec: 3}
  max_api_calls: 4
`))
	msg := configEvent("the reload event")
	want := "config reloaded from loopr.yml: scheduler.priority.ralph: 100 → 120; concurrency.max_api_calls: 10 → 4 (needs a restart); concurrency.per_type.spec: 5 → 3"
	if msg != want {
		t.Errorf("reload event = %q\nwant %q", msg, want)
	}
	if p := ralphPriority(t, d, waiting.ID); p != 120 {
		t.Errorf("priority after the reload = %d, want 120", p)
	}
	st, err := d.c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tu := range st.Types {
		if tu.Type == loop.Spec && tu.Cap != 3 {
			t.Errorf("status: spec cap %d after the reload, want 3", tu.Cap)
		}
	}

	// A write in place that breaks the file is refused with line and key.
	if err := os.WriteFile(paths.Config, []byte(reloadYAML("scheduler:\n  priority:\n    ralph: -5\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	msg = configEvent("the refusal event")
	want = "config reload refused: loopr.yml:14: scheduler.priority.ralph: must be >= 0; the previous configuration stays in force"
	if msg != want {
		t.Errorf("refusal event = %q\nwant %q", msg, want)
	}
	if p := ralphPriority(t, d, waiting.ID); p != 120 {
		t.Errorf("priority after a refused reload = %d, want 120 (the old configuration)", p)
	}
	if !strings.Contains(d.log.String(), "config reload refused") {
		t.Error("the refusal is not in the log")
	}
	// Scheduling goes on with the old configuration.
	run := create(t, d.c, "runs", true)
	waitStatus(t, d, run.ID, loop.Complete, 20*time.Second)

	// Fixing the file applies it — the admission limits too; a removed
	// file changes nothing.
	writeAtomic(t, paths.Config, reloadYAML("scheduler:\n  priority: {ralph: 90}\nadmission:\n  max_pending: 1\n"))
	if msg := configEvent("the second reload"); !strings.Contains(msg, "scheduler.priority.ralph: 120 → 90") || !strings.Contains(msg, "admission.max_pending: 0 → 1") {
		t.Errorf("second reload event = %q", msg)
	}
	if p := ralphPriority(t, d, waiting.ID); p != 90 {
		t.Errorf("priority after the second reload = %d, want 90", p)
	}
	_, err = d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: "one too many", RunnableAt: later()})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Code != api.CodeQueueFull {
		t.Errorf("create past the reloaded admission.max_pending = %v; want %s", err, api.CodeQueueFull)
	}
	if err := os.Remove(paths.Config); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if p := ralphPriority(t, d, waiting.ID); p != 90 {
		t.Errorf("priority after removing loopr.yml = %d, want 90 (kept)", p)
	}
	m := scrape(t, d)
	if m[`loopr_config_reloads_total{result="applied"}`] != 2 || m[`loopr_config_reloads_total{result="refused"}`] != 1 {
		t.Errorf("config reload counters applied %g refused %g; want 2 1",
			m[`loopr_config_reloads_total{result="applied"}`], m[`loopr_config_reloads_total{result="refused"}`])
	}
}

// TestHotReloadWebhooks: webhooks are read from the configuration in
// force, so a reload adds a receiver without a restart.
func TestHotReloadWebhooks(t *testing.T) {
	t.Parallel()
	paths, cfg := configWorkspace(t, reloadYAML(""))
	d := startDaemon(t, paths, cfg)
	rcv := newReceiver(t, nil)
	writeAtomic(t, paths.Config, reloadYAML("webhooks:\n  - {url: \""+rcv.srv.URL+"\", events: [created]}\n"))
	deadline := time.Now().Add(testslack.Scale(10 * time.Second))
	for scrape(t, d)[`loopr_config_reloads_total{result="applied"}`] != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the reload adding a webhook was not applied within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := create(t, d.c, "after", false)
	got := rcv.waitDelivered(t, 1, 10*time.Second)
	if got[0].Loop.ID != after.ID || got[0].Event != "created" {
		t.Errorf("first delivery after adding the webhook = %s %s, want created %s", got[0].Event, got[0].Loop.ID, after.ID)
	}
}
