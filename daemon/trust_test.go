package daemon_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/trust"
)

// TestUntrustedRunsNothing: a daemon started on an untrusted loopr.yml
// starts no agent and sends no webhook (the URL is the file's); the loop
// waits with gate untrusted and status says so. Trusted (the trust file
// written, then the file seen again), the agent runs and the webhook gets
// what follows, not the events of the untrusted time. Not parallel: it
// clears LOOPR_TRUST_ALL, which TestMain sets for the package.
func TestUntrustedRunsNothing(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv(trust.AllEnv, "")
	rcv := newReceiver(t, nil)
	marker := filepath.Join(t.TempDir(), "agent-ran")
	yml := `agent:
  command: ["sh", "-c", "touch ` + marker + `"]
git: {worktrees: false}
storage: {disk_quota_min_gb: 0}
loops:
  ralph: {validate: []}
webhooks: [{url: "` + rcv.srv.URL + `", events: [created, running, complete]}]
`
	paths, cfg := configWorkspace(t, yml)
	d := startDaemon(t, paths, cfg)
	ctx := context.Background()
	l := create(t, d.c, "untrusted", true)

	gated := func() bool {
		w, err := d.c.Why(ctx, l.ID, time.Time{})
		return err == nil && slices.ContainsFunc(w.Gates, func(g api.Gate) bool { return g.Code == "untrusted" && !g.OK })
	}
	deadline := time.Now().Add(3 * time.Second) // a few scheduler polls
	for time.Now().Before(deadline) {
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the agent of an untrusted loopr.yml ran")
		}
		if got := rcv.delivered(); len(got) > 0 {
			t.Fatalf("a webhook of an untrusted loopr.yml was sent: %+v", got[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !gated() {
		t.Error("why shows no failing untrusted gate")
	}
	st, err := d.c.Status(ctx)
	if err != nil || st.Trust == nil || st.Trust.Held || st.Trust.Action != "loopr trust" {
		t.Fatalf("status.trust = %+v, %v; want untrusted, action loopr trust", st.Trust, err)
	}

	store, err := trust.DefaultStore(os.Getenv)
	if err != nil || filepath.Dir(filepath.Dir(store.Path)) != xdg {
		t.Fatalf("trust file %s, %v; want under %s", store.Path, err, xdg)
	}
	if err := store.Add(trust.Fingerprint(cfg), paths.Config); err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, paths.Config, yml) // unchanged: seen again, its trust checked again
	got := rcv.waitDelivered(t, 2, 30*time.Second)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the agent did not run once trusted: %v", err)
	}
	for _, p := range got {
		if p.Event == "created" {
			t.Errorf("the created event of the untrusted time was sent once trusted: %+v", p)
		}
	}
	if got[0].Event != string(loop.Running) {
		t.Errorf("first delivery %q, want running", got[0].Event)
	}
	if st, _ := d.c.Status(ctx); st.Trust != nil {
		t.Errorf("status.trust after trust = %+v, want none", st.Trust)
	}
}
