package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestSIGHUPReloadsAndNeverExits: SIGHUP (a closed terminal or ssh
// session) sent to a foreground daemon while an agent runs reloads
// loopr.yml and ends nothing: the daemon keeps answering on the same pid,
// the agent's loop completes at iteration 1 (no iteration charged) and the
// new configuration is in force.
func TestSIGHUPReloadsAndNeverExits(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "agent-started")
	agent := []string{"sh", "-c", "touch " + marker + "; sleep 2"}
	e := newRelEnv(t, relSimpleConfig(agent, ""))
	cfgPath := filepath.Join(e.dir, "loopr.yml")
	d := e.start()
	l, err := d.c.Create(context.Background(), api.CreateRequest{Type: loop.Ralph, Task: "Sleep through a hangup."})
	if err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "the agent to start", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	good, _ := os.ReadFile(cfgPath)
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(good), "max_loops: 4", "max_loops: 7", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 10*time.Second, "the SIGHUP reload in the log", func() bool {
		return strings.Contains(e.output(), "SIGHUP: reloading the configuration")
	})
	relWaitFor(t, 10*time.Second, "max_loops 7 in force", func() bool { return d.status(t).MaxLoops == 7 })
	// A second hangup, with nothing changed, is harmless too.
	if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "the loop to complete", func() bool {
		got, err := d.c.Get(context.Background(), l.ID)
		return err == nil && got.Status == loop.Complete
	})
	got, _ := d.c.Get(context.Background(), l.ID)
	if got.Iteration != 1 {
		t.Errorf("iteration %d after SIGHUP, want 1 (a hangup charges nothing)", got.Iteration)
	}
	if d.exited() {
		t.Fatalf("the daemon exited on SIGHUP; log:\n%s", e.tail(20))
	}
	if st := d.status(t); st.PID != d.pid() {
		t.Errorf("status answered by pid %d, want %d", st.PID, d.pid())
	}
}

// TestConfigFIFONeverHangs: loopr.yml replaced by a FIFO or a device is
// refused at once, naming what it is, by `config check`, a daemon start
// and a reload (the old configuration stays in force); nothing blocks
// waiting for a writer.
func TestConfigFIFONeverHangs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "loopr.yml")
	if err := syscall.Mkfifo(cfgPath, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"config", "check"}, {"daemon"}} {
		start := time.Now()
		r := run(t, dir, "", args...)
		took := time.Since(start)
		if r.code == 0 || !strings.Contains(r.stderr, "loopr.yml: a named pipe (FIFO), not a regular file") || took > 10*time.Second {
			t.Errorf("loopr %s with a FIFO loopr.yml: exit %d after %v, stderr %q; want a quick refusal naming the FIFO",
				strings.Join(args, " "), r.code, took.Round(time.Millisecond), r.stderr)
		}
	}

	e := newRelEnv(t, relSimpleConfig([]string{"true"}, ""))
	d := e.start()
	p := filepath.Join(e.dir, "loopr.yml")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(d.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 10*time.Second, "the refused read in the log", func() bool {
		return strings.Contains(e.output(), "not a regular file")
	})
	if st := d.status(t); st.MaxLoops != 4 {
		t.Errorf("max_loops %d after a FIFO reload, want the old 4", st.MaxLoops)
	}
	// The daemon still stops promptly (no reader stuck on the pipe).
	start := time.Now()
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit %d after a FIFO config, want 0", code)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("stop took %v", took)
	}
}
