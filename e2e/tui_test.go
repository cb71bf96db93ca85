package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// tmux drives a real terminal on a private tmux server.
type tmux struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is required in CI (.ci/run installs it)")
		}
		t.Skip("tmux not installed")
	}
	tm := &tmux{t: t, socket: fmt.Sprintf("loopr-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())}
	t.Cleanup(func() { exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tmux) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (tm *tmux) screen() string { return tm.run("capture-pane", "-p", "-t", "tui") }

func (tm *tmux) keys(keys ...string) { tm.run(append([]string{"send-keys", "-t", "tui"}, keys...)...) }

// waitGone waits until the screen no longer contains gone.
func (tm *tmux) waitGone(what, gone string) string {
	tm.t.Helper()
	deadline := time.Now().Add(testslack.Scale(15 * time.Second))
	for {
		s := tm.screen()
		if !strings.Contains(s, gone) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("%s: screen still shows %q:\n%s", what, gone, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitScreen waits until the screen contains every string in want.
func (tm *tmux) waitScreen(what string, want ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(testslack.Scale(15 * time.Second))
	for {
		s := tm.screen()
		missing := ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("%s: screen lacks %q:\n%s", what, missing, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTUIUnderTmux runs `loopr tui` in a real terminal against a real daemon
// with a scripted agent: the tree shows priorities and reasons, keys move
// and open the why pane, a cancel reaches the daemon, and q restores the
// terminal.
func TestTUIUnderTmux(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	dir := t.TempDir()
	cfg := "agent:\n  command: [\"sh\", \"-c\", \"cat >/dev/null; sleep 60\"]\n" +
		"loops:\n  ralph: {validate: []}\nconcurrency:\n  per_type: {ralph: 1}\n" +
		"storage: {disk_quota_min_gb: 0}\ngit: {worktrees: false}\n" +
		"scheduler: {priority: {tree_boost_max: 0, tree_age_boost_max: 0}}\n" // seed 004's numbers
	if err := os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "import", abs(t, "testdata/seed004.jsonl"))
	ok(t, dir, "daemon", "--detach")
	t.Cleanup(func() { stopDaemon(t, dir) })

	// The pane runs the dashboard, then prints a marker: after q the marker
	// must be on a restored (non-alternate) screen without dashboard rows.
	script := fmt.Sprintf("cd %q && %q tui --no-start; echo TUI-EXITED $?; sleep 30", dir, bin)
	tm.run("new-session", "-d", "-s", "tui", "-x", "120", "-y", "30", "-e", "NO_COLOR=1", "sh", "-c", script)

	tm.waitScreen("tree", "C: add index", "160", "type cap ralph 1/1", "waiting for parent (running)", "A: create users table")

	// Filter to the blocked ralph loop, open its why pane.
	tm.keys("/")
	tm.keys("-l", "add index")
	tm.keys("Enter")
	tm.waitScreen("filter", "C: add index")
	tm.keys("w")
	why := tm.waitScreen("why pane", "priority 160 = base 100", "✗ type cap ralph 1/1", "✓ parent complete")
	if !strings.Contains(why, "WHY") {
		t.Errorf("why pane lacks its title:\n%s", why)
	}
	tm.keys("Escape")
	// Wait for the pane to close before the next key: an Escape followed
	// at once by "c" reaches the terminal as one Alt+c.
	tm.waitGone("why pane closed", "priority 160 = base 100")

	// Cancel it: confirm, and the daemon must confirm the change.
	tm.keys("c")
	tm.waitScreen("confirm", `cancel ralph "C: add index"?`)
	tm.keys("y")
	deadline := time.Now().Add(testslack.Scale(10 * time.Second))
	for {
		var l loop.Loop
		if err := json.Unmarshal([]byte(ok(t, dir, "show", "1737802700", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		if l.Status == loop.Cancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not record the cancel: %s\n%s", l.Status, tm.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	tm.waitScreen("cancelled row", "cancelled")

	tm.keys("q")
	after := tm.waitScreen("exit", "TUI-EXITED 0")
	if strings.Contains(after, "LOOP") || strings.Contains(after, "j/k move") {
		t.Errorf("terminal not restored after q:\n%s", after)
	}
}

// stopDaemon sends SIGTERM to the workspace's daemon and waits for it to go.
func stopDaemon(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".loopr", "daemon.pid"))
	if err != nil {
		return
	}
	var pid int
	fmt.Sscan(string(data), &pid)
	if pid <= 0 {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}
