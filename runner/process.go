package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/internal/contain"
	"github.com/loopr-dev/loopr/preset"
	"github.com/loopr-dev/loopr/procenv"
)

// pollInterval is how often a stopping process group is checked for members
// left alive between SIGTERM and SIGKILL.
const pollInterval = 20 * time.Millisecond

// drainTimeout bounds the wait for the output pipe to reach EOF after the
// process group is gone. Only a process that left the group (setsid) and
// kept the pipe open makes it matter.
const drainTimeout = 2 * time.Second

// procSpec describes one child process: the agent, or a validate command.
type procSpec struct {
	argv    []string
	dir     string
	env     []string
	stdin   *os.File  // nil: /dev/null
	out     io.Writer // stdout and stderr, interleaved
	timeout time.Duration
	grace   time.Duration
	started func(pid int) // called once the process runs; must not block
	// stall, when > 0, stops the group once it wrote no output and
	// changed no file under dir (but under none of stallSkip) for that long.
	stall     time.Duration
	stallSkip []string
	// retry, when set with retryAfter > 0, classifies each output line;
	// the group is stopped once it printed only retry notices for
	// retryAfter (see retryWatch).
	retry      func(line []byte) preset.LineKind
	retryAfter time.Duration

	// What contains it beyond its process group (nil: the group alone),
	// and what names its processes: the loop, its home, and the worktree
	// its strays may be found in ("" for the user's workspace).
	jail     *contain.Jail
	name     string // part of its cgroup's name
	loop     string
	home     string
	worktree string
}

// procResult is how a child process ended.
type procResult struct {
	startErr  error // the process never ran
	exitCode  int   // -1 unless it exited on its own
	signal    syscall.Signal
	timedOut  bool
	stalled   bool
	retrying  bool // stopped: it printed only retry notices for retryAfter
	cancelled bool
}

// runProcess runs s in its own process group (and, where the jail has
// them, its own cgroup) and returns when everything it started is gone. On
// timeout or cancellation the group and the cgroup get SIGTERM, then
// SIGKILL after the grace period. Processes the leader leaves behind when it
// exits on its own are stopped the same way: an iteration owns everything it
// started. Then what left both (setsid, a double fork, a cleared
// environment) is found and killed: see package contain.
//
// It deliberately does not use exec.CommandContext: that kills only the
// leader, and exec's own pipe copying makes Wait block for as long as any
// grandchild holds stdout. Here the output goes through a pipe this function
// owns, and stdin is a real file, so Wait waits for the process alone.
func runProcess(ctx context.Context, s procSpec) procResult {
	res := procResult{exitCode: -1}
	if len(s.argv) == 0 || s.argv[0] == "" {
		res.startErr = errors.New("empty command")
		return res
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		res.startErr = err
		return res
	}
	defer pr.Close()

	mk := func() *exec.Cmd {
		cmd := exec.Command(s.argv[0], s.argv[1:]...)
		cmd.Dir = s.dir
		cmd.Env = procenv.InDir(s.env, s.dir)
		if s.stdin != nil {
			cmd.Stdin = s.stdin
		}
		cmd.Stdout, cmd.Stderr = pw, pw
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	cmd, cell, err := s.jail.Start(mk, s.name)
	pw.Close() // the child holds its own copy; EOF comes when the group is gone
	if err != nil {
		res.startErr = err
		return res
	}
	pgid := cmd.Process.Pid // Setpgid: the leader's pid names the group

	stalled, retrying, stopWatches := s.watches(ctx)
	defer stopWatches()

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(s.out, pr)
	}()
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		s.jail.Exited(pgid)
		waited <- err
	}()
	if s.started != nil {
		s.started(pgid)
	}

	var timeout <-chan time.Time
	if s.timeout > 0 {
		t := time.NewTimer(s.timeout)
		defer t.Stop()
		timeout = t.C
	}
	exited := false
	select {
	case <-waited:
		exited = true
	case <-ctx.Done():
		res.cancelled = true
	case <-timeout:
		res.timedOut = true
	case <-stalled:
		res.stalled = true
	case <-retrying:
		res.retrying = true
	}

	if res.cancelled && errors.Is(context.Cause(ctx), ErrKill) {
		s.grace = 0 // fenced: no grace, SIGKILL now
	}
	s.end(pgid, cell, waited, exited)

	select {
	case <-copied:
	case <-time.After(drainTimeout):
		pr.Close() // unblocks the copy; os.Pipe files are pollable
		<-copied
	}

	if ps := cmd.ProcessState; ps != nil {
		res.exitCode = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.signal = ws.Signal()
		}
	}
	return res
}

// watches starts the stall and retry watches s asks for, on s.out, and
// returns their channels (nil: not watched) and what stops them.
func (s *procSpec) watches(ctx context.Context) (stalled, retrying <-chan struct{}, stop func()) {
	var stops []func()
	if s.stall > 0 {
		a := &activity{}
		a.touch()
		s.out = activeWriter{w: s.out, a: a}
		watchCtx, stopWatch := context.WithCancel(ctx)
		stops = append(stops, stopWatch)
		stalled = watchStall(watchCtx, s.dir, s.stallSkip, s.stall, a)
	}
	if s.retry != nil && s.retryAfter > 0 {
		w := newRetryWatch(s.retry, s.retryAfter)
		stops = append(stops, w.stop)
		s.out = io.MultiWriter(s.out, w)
		retrying = w.fired
	}
	return stalled, retrying, func() {
		for _, f := range stops {
			f()
		}
	}
}

// end stops what is left of the process group pgid (and its cgroup cell)
// once the wait ended: the leader exited, or (not exited) it is signalled
// SIGTERM, then SIGKILL after the grace; then whatever left the group.
func (s procSpec) end(pgid int, cell *contain.Cell, waited <-chan error, exited bool) {
	if exited {
		stopGroup(pgid, cell, s.grace, false)
	} else {
		deadline := time.Now().Add(s.grace)
		signalGroup(pgid, syscall.SIGTERM)
		cell.Signal(syscall.SIGTERM)
		g := time.NewTimer(s.grace)
		select {
		case <-waited:
		case <-g.C:
			signalGroup(pgid, syscall.SIGKILL)
			cell.Kill()
			<-waited
		}
		g.Stop()
		stopGroup(pgid, cell, time.Until(deadline), true)
	}
	// Whatever left the group and the cgroup: strays reparented to the
	// daemon and, without cgroups, whatever carries the loop's id. Before
	// the drain: such a process may hold the output pipe.
	cell.End()
	if s.loop != "" && s.jail.Mode() != contain.ModeCgroup {
		contain.KillMatching(contain.Match{Home: s.home, Loop: s.loop})
	}
	s.jail.KillStrays(s.loop, s.worktree)
}

// killWait bounds the wait for a SIGKILLed group to disappear. SIGKILL is
// delivered asynchronously; waiting means the caller sees the group gone.
const killWait = time.Second

// stopGroup ends what is left of process group pgid and of cell after the
// leader was reaped: SIGTERM (unless already sent), up to grace for the
// members to go, then SIGKILL, and a short wait until the kill took effect.
func stopGroup(pgid int, cell *contain.Cell, grace time.Duration, termSent bool) {
	if !groupAlive(pgid) && cell.Empty() {
		return
	}
	if !termSent {
		signalGroup(pgid, syscall.SIGTERM)
		cell.Signal(syscall.SIGTERM)
	}
	if waitGone(pgid, cell, grace) {
		return
	}
	signalGroup(pgid, syscall.SIGKILL)
	cell.Kill()
	waitGone(pgid, cell, killWait)
}

// waitGone polls until group pgid and cell have no live members or d has
// passed, and reports whether they are gone.
func waitGone(pgid int, cell *contain.Cell, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !groupAlive(pgid) && cell.Empty() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}

func signalGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig) // ESRCH: the group is already gone
}

// groupAlive reports whether process group pgid has a live member. kill(2)
// also counts zombies (members that exited but were not yet reaped by their
// new parent, which in a container may be an init that never reaps), so
// where /proc exists a group of only zombies counts as gone.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	live, ok := procGroupLive(pgid)
	return !ok || live
}

// procGroupLive scans /proc for a member of group pgid that is not a zombie.
// ok is false when /proc cannot be read (not Linux).
func procGroupLive(pgid int) (live, ok bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	want := strconv.Itoa(pgid)
	for _, e := range entries {
		name := e.Name()
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true, true
		}
	}
	return false, true
}

// Command is a process the daemon runs besides iterations (notify.command):
// contained as an agent is, in a process group and, where the jail has
// them, a cgroup of its own, and when it ends everything it started ends
// with it, however it detached.
type Command struct {
	Argv    []string
	Dir     string
	Env     []string      // LOOPR_HOME and LOOPR_LOOP_ID name its processes for the jail
	Timeout time.Duration // then SIGTERM, and SIGKILL after Grace
	Grace   time.Duration
	Jail    *contain.Jail
	Name    string // part of its cgroup's name
	Home    string // the daemon's home
	Loop    string // the loop it is about: its strays carry LOOPR_LOOP_ID=Loop
}

// RunCommand runs c with its output (stdout and stderr, interleaved) to
// out, and returns once it and everything it started are gone: nil when it
// exited 0, else what went wrong (it could not start, it timed out, it was
// cancelled, its exit status or signal).
func RunCommand(ctx context.Context, c Command, out io.Writer) error {
	p := runProcess(ctx, procSpec{argv: c.Argv, dir: c.Dir, env: c.Env, out: out, timeout: c.Timeout, grace: c.Grace,
		jail: c.Jail, name: c.Name, loop: c.Loop, home: c.Home})
	switch {
	case p.startErr != nil:
		return fmt.Errorf("could not start: %w", p.startErr)
	case p.timedOut:
		return fmt.Errorf("timed out after %s", c.Timeout)
	case p.cancelled:
		return fmt.Errorf("cancelled: %w", context.Cause(ctx))
	case p.signal != 0:
		return fmt.Errorf("killed by signal %d (%v)", int(p.signal), p.signal)
	case p.exitCode != 0:
		return fmt.Errorf("exit status %d", p.exitCode)
	}
	return nil
}
