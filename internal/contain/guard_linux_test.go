//go:build linux

package contain

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sleeper starts `sleep 60` with LOOPR_HOME=home and LOOPR_LOOP_ID=loop,
// as an agent of that home.
func sleeper(t *testing.T, home, loop string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "60")
	c.Env = []string{"LOOPR_HOME=" + home, "LOOPR_LOOP_ID=" + loop}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

// deadDaemon returns the pid and start time of a process that has ended.
func deadDaemon(t *testing.T) (int, uint64) {
	t.Helper()
	c := exec.Command("sleep", "0.01")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	start := startTime(c.Process.Pid)
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid, start
}

// waitGone waits up to 2 s for the process to end (the test process is
// its parent: it is reaped by Wait in the cleanup, so a zombie counts as
// gone).
func waitGone(pid int) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if !processAlive(pid, 0) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func TestGuardCleanStopKillsNothing(t *testing.T) {
	home := t.TempDir()
	agent := sleeper(t, home, "L1")
	pid, start := deadDaemon(t)
	n, err := Guard(GuardOptions{Home: home, PID: pid, Start: start, Ctl: strings.NewReader(string(guardStop))})
	if !errors.Is(err, ErrGuardStopped) || n != 0 {
		t.Fatalf("Guard after a clean stop = %d, %v; want 0, ErrGuardStopped", n, err)
	}
	if !processAlive(agent.Process.Pid, 0) {
		t.Fatal("a clean stop killed the agent")
	}
}

func TestGuardKillsOnlyItsDaemonsProcesses(t *testing.T) {
	home := t.TempDir()
	other := t.TempDir()
	agent := sleeper(t, home, "L1")
	stranger := sleeper(t, other, "L1")  // another home's agent
	stray := exec.Command("sleep", "60") // a recorded stray, environment cleared
	stray.Env = []string{}
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stray.Process.Kill(); _ = stray.Wait() })
	pid, start := deadDaemon(t)
	rec := "daemon " + instance(pid, start) + "\n" + strconv.Itoa(stray.Process.Pid) + " " + strconv.FormatUint(startTime(stray.Process.Pid), 10)
	if err := os.WriteFile(filepath.Join(home, strayFile), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := Guard(GuardOptions{Home: home, PID: pid, Start: start, Ctl: strings.NewReader("")})
	if err != nil || n < 2 {
		t.Fatalf("Guard after a crash = %d, %v; want the agent and the stray", n, err)
	}
	if !waitGone(agent.Process.Pid) || !waitGone(stray.Process.Pid) {
		t.Fatal("the dead daemon's agent or recorded stray survived its guard")
	}
	if !processAlive(stranger.Process.Pid, 0) {
		t.Fatal("the guard killed another home's agent")
	}
}

func TestGuardLeavesANewerDaemonsProcesses(t *testing.T) {
	home := t.TempDir()
	// A newer daemon of the home runs (this test process, in the pid
	// file) with an agent, and recorded its own strays.
	if err := os.WriteFile(filepath.Join(home, "daemon.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	agent := sleeper(t, home, "L1")
	stray := sleeper(t, t.TempDir(), "")
	rec := "daemon " + instance(os.Getpid(), startTime(os.Getpid())) + "\n" + strconv.Itoa(stray.Process.Pid) + " " + strconv.FormatUint(startTime(stray.Process.Pid), 10)
	if err := os.WriteFile(filepath.Join(home, strayFile), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	pid, start := deadDaemon(t) // the old daemon, whose guard acts late
	if _, err := Guard(GuardOptions{Home: home, PID: pid, Start: start, Ctl: strings.NewReader("")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if !processAlive(agent.Process.Pid, 0) || !processAlive(stray.Process.Pid, 0) {
		t.Fatal("an old daemon's guard killed processes of the newer daemon of its home")
	}
}

func TestCellNamesCarryTheInstance(t *testing.T) {
	j, _ := newJail(t, "cgroup", ModeCgroup)
	cmd, cell, err := j.Start(func() *exec.Cmd { return exec.Command("true") }, "L1.1.agent")
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	j.Exited(cmd.Process.Pid)
	defer cell.End()
	if want := ".p" + strconv.Itoa(os.Getpid()) + "-"; !strings.Contains(filepath.Base(cell.dir), want) {
		t.Fatalf("cell %s does not carry the daemon's instance %s", cell.dir, j.inst)
	}
}
