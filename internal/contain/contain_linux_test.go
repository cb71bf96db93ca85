//go:build linux

package contain

import (
	"context"
	"fmt"
	"github.com/loopr-dev/loopr/internal/testslack"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// escapeCmd is a shell that starts a detached grandchild (setsid, a
// cleared environment when envi) writing its pid to pidFile, then exits.
func escapeCmd(home, loop, dir, pidFile string, envi bool) func() *exec.Cmd {
	return func() *exec.Cmd {
		inner := `echo $$ >"$0"; exec sleep 60`
		script := fmt.Sprintf(`setsid sh -c '%s' %q </dev/null >/dev/null 2>&1 &`, inner, pidFile)
		if envi {
			script = fmt.Sprintf(`env -i PATH="$PATH" setsid sh -c '%s' %q </dev/null >/dev/null 2>&1 &`, inner, pidFile)
		}
		script += fmt.Sprintf(`
while [ ! -s %q ]; do sleep 0.01; done`, pidFile)
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LOOPR_HOME="+home, "LOOPR_LOOP_ID="+loop)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// newJail sets up a jail for a fresh home with want, and skips the test
// with the reason when the machine does not allow mode.
func newJail(t *testing.T, want, mode string) (*Jail, string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), ".loopr")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	j, err := Setup(home, want, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j.Mode() != mode {
		t.Skipf("%s is not available here: %s", mode, j.Why())
	}
	return j, home
}

// runReaper runs j's reaper until the test ends.
func runReaper(t *testing.T, j *Jail) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { j.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func live(pid int) bool {
	p, ok := readStat(pid)
	return ok && !p.dead()
}

// TestJailEndsWhatLeavesTheGroup: a grandchild that setsid()s, and one that
// also clears its environment, are both gone once the cell is ended and
// the strays are killed, in every mode this machine allows; the process
// group alone would have missed them.
func TestJailEndsWhatLeavesTheGroup(t *testing.T) {
	for _, want := range []string{"auto", "subreaper"} {
		t.Run(want, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), ".loopr")
			wt := filepath.Join(home, "worktrees", "L1")
			if err := os.MkdirAll(wt, 0o755); err != nil {
				t.Fatal(err)
			}
			wt, _ = filepath.EvalSymlinks(wt)
			j, err := Setup(home, want, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			if j.Mode() == ModeScan {
				t.Skipf("neither cgroups nor a subreaper here: %s", j.Why())
			}
			t.Logf("mode %s: %s", j.Mode(), j.Why())
			for _, envi := range []bool{false, true} {
				pf := filepath.Join(t.TempDir(), "pid")
				cmd, cell, err := j.Start(escapeCmd(home, "L1", wt, pf, envi), "L1.1.agent")
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					t.Fatalf("wait for the leader: %v", err)
				}
				j.Exited(cmd.Process.Pid)
				pid := readPID(t, pf)
				if !live(pid) {
					t.Fatalf("escapee %d is not running", pid)
				}
				if syscall.Kill(-cmd.Process.Pid, 0) != syscall.ESRCH {
					t.Fatalf("the leader's group still has members: the escapee did not leave it")
				}
				cell.End()
				j.KillStrays("L1", wt)
				deadline := time.Now().Add(KillWait)
				for live(pid) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if live(pid) {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("envi=%v: escapee %d outlived the end of its cell (mode %s)", envi, pid, j.Mode())
				}
			}
		})
	}
}

// TestKillStraysLeavesOtherLoops: a stray of another loop, while that
// loop's agent still runs, is not this loop's to kill.
func TestKillStraysLeavesOtherLoops(t *testing.T) {
	j, home := newJail(t, "subreaper", ModeSubreaper)
	// Another loop's agent, still running: the jail is not idle.
	busy, _, err := j.Start(func() *exec.Cmd { return exec.Command("sleep", "60") }, "L2.1.agent")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { busy.Process.Kill(); busy.Wait(); j.Exited(busy.Process.Pid) }()
	pf := filepath.Join(t.TempDir(), "pid")
	cmd, _, err := j.Start(escapeCmd(home, "L2", t.TempDir(), pf, false), "L2.1.agent")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	j.Exited(cmd.Process.Pid)
	pid := readPID(t, pf)
	defer syscall.Kill(pid, syscall.SIGKILL)
	if n := j.KillStrays("L1", ""); n != 0 || !live(pid) {
		t.Errorf("KillStrays(L1) killed %d, escapee of L2 alive %v: want 0 and alive", n, live(pid))
	}
	if n := j.KillStrays("L2", ""); n != 1 {
		t.Errorf("KillStrays(L2) = %d, want 1", n)
	}
}

// TestRecoverKillsLeftoverCgroups: what a crashed daemon left in its cells
// is killed, and the cells removed, by the next daemon of the same home.
func TestRecoverKillsLeftoverCgroups(t *testing.T) {
	j, home := newJail(t, "cgroup", ModeCgroup)
	defer j.Close()
	j.Recover() // records the cgroup
	// Cleared environment: only the cgroup can find it.
	cmd, cell, err := j.Start(func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.Env = []string{}
		return c
	}, "L1.1.agent")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()

	next, err := Setup(home, "auto", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := next.Recover(); n != 1 {
		t.Errorf("Recover() = %d, want 1 (the sleep)", n)
	}
	select {
	case <-waited:
	case <-time.After(testslack.Scale(5 * time.Second)):
		t.Fatal("the leftover process is still running")
	}
	if _, err := os.Stat(cell.dir); err == nil {
		t.Errorf("cell %s still exists", cell.dir)
	}
}

// TestReaperNeverTakesAnExecChild: with the reaper running, hundreds of
// short exec children (started through the jail, and plainly as git
// commands are) are all waited for by os/exec without an error, while
// orphaned strays are reaped.
func TestReaperNeverTakesAnExecChild(t *testing.T) {
	j, _ := newJail(t, "subreaper", ModeSubreaper)
	runReaper(t, j)

	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 200 {
		wg.Go(func() {
			var cmd *exec.Cmd
			var err error
			if i%2 == 0 {
				// An agent that leaves an orphan behind, which the reaper must reap.
				cmd, _, err = j.Start(func() *exec.Cmd {
					c := exec.Command("sh", "-c", "(true &) ; true")
					c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
					return c
				}, "L.agent")
				if err == nil {
					err = cmd.Wait()
					j.Exited(cmd.Process.Pid)
				}
			} else {
				err = exec.Command("true").Run() // like a git command: the daemon's group
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("an exec child was lost: %v", err)
	}
	// Every orphan was reaped: no zombie child of ours is left.
	deadline := time.Now().Add(testslack.Scale(3 * time.Second))
	for {
		var zombies []int
		for pid, p := range snapshot() {
			if p.ppid == os.Getpid() && p.state == 'Z' {
				zombies = append(zombies, pid)
			}
		}
		if len(zombies) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie children left: %v", zombies)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSetupRefusesAnUnknownMode(t *testing.T) {
	_, err := Setup(t.TempDir(), "jail", nil)
	if err == nil || !strings.Contains(err.Error(), "LOOPR_CONTAINMENT=\"jail\"") {
		t.Errorf("Setup(jail) error = %v, want one naming LOOPR_CONTAINMENT", err)
	}
}

// TestRecoverKillsRecordedStrays: without cgroups, a detached orphan that
// cleared its environment is named only by the strays record the daemon
// keeps in its home; the next daemon kills it from there.
func TestRecoverKillsRecordedStrays(t *testing.T) {
	j, home := newJail(t, "subreaper", ModeSubreaper)
	runReaper(t, j)

	pf := filepath.Join(t.TempDir(), "pid")
	cmd, _, err := j.Start(func() *exec.Cmd {
		c := exec.Command("sh", "-c", fmt.Sprintf(`(env -i setsid sh -c 'echo $$ >%s; exec sleep 60' </dev/null >/dev/null 2>&1 &)
while [ ! -s %[1]s ]; do sleep 0.01; done`, pf))
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return c
	}, "L1.1.agent")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	j.Exited(cmd.Process.Pid)
	pid := readPID(t, pf)
	defer syscall.Kill(pid, syscall.SIGKILL)
	record := filepath.Join(home, strayFile)
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for {
		b, _ := os.ReadFile(record)
		if strings.HasPrefix(string(b), strconv.Itoa(pid)+" ") || strings.Contains(string(b), "\n"+strconv.Itoa(pid)+" ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stray %d never recorded; record %q", pid, b)
		}
		time.Sleep(50 * time.Millisecond)
	}

	next, err := Setup(home, "subreaper", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := next.Recover(); n < 1 {
		t.Errorf("Recover() = %d, want the recorded stray", n)
	}
	if live(pid) {
		t.Errorf("recorded stray %d outlived Recover", pid)
	}
	if _, err := os.Stat(record); err == nil {
		t.Errorf("the record %s is still there", record)
	}
}

// TestStartFailureKeepsCgroups: an agent that cannot start (a missing
// binary) is its own failure, not the cgroup's: the jail keeps cgroups.
func TestStartFailureKeepsCgroups(t *testing.T) {
	j, _ := newJail(t, "cgroup", ModeCgroup)
	defer j.Close()
	_, cell, err := j.Start(func() *exec.Cmd { return exec.Command("/nonexistent/loopr-agent") }, "L1.1.agent")
	if err == nil || cell != nil {
		t.Fatalf("Start(missing binary) = cell %v, err %v; want an error and no cell", cell, err)
	}
	if j.Mode() != ModeCgroup {
		t.Errorf("mode %s after a missing binary (%s), want cgroup kept", j.Mode(), j.Why())
	}
	cmd, cell, err := j.Start(func() *exec.Cmd { return exec.Command("true") }, "L1.2.agent")
	if err != nil || cell == nil {
		t.Fatalf("Start(true) = cell %v, err %v; want it in a cell", cell, err)
	}
	cmd.Wait()
	j.Exited(cmd.Process.Pid)
	cell.End()
}
