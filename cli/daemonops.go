package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/daemon"
)

// noStartEnv, when set to anything but "" or "0", keeps `loopr plan`,
// `loopr add` and `loopr tui` from starting a daemon, as --no-start does
// (for scripts that only queue work).
const noStartEnv = "LOOPR_NO_START"

// Exit codes of `loopr daemon status`: 0 running, 3 not running (as LSB
// init scripts' status action).
const exitNotRunning = 3

// defaultStopWait is how long `loopr daemon stop` waits for the daemon to
// be gone: it stops its agents first (each gets its grace period).
const defaultStopWait = time.Minute

// daemonSubcommands are `loopr daemon status|stop|restart`.
func (e *env) daemonSubcommands() []*cobra.Command {
	var statusJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Say whether a daemon runs here: pid, uptime, socket (exit 0 running, 3 not)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.daemonStatus(cmd.Context(), statusJSON)
		},
	}
	status.Flags().BoolVar(&statusJSON, "json", false, "print the answer as JSON")

	var stopWait time.Duration
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the daemon cleanly (SIGTERM) and wait until it is gone; exit 0 also when none runs",
		Long: `Send the daemon SIGTERM and wait until it has exited: running loops are
stopped and requeued without spending an iteration, the store is closed and
the socket removed. Exit 0 when it stopped or when no daemon was running,
1 when it is still running after --timeout.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			_, err := e.stopDaemon(cmd.Context(), stopWait, true)
			return err
		},
	}
	stop.Flags().DurationVar(&stopWait, "timeout", defaultStopWait, "how long to wait for the daemon to exit")

	var restartWait time.Duration
	var logLevel string
	restart := &cobra.Command{
		Use:   "restart",
		Short: "Stop the daemon (if one runs) and start a new one in the background",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			if _, err := e.stopDaemon(cmd.Context(), restartWait, true); err != nil {
				return err
			}
			return e.detachDaemon(cmd.Context(), logLevel)
		},
	}
	restart.Flags().DurationVar(&restartWait, "timeout", defaultStopWait, "how long to wait for the old daemon to exit")
	restart.Flags().StringVar(&logLevel, "log-level", "info", "log level of the new daemon: debug, info, warn, error")
	return []*cobra.Command{status, stop, restart}
}

// daemonState is `loopr daemon status --json`.
type daemonState struct {
	Running    bool      `json:"running"`
	PID        int       `json:"pid,omitzero"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	UptimeSecs int64     `json:"uptime_secs,omitzero"`
	Version    string    `json:"version,omitzero"`
	Socket     string    `json:"socket"`
	Log        string    `json:"log"`
}

func (e *env) daemonStatus(ctx context.Context, jsonOut bool) error {
	if err := e.resolve(); err != nil {
		return err
	}
	st := daemonState{Socket: e.paths.Socket(), Log: e.daemonLog()}
	c, err := e.dialDaemon(ctx)
	switch {
	case err == nil:
		s, serr := c.Status(ctx)
		c.Close()
		if serr != nil {
			return serr
		}
		st.Running, st.PID, st.StartedAt, st.UptimeSecs, st.Version = true, s.PID, s.StartedAt, s.UptimeSecs, s.Version
	case !errors.Is(err, client.ErrNoDaemon):
		return err
	}
	if jsonOut {
		if err := writeJSON(e.stdout, st); err != nil {
			return err
		}
	} else if st.Running {
		w := table(e.stdout)
		fmt.Fprintf(w, "daemon\trunning\n")
		fmt.Fprintf(w, "pid\t%d\n", st.PID)
		fmt.Fprintf(w, "uptime\t%s (since %s)\n", age(time.Duration(st.UptimeSecs)*time.Second), st.StartedAt.Local().Format("2006-01-02 15:04:05"))
		fmt.Fprintf(w, "version\t%s\n", st.Version)
		fmt.Fprintf(w, "socket\t%s\n", e.rel(st.Socket))
		fmt.Fprintf(w, "log\t%s\n", e.rel(st.Log))
		w.Flush()
	} else {
		fmt.Fprintf(e.stdout, "no loopr daemon running here (socket %s); start one with `loopr daemon --detach`\n", e.rel(st.Socket))
	}
	if !st.Running {
		return ExitStatus(exitNotRunning)
	}
	return nil
}

// stopDaemon stops the daemon serving this home, if any, and waits up to
// wait until its process is gone. It reports whether one was running;
// say prints what it did.
func (e *env) stopDaemon(ctx context.Context, wait time.Duration, say bool) (bool, error) {
	c, err := e.dialDaemon(ctx)
	if errors.Is(err, client.ErrNoDaemon) {
		if say {
			fmt.Fprintf(e.stdout, "no loopr daemon running here (socket %s); nothing to stop\n", e.rel(e.paths.Socket()))
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pid := c.DaemonPID()
	c.Close()
	if kpid, err := daemon.SocketPID(e.paths.Socket()); err == nil {
		pid = kpid // the process this one can signal, whatever the daemon's namespace
	}
	if pid <= 0 {
		return true, fmt.Errorf("the daemon at %s did not say its pid; stop it with SIGTERM yourself", e.paths.Socket())
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil // it exited meanwhile
		}
		return true, fmt.Errorf("stop daemon (pid %d): %w", pid, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for processAlive(pid) {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-deadline:
			return true, fmt.Errorf("daemon (pid %d) still running %s after SIGTERM: it may be waiting for agents to stop; see %s, or wait longer with --timeout",
				pid, wait, e.rel(e.daemonLog()))
		case <-tick.C:
		}
	}
	if say {
		fmt.Fprintf(e.stdout, "stopped loopr daemon (pid %d) in %s\n", pid, time.Since(start).Round(10*time.Millisecond))
	}
	return true, nil
}

// dialDaemon connects to the daemon serving this home. When none answers
// but another process holds the store's lock — a daemon that is starting
// (recovering, sweeping worktrees) — it waits up to daemonStartWait for a
// daemon to answer, so status, stop and the auto-start do not take a starting
// daemon for none. It returns an error wrapping client.ErrNoDaemon when
// there is none.
func (e *env) dialDaemon(ctx context.Context) (*client.Client, error) {
	deadline := time.Now().Add(daemonStartWait)
	held := false // once seen held, wait the whole while, as backend does
	for {
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := client.Dial(dctx, e.paths.Socket())
		cancel()
		if err == nil || !errors.Is(err, client.ErrNoDaemon) || time.Now().After(deadline) {
			return c, err
		}
		if held = held || storeHeld(e.paths.DB()); !held {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// storeHeld reports whether another process holds the lock of the store
// file at path (bbolt's flock). A missing file is not held.
func storeHeld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fd := int(f.Fd())
	err = syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		syscall.Flock(fd, syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// processAlive reports whether pid is a live process (a zombie, exited but
// not yet reaped by its parent, counts as gone).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}

// daemonLog is where a background daemon writes.
func (e *env) daemonLog() string { return filepath.Join(e.paths.Logs(), "daemon.log") }

// rel shows path relative to the working directory when it lies below it.
func (e *env) rel(path string) string {
	r, err := filepath.Rel(e.cwd, path)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return path
	}
	return r
}

// noStart reports whether commands must not start a daemon: --no-start,
// or $LOOPR_NO_START.
func (e *env) noStart(flag bool) bool {
	v := e.getenv(noStartEnv)
	return flag || (v != "" && v != "0")
}

// startIfQueued starts a daemon in the background, saying so on stderr,
// when plan or add just stored a loop with none running (the store was
// opened directly): the work is queued first, so bad input never starts a
// daemon. Should the daemon not start, the loop stays queued: a warning,
// not a failure.
func (e *env) startIfQueued(ctx context.Context, noStartFlag bool) {
	if !e.queued || e.noStart(noStartFlag) {
		return
	}
	if _, err := e.autoStart(ctx); err != nil {
		fmt.Fprintf(e.stderr, "loopr: warning: could not start a daemon: %v; the loop stays queued until one runs (loopr daemon --detach)\n", err)
	}
}

// autoStart starts a background daemon unless one answers, saying so on
// stderr; it reports whether it started one.
func (e *env) autoStart(ctx context.Context) (bool, error) {
	c, err := e.dialDaemon(ctx)
	if err == nil {
		c.Close()
		return false, nil
	}
	if !errors.Is(err, client.ErrNoDaemon) {
		return false, err
	}
	pid, logPath, err := e.startDaemon(ctx, "info")
	var running *runningError
	if errors.As(err, &running) {
		return false, nil // another command started one meanwhile
	}
	if err != nil {
		return false, err
	}
	fmt.Fprintf(e.stderr, "started a loopr daemon (pid %d); logs in %s\n", pid, e.rel(logPath))
	return true, nil
}
