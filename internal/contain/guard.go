package contain

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// The guard. A daemon killed with SIGKILL (or dead with its machine's
// power, or an OOM kill) cannot stop its agents; before the guard they ran
// on, spending money, until the next daemon of the home started and its
// Recover ended them. The guard is a small process, `loopr _guard`, that
// the daemon starts detached (a session of its own) when it starts. It
// holds the read end of a pipe whose write end only the daemon holds:
//
//   - clean stop: the daemon writes "s" and closes it; the guard exits
//     and kills nothing;
//   - anything else: the pipe ends without the "s" (the kernel closed the
//     daemon's end as it died); the guard makes sure the daemon is gone
//     (its pid and start time, polled every 50 ms), then kills exactly what
//     that daemon started — see Guard — and exits.
//
// Only that daemon's processes: its cgroup cells carry its instance
// (pid and start time) in their names, its strays file names it, and the
// environment scan takes only processes of its home started before it
// died (and what is below them), never those of a daemon started after.

// EnvGuard names the environment variable that turns the guard off when
// "off": for the tests that prove what a restarted daemon's Recover ends
// by itself.
const EnvGuard = "LOOPR_GUARD"

// guardStop is the byte a daemon that stops cleanly writes to its guard.
const guardStop = 's'

// instance names one daemon process: its pid and start time (clock ticks
// after boot), which no later process repeats.
func instance(pid int, start uint64) string { return fmt.Sprintf("p%d-%d", pid, start) }

// StartGuard starts `bin _guard` for this jail's daemon (the calling
// process), detached, and returns the function a clean stop calls: it
// tells the guard to exit without killing anything. bin is the loopr
// executable. A nil jail has nothing to guard.
func (j *Jail) StartGuard(bin string) (stop func(), err error) {
	if j == nil {
		return func() {}, nil
	}
	pr, pw, err := os.Pipe() // close-on-exec: no agent inherits the write end
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	args := []string{"_guard", "--home", j.home, "--pid", strconv.Itoa(j.self), "--start", strconv.FormatUint(j.start, 10)}
	if root := j.cgroupDir(); root != "" {
		args = append(args, "--cgroup", root)
	}
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{pr} // fd 3
	cmd.Env = []string{}            // no LOOPR_HOME: no scan of any daemon may take the guard for an agent
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Registered like a started process: the reaper and the stray scans
	// leave it alone, yet it does not count as an agent running.
	started.mu.RLock()
	err = cmd.Start()
	if err == nil {
		started.state.Lock()
		started.guards[cmd.Process.Pid] = true
		started.state.Unlock()
	}
	started.mu.RUnlock()
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("start the guard: %w", err)
	}
	pid := cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		started.state.Lock()
		delete(started.guards, pid)
		started.state.Unlock()
	}()
	var done bool
	return func() {
		if done {
			return
		}
		done = true
		_, _ = pw.Write([]byte{guardStop})
		pw.Close()
	}, nil
}

// GuardOptions is what `loopr _guard` was started with.
type GuardOptions struct {
	Home   string
	PID    int    // the daemon's
	Start  uint64 // its start time, clock ticks after boot
	Cgroup string // its cgroup root, "" without cgroups
	Ctl    io.Reader
	Log    io.Writer // one line on what was killed; nil: discard
}

// ErrGuardStopped is what Guard returns after a clean stop.
var ErrGuardStopped = errors.New("the daemon stopped cleanly")

// Guard waits until the daemon o names ends. After a clean stop it returns
// ErrGuardStopped at once; otherwise it kills what that daemon started and
// returns how many processes it found.
func Guard(o GuardOptions) (int, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	clean := false
	buf := make([]byte, 16)
	for {
		n, err := o.Ctl.Read(buf)
		for _, b := range buf[:n] {
			clean = clean || b == guardStop
		}
		if err != nil {
			break
		}
	}
	if clean {
		return 0, ErrGuardStopped
	}
	// The pipe ends the moment the daemon dies: what started later is
	// not its.
	cutoff := uptimeTicks()
	for processAlive(o.PID, o.Start) { // the pipe ended first: the daemon is about to go
		time.Sleep(50 * time.Millisecond)
	}
	began := time.Now()
	n := guardKill(o, cutoff)
	fmt.Fprintf(o.Log, "loopr guard: daemon pid %d of %s ended without a clean stop; killed %d of its processes in %s\n",
		o.PID, o.Home, n, time.Since(began).Round(time.Millisecond))
	return n, nil
}
