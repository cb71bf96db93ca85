package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// The guard (issue 14): a daemon killed with SIGKILL leaves no agent
// running. `loopr _guard`, started detached by the daemon, sees it die and
// kills exactly what it started — its agents, their escaped grandchildren,
// its validate commands — and nothing of a daemon started after it.

// guardConfig runs testdata/guardagent.sh MARKS for ralph loops in
// worktrees, with guardvalidate.sh MARKS as their validate command.
func guardConfig(t *testing.T, marks string) string {
	t.Helper()
	agent, _ := json.Marshal([]string{"sh", abs(t, "testdata/guardagent.sh"), marks})
	validate, _ := json.Marshal([]string{"sh " + abs(t, "testdata/guardvalidate.sh") + " " + marks})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
agent:
  command: %s
  timeout_secs: 600
loops:
  ralph: {max_iterations: 3, validate: %s}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, agent, validate)
}

// guardProcs are the processes of one daemon's two loops.
type guardProcs struct{ agent, grandchild, validate int }

func (g guardProcs) alive() []string {
	var out []string
	for name, pid := range map[string]int{"agent": g.agent, "setsid grandchild": g.grandchild, "validate": g.validate} {
		if procLive(pid) {
			out = append(out, fmt.Sprintf("%s (pid %d)", name, pid))
		}
	}
	return out
}

// readPID reads a pid a script wrote to path, 0 if not yet.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// startGuarded starts a daemon in r and two ralph loops — one whose agent
// holds with a setsid grandchild, one whose validate command holds — and
// waits until all three processes run. Each call's pid files are new: the
// marks of an earlier daemon's runs are removed first.
func startGuarded(t *testing.T, r repo, marks, env string) (*daemonProc, guardProcs, [2]string) {
	t.Helper()
	d := startDaemonEnv(t, r, env)
	var ids [2]string
	for i, title := range []string{"hold", "validate"} {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", title, "--task", "guard: "+title, "--json"), &l)
		ids[i] = l.ID
	}
	return d, waitGuarded(t, d, marks, ids), ids
}

func waitGuarded(t *testing.T, d *daemonProc, marks string, ids [2]string) guardProcs {
	t.Helper()
	var g guardProcs
	waitFor(t, 30*time.Second, "the agent, its grandchild and the validate command to run", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		g = guardProcs{
			agent:      readPID(filepath.Join(marks, ids[0]+".agent")),
			grandchild: readPID(filepath.Join(marks, ids[0]+".grandchild")),
			validate:   readPID(filepath.Join(marks, ids[1]+".validate")),
		}
		return g.agent > 0 && g.grandchild > 0 && g.validate > 0 &&
			procLive(g.agent) && procLive(g.grandchild) && procLive(g.validate)
	})
	return g
}

// clearMarks removes the pid files of ids, so that the next run's are new.
func clearMarks(t *testing.T, marks string, ids [2]string) {
	t.Helper()
	for _, id := range ids {
		for _, what := range []string{".agent", ".grandchild", ".validate"} {
			if err := os.Remove(filepath.Join(marks, id+what)); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
}

// guardOf finds the guard process of the daemon with pid: `loopr _guard
// ... --pid PID ...`.
func guardOf(pid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 2 || args[1] != "_guard" {
			continue
		}
		for i := range len(args) - 1 {
			if args[i] == "--pid" && args[i+1] == strconv.Itoa(pid) {
				return p
			}
		}
	}
	return 0
}

// TestGuard: in each containment mode, (1) SIGKILL of a daemon: its agent,
// the agent's setsid grandchild and its running validate command are gone
// within 1 s, with no daemon started after it; (2) a clean stop: the guard
// exits and kills nothing; (3) a daemon started right after a SIGKILL of
// the previous one keeps its new agents, even when the old daemon's guard
// acts only after they started (it was stopped with SIGSTOP meanwhile).
func TestGuard(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			marks := t.TempDir()
			r := newRepo(t, guardConfig(t, marks))
			env := "LOOPR_CONTAINMENT=" + mode

			// (1) SIGKILL: gone within 1 s.
			d, g, ids := startGuarded(t, r, marks, env)
			containment := status(t, r).Containment
			guard := guardOf(d.cmd.Process.Pid)
			if guard == 0 || !procLive(guard) {
				t.Fatalf("no guard process for daemon %d", d.cmd.Process.Pid)
			}
			d.crash(t)
			killed := time.Now()
			for len(g.alive()) > 0 && time.Since(killed) < 3*time.Second {
				time.Sleep(5 * time.Millisecond)
			}
			took := time.Since(killed)
			t.Logf("%s (%s): SIGKILL of the daemon; its agent, the setsid grandchild and the validate command gone in %s",
				mode, containment, took.Round(time.Millisecond))
			if left := g.alive(); len(left) > 0 || took > time.Second {
				t.Fatalf("after the daemon's SIGKILL, %s later still alive: %v\nguard.log: %s", took.Round(time.Millisecond), left, guardLog(r))
			}
			waitFor(t, 5*time.Second, "the guard to exit", func() bool { return !procLive(guard) })
			if !strings.Contains(guardLog(r), fmt.Sprintf("daemon pid %d", d.cmd.Process.Pid)) {
				t.Errorf("guard.log does not say what the guard did:\n%s", guardLog(r))
			}

			// (3) A daemon started right after: its new agents live, though
			// the old guard runs only once they do.
			d2 := startDaemonEnv(t, r, env)
			waitFor(t, 30*time.Second, "the interrupted loops to run again", func() bool {
				return readPID(filepath.Join(marks, ids[0]+".agent")) != g.agent && procLive(readPID(filepath.Join(marks, ids[0]+".agent")))
			})
			g2 := waitGuarded(t, d2, marks, ids)
			frozen := guardOf(d2.cmd.Process.Pid)
			if frozen == 0 {
				t.Fatalf("no guard process for daemon %d", d2.cmd.Process.Pid)
			}
			if err := syscall.Kill(frozen, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(frozen, syscall.SIGCONT) }) // never left stopped
			d2.crash(t)
			clearMarks(t, marks, ids)
			d3 := startDaemonEnv(t, r, env) // its Recover ends d2's agents
			g3 := waitGuarded(t, d3, marks, ids)
			if left := g2.alive(); len(left) > 0 {
				t.Errorf("the second daemon's processes outlived the third's start: %v", left)
			}
			if err := syscall.Kill(frozen, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the second daemon's guard to exit", func() bool { return !procLive(frozen) })
			time.Sleep(300 * time.Millisecond)
			if left := g3.alive(); len(left) != 3 {
				t.Fatalf("the old guard killed processes of the daemon started after its own: alive %v of %+v\nguard.log: %s", left, g3, guardLog(r))
			}

			// (2) A clean stop: the guard exits and kills nothing.
			guard3 := guardOf(d3.cmd.Process.Pid)
			if guard3 == 0 {
				t.Fatalf("no guard process for daemon %d", d3.cmd.Process.Pid)
			}
			before := guardLog(r)
			stopCleanly(t, r, d3)
			waitFor(t, 5*time.Second, "the guard to exit after the clean stop", func() bool { return !procLive(guard3) })
			if after := guardLog(r); after != before {
				t.Errorf("the guard acted on a clean stop:\n%s", strings.TrimPrefix(after, before))
			}
			if left := g3.alive(); len(left) > 0 {
				t.Errorf("processes outlived the clean stop: %v", left)
			}
		})
	}
}

// guardLog is what the guards of r's home logged.
func guardLog(r repo) string {
	b, _ := os.ReadFile(filepath.Join(r.home, "logs", "guard.log"))
	return string(b)
}
