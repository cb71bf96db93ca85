//go:build linux

package contain

import (
	"errors"
	"github.com/loopr-dev/loopr/internal/testslack"
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

// waitGone waits up to 2 s (scaled by the load) for the process to end (the test process is
// its parent: it is reaped by Wait in the cleanup, so a zombie counts as
// gone).
func waitGone(pid int) bool {
	for deadline := time.Now().Add(testslack.Scale(2 * time.Second)); time.Now().Before(deadline); {
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

// liveDaemon returns the pid and start time of a process that runs for
// the test (a frozen daemon, to its guard: alive, silent).
func liveDaemon(t *testing.T) (int, uint64) {
	t.Helper()
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c.Process.Pid, startTime(c.Process.Pid)
}

func TestGuardKillsAFrozenDaemonsAgentsAndWatchesOn(t *testing.T) {
	home := t.TempDir()
	const beat = 300 * time.Millisecond
	pid, start := liveDaemon(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	frozen := make(chan int, 4)
	type result struct {
		n   int
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := Guard(GuardOptions{Home: home, PID: pid, Start: start, Ctl: pr, Heartbeat: beat, OnFrozen: func(n int) { frozen <- n }})
		res <- result{n, err}
	}()
	agent := sleeper(t, home, "L1")
	// Beating: 3 × the timeout passes and the agent lives.
	var silent time.Time // the last beat
	for range 12 {
		if _, err := pw.Write([]byte{guardBeat}); err != nil {
			t.Fatal(err)
		}
		silent = time.Now()
		time.Sleep(beat / 4)
	}
	if !processAlive(agent.Process.Pid, 0) {
		t.Fatal("the guard killed the agent of a daemon that sent its heartbeats")
	}
	select {
	case n := <-frozen:
		t.Fatalf("the guard took a beating daemon for frozen (killed %d)", n)
	default:
	}
	// Silent (frozen): the agent dies within the timeout and a little.
	select {
	case n := <-frozen:
		took := time.Since(silent)
		if n < 1 || took < beat || took > beat+time.Second {
			t.Fatalf("frozen daemon: killed %d after %s; want ≥ 1 after %s to %s", n, took, beat, beat+time.Second)
		}
		t.Logf("silent for %s: the guard killed %d processes (timeout %s)", took.Round(time.Millisecond), n, beat)
	case <-time.After(beat + 2*time.Second):
		t.Fatal("the guard did not act on a daemon silent for its heartbeat timeout")
	}
	if !waitGone(agent.Process.Pid) {
		t.Fatal("the frozen daemon's agent survived its guard")
	}
	// It watches on: the daemon resumes and starts an agent; beating,
	// that one lives; a clean stop ends the guard without a kill.
	again := sleeper(t, home, "L2")
	for range 8 {
		if _, err := pw.Write([]byte{guardBeat}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(beat / 4)
	}
	if !processAlive(again.Process.Pid, 0) {
		t.Fatal("the guard killed an agent of the resumed, beating daemon")
	}
	if _, err := pw.Write([]byte{guardStop}); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	select {
	case r := <-res:
		if !errors.Is(r.err, ErrGuardStopped) {
			t.Fatalf("Guard after a clean stop = %d, %v; want ErrGuardStopped", r.n, r.err)
		}
	case <-time.After(testslack.Scale(2 * time.Second)):
		t.Fatal("the guard did not end after a clean stop")
	}
	if !processAlive(again.Process.Pid, 0) {
		t.Fatal("a clean stop killed the agent")
	}
}

func TestGuardWithoutHeartbeatWaitsForTheEnd(t *testing.T) {
	// bbolt: no heartbeat; a silent daemon is not taken for frozen.
	home := t.TempDir()
	pid, start := liveDaemon(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	agent := sleeper(t, home, "L1")
	res := make(chan error, 1)
	go func() {
		_, err := Guard(GuardOptions{Home: home, PID: pid, Start: start, Ctl: pr})
		res <- err
	}()
	time.Sleep(time.Second)
	if !processAlive(agent.Process.Pid, 0) {
		t.Fatal("a guard without a heartbeat killed the agent of a silent, live daemon")
	}
	pw.Write([]byte{guardStop})
	pw.Close()
	if err := <-res; !errors.Is(err, ErrGuardStopped) {
		t.Fatalf("Guard after a clean stop = %v; want ErrGuardStopped", err)
	}
}
