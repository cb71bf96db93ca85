package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/store"
)

// readyFDEnv names the file descriptor on which a daemon started by
// `loopr daemon --detach` reports that it serves. Internal to loopr.
const readyFDEnv = "LOOPR_READY_FD"

// detachWait is how long `loopr daemon --detach` waits for the daemon.
const detachWait = 10 * time.Second

// selfCommand returns a command that runs this loopr with args. Tests
// replace it to run the test binary as loopr.
var selfCommand = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find loopr executable: %w", err)
	}
	return exec.Command(exe, args...), nil
}

func (e *env) daemonCmd() *cobra.Command {
	var (
		detach, standby bool
		logLevel        string
	)
	c := &cobra.Command{
		Use:   "daemon [--detach | --standby]",
		Short: "Run the scheduler and serve the API on <home>/loopr.sock",
		Long: `Run loopr's daemon in the foreground until SIGINT or SIGTERM: it schedules
and runs loops and serves the API on <home>/loopr.sock. With --detach it
starts itself in the background, logging to <home>/logs/daemon.log, and
returns once the daemon answers. On an etcd store every daemon is a worker
of the store's one queue; with --standby it is a worker that runs no
loops (worker.max_loops 0) but may be elected the scheduler
(docs/several-machines.md).

loopr daemon status says whether one runs (exit 0) or not (exit 3); loopr
daemon stop stops it and waits until it is gone; loopr daemon restart does
both and starts a new one in the background.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return &UsageError{fmt.Errorf("--log-level: %q: want debug, info, warn or error", logLevel)}
			}
			if err := e.resolve(); err != nil {
				return err
			}
			if standby && e.cfg.Store.Backend != store.BackendEtcd {
				return &UsageError{errors.New("--standby needs store.backend etcd: on the bbolt file the one daemon of the home runs every loop")}
			}
			if standby && detach {
				return &UsageError{errors.New("--standby with --detach: run the standby worker in the foreground (under a service manager), or set worker.max_loops and use --detach")}
			}
			if detach {
				return e.detachDaemon(cmd.Context(), logLevel)
			}
			return e.runDaemon(cmd.Context(), level, standby)
		},
	}
	c.Flags().BoolVar(&detach, "detach", false, "run in the background (log: <home>/logs/daemon.log)")
	c.Flags().BoolVar(&standby, "standby", false, "on an etcd store: a worker that runs no loops but may be elected the scheduler")
	c.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	c.AddCommand(e.daemonSubcommands()...)
	return c
}

// runDaemon runs the daemon in this process until ctx ends.
func (e *env) runDaemon(ctx context.Context, level slog.Level, standby bool) error {
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	ready := readyFile()
	err := daemon.Run(ctx, daemon.Options{
		Paths: e.paths, Config: e.cfg, Log: log, Version: Version, Standby: standby,
		GuardBinary: guardBinary(),
		Ready: func(pid int) {
			if ready != nil {
				fmt.Fprintf(ready, "ready %d\n", pid)
				ready.Close()
				ready = nil
			}
		},
	})
	if ready != nil {
		// Not ready: a daemon that lost the race to another one started
		// at the same time says so, and the parent says it for itself
		// instead of showing the shared log.
		if pid, ok := lostTo(err); ok {
			fmt.Fprintf(ready, "running %d\n", pid)
		}
		ready.Close()
	}
	return err
}

// lostTo reports whether err means another daemon holds this home (it
// answers on the socket, or holds the store file), with its pid when
// known.
func lostTo(err error) (int, bool) {
	var re *daemon.RunningError
	var le *store.LockedError
	switch {
	case errors.As(err, &re):
		return re.PID, true
	case errors.As(err, &le) && le.Holder == "": // etcd's holder is another host's daemon
		return le.PID, true
	}
	return 0, false
}

// runningError is startDaemon's answer when another daemon got the home
// first (two started at once): `loopr daemon --detach` and the commands
// that start a daemon when none runs take it as done, as when they find
// one at once.
type runningError struct{ pid int }

func (e *runningError) Error() string { return fmt.Sprintf("daemon already running (pid %d)", e.pid) }

// readyFile returns the pipe a detaching parent waits on, if any, and
// keeps it from leaking into agents.
func readyFile() *os.File {
	s := os.Getenv(readyFDEnv)
	if s == "" {
		return nil
	}
	os.Unsetenv(readyFDEnv)
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 3 {
		return nil
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "ready")
}

// detachDaemon starts `loopr daemon` in the background (startDaemon)
// and says where; when one runs already it says so and succeeds, as
// `systemctl start` does: what was asked for holds.
func (e *env) detachDaemon(ctx context.Context, logLevel string) error {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	c, err := client.Dial(dctx, e.paths.Socket())
	cancel()
	if err == nil {
		pid := c.DaemonPID()
		c.Close()
		fmt.Fprintf(e.stdout, "a loopr daemon already runs here (pid %d); nothing to start\n", pid)
		return nil
	}
	if !errors.Is(err, client.ErrNoDaemon) {
		return err
	}
	pid, logPath, err := e.startDaemon(ctx, logLevel)
	var running *runningError
	if errors.As(err, &running) { // another --detach (or plan, add) won the race
		fmt.Fprintf(e.stdout, "a loopr daemon already runs here (pid %d); nothing to start\n", running.pid)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "daemon started, pid %d, log %s\n", pid, logPath)
	return nil
}

// startDaemon starts `loopr daemon` in a new session with its output
// appended to <home>/logs/daemon.log, waits until it serves, and returns
// its pid and log; a *runningError when another daemon got the home
// first.
func (e *env) startDaemon(ctx context.Context, logLevel string) (int, string, error) {
	if err := os.MkdirAll(e.paths.Logs(), 0o700); err != nil {
		return 0, "", fmt.Errorf("log directory: %w", err)
	}
	logPath := e.daemonLog()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, "", fmt.Errorf("daemon log: %w", err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, io.SeekEnd)

	args := []string{"--home", e.paths.Home}
	if e.paths.ConfigSet {
		args = append(args, "--config", e.paths.Config)
	}
	args = append(args, "daemon", "--log-level", logLevel)
	cmd, err := selfCommand(args...)
	if err != nil {
		return 0, "", err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, "", err
	}
	defer pr.Close()
	cmd.Dir = e.cwd
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw} // fd 3 in the child
	cmd.Env = append(cmd.Environ(), readyFDEnv+"=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		pw.Close()
		return 0, "", fmt.Errorf("start daemon: %w", err)
	}
	pw.Close() // the child holds the only write end: EOF means it is gone
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	line, rerr := readReady(pr, detachWait)
	if rerr == nil && strings.HasPrefix(line, "ready ") {
		return pid, logPath, nil
	}
	if holder, ok := strings.CutPrefix(line, "running "); rerr == nil && ok {
		// Another daemon started meanwhile: say so, not what the log
		// (shared with it) holds.
		<-exited
		n, _ := strconv.Atoi(holder)
		return 0, "", e.winner(ctx, pid, n)
	}
	why := "exited before it was ready"
	select {
	case werr := <-exited:
		if werr != nil {
			why = "exited before it was ready (" + werr.Error() + ")"
		}
	case <-time.After(time.Second):
		if errors.Is(rerr, os.ErrDeadlineExceeded) {
			why = fmt.Sprintf("did not answer within %s", detachWait)
		}
		cmd.Process.Signal(syscall.SIGTERM)
	}
	if t := logTail(logPath, logStart, 4<<10); t != "" {
		fmt.Fprintf(e.stderr, "%s\n", t)
	}
	return 0, "", fmt.Errorf("daemon (pid %d) %s; log %s", pid, why, logPath)
}

// winner returns the *runningError of the daemon that holds the home the
// daemon pid could not take, once it answers (it may still be starting).
// holder is the pid holding the store, as the loser saw it: a process that
// is no daemon (another command holding the file) is said as such.
func (e *env) winner(ctx context.Context, pid, holder int) error {
	deadline := time.Now().Add(detachWait)
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := client.Dial(dctx, e.paths.Socket())
		cancel()
		if err == nil {
			defer c.Close()
			return &runningError{c.DaemonPID()}
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			who := "another process"
			if holder > 0 {
				who = fmt.Sprintf("pid %d", holder)
			}
			return fmt.Errorf("daemon (pid %d) did not start: %s holds the store, and no daemon answers on %s", pid, who, e.paths.Socket())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readReady reads one line from r within d.
func readReady(r *os.File, d time.Duration) (string, error) {
	if err := r.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// logTail returns what was written to path after offset from, at most
// limit bytes from its end.
func logTail(path string, from int64, limit int) string {
	f, err := safefile.Open(path) // a regular file: nothing planted there can block or leak
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= from {
		return ""
	}
	from = max(from, fi.Size()-int64(limit))
	b, err := io.ReadAll(io.NewSectionReader(f, from, fi.Size()-from))
	if err != nil {
		return ""
	}
	return string(bytes.TrimRight(b, "\n"))
}
