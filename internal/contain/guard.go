package contain

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
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
// A worker daemon of an etcd store also writes a heartbeat byte on the
// pipe (StartGuard's heartbeat); its guard, run with --heartbeat, kills
// the same processes when none came for that long while the daemon lives
// (frozen: SIGSTOP, a debugger, a paused VM), then watches on.
//
// Only that daemon's processes: its cgroup cells carry its instance
// (pid and start time) in their names, its strays file names it, and the
// environment scan takes only processes of its home started before it
// died (and what is below them), never those of a daemon started after.

// EnvGuard names the environment variable that turns the guard off when
// "off": for the tests that prove what a restarted daemon's Recover ends
// by itself.
const EnvGuard = "LOOPR_GUARD"

// guardStop is the byte a daemon that stops cleanly writes to its guard;
// guardBeat the one a worker daemon writes while it runs (StartGuard).
const (
	guardStop = 's'
	guardBeat = 'h'
)

// instance names one daemon process: its pid and start time (clock ticks
// after boot), which no later process repeats.
func instance(pid int, start uint64) string { return fmt.Sprintf("p%d-%d", pid, start) }

// StartGuard starts `bin _guard` for this jail's daemon (the calling
// process), detached, and returns the function a clean stop calls: it
// tells the guard to exit without killing anything. bin is the loopr
// executable. A nil jail has nothing to guard.
//
// heartbeat > 0 (a worker of an etcd store: half its lease TTL) also
// makes this process write a heartbeat on the pipe every heartbeat/3,
// and the guard kill its agents when none came for heartbeat: a frozen
// daemon (SIGSTOP, a debugger, a paused VM) cannot keep its lease alive,
// so its loops go to other workers, and its agents must not run on
// beside them. 0 (bbolt): no heartbeat, no timeout.
func (j *Jail) StartGuard(bin string, heartbeat time.Duration) (stop func(), err error) {
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
	if heartbeat > 0 {
		args = append(args, "--heartbeat", heartbeat.String())
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
	var mu sync.Mutex // one writer at a time: the beats, then the stop
	done := make(chan struct{})
	if heartbeat > 0 {
		go func() {
			t := time.NewTicker(heartbeat / 3)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
				}
				mu.Lock()
				select {
				case <-done:
				default:
					_, _ = pw.Write([]byte{guardBeat}) // EPIPE once the guard is gone: nothing to do
				}
				mu.Unlock()
			}
		}()
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-done:
			return
		default:
		}
		close(done)
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
	// Heartbeat > 0: the daemon writes a heartbeat on Ctl at least this
	// often; when none came for Heartbeat, the daemon is frozen and the
	// guard kills its processes (as on a crash) but keeps watching.
	Heartbeat time.Duration
	// OnFrozen, if set, is called after each such kill with how many
	// processes were found (for tests).
	OnFrozen func(n int)
}

// ErrGuardStopped is what Guard returns after a clean stop.
var ErrGuardStopped = errors.New("the daemon stopped cleanly")

// Guard waits until the daemon o names ends. After a clean stop it returns
// ErrGuardStopped at once; otherwise it kills what that daemon started and
// returns how many processes it found.
//
// With o.Heartbeat set it also kills what the daemon started each time
// its heartbeats stop for o.Heartbeat while the daemon lives (frozen),
// then watches on: a daemon that resumes beats again, and a later freeze
// or its end is handled the same way.
func Guard(o GuardOptions) (int, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	type chunk struct {
		b   []byte
		err error
	}
	reads := make(chan chunk)
	go func() {
		for {
			buf := make([]byte, 16)
			n, err := o.Ctl.Read(buf)
			reads <- chunk{buf[:n], err}
			if err != nil {
				return
			}
		}
	}()
	var silence <-chan time.Time
	var timer *time.Timer
	if o.Heartbeat > 0 {
		timer = time.NewTimer(o.Heartbeat)
		defer timer.Stop()
		silence = timer.C
	}
	clean, frozen := false, false
	for ended := false; !ended; {
		select {
		case c := <-reads:
			for _, b := range c.b {
				clean = clean || b == guardStop
			}
			ended = c.err != nil
			if timer != nil && len(c.b) > 0 {
				if frozen {
					fmt.Fprintf(o.Log, "loopr guard: daemon pid %d of %s beats again\n", o.PID, o.Home)
					frozen = false
				}
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				timer.Reset(o.Heartbeat)
			}
		case <-silence:
			if frozen || !processAlive(o.PID, o.Start) {
				continue // killed once for this silence; or dead: the pipe is about to end
			}
			frozen = true
			began := time.Now()
			n := guardKill(o, uptimeTicks(), true)
			fmt.Fprintf(o.Log, "loopr guard: daemon pid %d of %s sent no heartbeat for %s (frozen?); killed %d of its processes in %s\n",
				o.PID, o.Home, o.Heartbeat, n, time.Since(began).Round(time.Millisecond))
			if o.OnFrozen != nil {
				o.OnFrozen(n)
			}
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
	n := guardKill(o, cutoff, false)
	fmt.Fprintf(o.Log, "loopr guard: daemon pid %d of %s ended without a clean stop; killed %d of its processes in %s\n",
		o.PID, o.Home, n, time.Since(began).Round(time.Millisecond))
	return n, nil
}
