package e2e

// Issue 10, item 3: every process an iteration starts is gone when the
// iteration ends, is cancelled, or the daemon stops or crashes — also the
// ones that detach (setsid), double fork out of the process group, or
// clear their environment.

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// escapes are the ways testdata/escapeagent.sh leaves its agent.
var escapes = []string{"setsid", "doublefork", "envi"}

// escapeConfig runs testdata/escapeagent.sh MARKS MODE for ralph loops in
// worktrees.
func escapeConfig(t *testing.T, marks, mode string, timeoutSecs, maxIterations int) string {
	t.Helper()
	argv, _ := json.Marshal([]string{"sh", abs(t, "testdata/escapeagent.sh"), marks, mode})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  command: %s
  timeout_secs: %[2]d
loops:
  ralph: {max_iterations: %[3]d, validate: []}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, argv, timeoutSecs, maxIterations)
}

// procLive reports whether pid is a live (not zombie) process.
func procLive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// escapee reads the pid the escapee of loop id's iteration wrote.
func escapee(marks, id string, iteration int) (int, bool) {
	b, err := os.ReadFile(filepath.Join(marks, fmt.Sprintf("%s.%d.pid", id, iteration)))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && pid > 0
}

// ticksStill fails the test if any loop's escapee still writes: the size
// of its ticks file changes within 300 ms.
func ticksStill(t *testing.T, marks string, ids map[string]string) {
	t.Helper()
	size := func(id string) int64 {
		fi, err := os.Stat(filepath.Join(marks, id+".ticks"))
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	before := map[string]int64{}
	for _, id := range ids {
		before[id] = size(id)
	}
	time.Sleep(300 * time.Millisecond)
	for esc, id := range ids {
		if after := size(id); after != before[id] {
			t.Errorf("%s: the escapee of %s still writes (ticks %d -> %d bytes)", esc, id, before[id], after)
		}
	}
}

// TestEscapedProcessesEnd: for each containment mode the machine allows
// and each way an iteration can end (the agent exits, cancel, timeout,
// SIGTERM, SIGKILL of the daemon and a restart with its guard off, SIGKILL
// with its guard on), the escapees of three agents (setsid,
// double fork, env -i) are gone, and nothing they started writes on.
func TestEscapedProcessesEnd(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("perl"); err != nil {
		t.Fatal("perl is needed: escapeagent.sh double forks with it (fork, setpgrp, fork)")
	}
	for _, mode := range []string{"cgroup", "subreaper"} {
		for _, event := range []string{"end", "cancel", "timeout", "stop", "crash", "guard"} {
			t.Run(mode+"/"+event, func(t *testing.T) {
				t.Parallel()
				testEscapes(t, mode, event)
			})
		}
	}
}

func testEscapes(t *testing.T, mode, event string) {
	marks := t.TempDir()
	agentMode := "hold"
	if event == "end" {
		agentMode = "exit"
	}
	timeout, maxIter := 60, 2
	if event == "timeout" {
		timeout, maxIter = 2, 1
	}
	r := newRepo(t, escapeConfig(t, marks, agentMode, timeout, maxIter))
	env := "LOOPR_CONTAINMENT=" + mode
	guard := "LOOPR_GUARD=on"
	if event == "crash" {
		guard = "LOOPR_GUARD=off" // what the next daemon's Recover ends by itself
	}
	d := startDaemonEnv(t, r, env, guard)
	got := status(t, r).Containment
	want := map[string]string{"cgroup": "cgroup", "subreaper": "subreaper+scan"}[mode]
	if got != want && !(mode == "cgroup" && got == "subreaper+scan") {
		t.Fatalf("status containment = %q, want %q", got, want)
	}
	if got != want {
		t.Logf("cgroup v2 is not writable here: running with %s", got)
	}
	if out := ok(t, r.dir, "status"); !regexp.MustCompile(`(?m)^containment +` + regexp.QuoteMeta(got) + `$`).MatchString(out) {
		t.Errorf("loopr status does not show the containment %q:\n%s", got, out)
	}
	if !strings.Contains(d.output(), "process containment") {
		t.Errorf("the daemon did not log its containment at start:\n%s", tail(d.output(), 20))
	}
	ids := map[string]string{} // escape → loop id
	for _, esc := range escapes {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", esc, "--task", "escape: "+esc, "--json"), &l)
		ids[esc] = l.ID
	}
	pids := map[string]int{} // escape → iteration 1's escapee
	waitFor(t, 30*time.Second, "every escapee to run", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		for esc, id := range ids {
			pid, ok := escapee(marks, id, 1)
			if !ok {
				return false
			}
			pids[esc] = pid
		}
		return true
	})
	for esc, pid := range pids {
		if event != "end" && !procLive(pid) {
			t.Fatalf("%s: escapee %d is not running before the %s", esc, pid, event)
		}
	}
	gone := func(what string, within time.Duration, which func(esc string) bool) {
		t.Helper()
		start := time.Now()
		deadline := start.Add(within)
		for {
			var alive []string
			for esc, pid := range pids {
				if which(esc) && procLive(pid) {
					alive = append(alive, fmt.Sprintf("%s (pid %d)", esc, pid))
				}
			}
			if len(alive) == 0 {
				t.Logf("%s/%s: escapees gone %s after %s", mode, event, time.Since(start).Round(time.Millisecond), what)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("escapees alive %s after %s: %s\n%s", within, what, strings.Join(alive, ", "), tail(d.output(), 30))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	all := func(string) bool { return true }
	containment := got

	switch event {
	case "end":
		// Iteration 1 failed and its agent exited; iteration 2 ran in the
		// same worktree and watched it.
		waitFor(t, 40*time.Second, "every loop to complete", func() bool {
			for _, id := range ids {
				if l := show(t, r, id); l.Status != loop.Complete {
					if l.Status.Terminal() {
						t.Fatalf("loop %s is %s: %s", id, l.Status, l.Reason)
					}
					return false
				}
			}
			return true
		})
		gone("the loops completed", 0, all)
		for esc, id := range ids {
			if b, err := os.ReadFile(filepath.Join(marks, id+".grew")); err == nil {
				t.Errorf("%s: iteration 1's escapee wrote into iteration 2's worktree (escape.txt %s)", esc, strings.TrimSpace(string(b)))
			}
			if l := show(t, r, id); l.Iteration != 2 {
				t.Errorf("%s: complete at iteration %d, want 2", esc, l.Iteration)
			}
		}
	case "cancel":
		start := time.Now()
		for _, id := range ids {
			ok(t, r.dir, "cancel", id)
		}
		gone("loopr cancel", 10*time.Second, all)
		t.Logf("%s: three cancels and their escapees gone in %s", mode, time.Since(start).Round(time.Millisecond))
	case "timeout":
		// timeout_secs 2, max_iterations 1: each agent is stopped at 2 s and
		// its loop fails.
		waitFor(t, 30*time.Second, "every loop to time out", func() bool {
			for _, id := range ids {
				if l := show(t, r, id); !l.Status.Terminal() {
					return false
				} else if l.Status != loop.Failed || !strings.Contains(l.Reason, "timed out") {
					t.Fatalf("loop %s is %s (%q), want failed: timed out", id, l.Status, l.Reason)
				}
			}
			return true
		})
		gone("the loops timed out", 0, all)
	case "stop":
		start := time.Now()
		if code := d.stop(); code != 0 {
			t.Errorf("daemon exit %d after SIGTERM, want 0:\n%s", code, tail(d.output(), 30))
		}
		t.Logf("%s: SIGTERM stop took %s", mode, time.Since(start).Round(time.Millisecond))
		gone("the daemon stopped", 0, all)
	case "crash":
		// Without cgroups the daemon records its strays once a second.
		time.Sleep(1500 * time.Millisecond)
		d.crash(t)
		time.Sleep(200 * time.Millisecond)
		for esc, pid := range pids {
			if !procLive(pid) {
				t.Fatalf("%s: escapee %d died with the daemon; the crash case proves nothing", esc, pid)
			}
		}
		d2 := startDaemonEnv(t, r, env, guard)
		gone("the next daemon started", 10*time.Second, all)
		stopCleanly(t, r, d2)
		// The restarted loops' own escapees went with the clean stop.
		for esc, id := range ids {
			if pid, ok := escapee(marks, id, 2); ok && procLive(pid) {
				t.Errorf("%s: iteration 2's escapee %d outlived the clean stop", esc, pid)
			}
		}
	case "guard":
		// The guard ends them without a next daemon: within 1 s.
		time.Sleep(1500 * time.Millisecond) // without cgroups the strays are recorded once a second
		d.crash(t)
		gone("the daemon's SIGKILL (its guard)", time.Second, all)
	}
	ticksStill(t, marks, ids)
	if event != "crash" && event != "stop" && event != "guard" { // guard: the daemon is dead
		stopCleanly(t, r, d)
	}
	if containment == "cgroup" {
		// The daemon records its cgroup in the home; a clean stop removes it.
		b, err := os.ReadFile(filepath.Join(r.home, "cgroup"))
		if err != nil {
			t.Fatalf("the daemon did not record its cgroup: %v", err)
		}
		if dir := strings.TrimSpace(string(b)); !strings.Contains(dir, "/loopr-") {
			t.Errorf("recorded cgroup %q is not a loopr cgroup", dir)
		} else if _, err := os.Stat(dir); err == nil {
			entries, _ := os.ReadDir(dir)
			var cells []string
			for _, e := range entries {
				if e.IsDir() {
					cells = append(cells, e.Name())
				}
			}
			t.Errorf("cgroup %s left behind after a clean stop (cells %v)", dir, cells)
		}
	}
}
