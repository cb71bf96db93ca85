package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/internal/contain"
)

// guardCmd is `loopr _guard`, the process a daemon starts to kill its
// agents if it dies without a clean stop (package contain, guard.go).
// Hidden: the daemon starts it; nobody types it.
func (e *env) guardCmd() *cobra.Command {
	var o contain.GuardOptions
	c := &cobra.Command{
		Use:    "_guard --home HOME --pid PID --start TICKS [--cgroup DIR] [--heartbeat DURATION]",
		Short:  "Kill a dead daemon's agents (started by the daemon; reads its pipe on fd 3)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Home == "" || o.PID <= 1 {
				return &UsageError{errors.New("_guard: --home and --pid are required (the daemon starts it)")}
			}
			if o.Heartbeat < 0 {
				return &UsageError{errors.New("_guard: --heartbeat must not be negative (0: no heartbeat)")}
			}
			ctl := os.NewFile(3, "guard-pipe")
			if ctl == nil {
				return &UsageError{errors.New("_guard: no pipe on fd 3 (the daemon starts it)")}
			}
			o.Ctl = ctl
			// The log is opened when there is a line to write, never
			// before: a guard of a clean stop writes nothing, so it never
			// recreates a home removed right after its daemon stopped.
			logw := &lazyLog{path: filepath.Join(o.Home, "logs", "guard.log")}
			defer logw.Close()
			o.Log = logw
			if _, err := contain.Guard(o); err != nil && !errors.Is(err, contain.ErrGuardStopped) {
				return err
			}
			return nil
		},
	}
	c.Flags().StringVar(&o.Home, "home", "", "the daemon's home")
	c.Flags().IntVar(&o.PID, "pid", 0, "the daemon's pid")
	c.Flags().Uint64Var(&o.Start, "start", 0, "the daemon's start time, clock ticks after boot")
	c.Flags().StringVar(&o.Cgroup, "cgroup", "", "the daemon's cgroup directory for its agents")
	c.Flags().DurationVar(&o.Heartbeat, "heartbeat", 0, "kill the daemon's agents when it sent no heartbeat for this long (a worker of an etcd store: half its lease TTL); 0: never")
	return c
}

// guardBinary is the loopr executable the daemon starts its guard from:
// this one, unless it is a test binary (which has no _guard command; the
// in-process daemons of unit tests run without a guard), or the guard is
// turned off (LOOPR_GUARD=off).
func guardBinary() string {
	if os.Getenv(contain.EnvGuard) == "off" {
		return ""
	}
	exe, err := os.Executable()
	if err != nil || strings.HasSuffix(exe, ".test") {
		return ""
	}
	return exe
}

// lazyLog opens its file (in an existing home only: the logs directory,
// not its parents, is created) at the first Write.
type lazyLog struct {
	path string
	f    *os.File
}

func (l *lazyLog) Write(p []byte) (int, error) {
	if l.f == nil {
		_ = os.Mkdir(filepath.Dir(l.path), 0o700)
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return len(p), nil // a guard has no one to tell: the kill matters, not its log line
		}
		l.f = f
	}
	return l.f.Write(p)
}

func (l *lazyLog) Close() {
	if l.f != nil {
		l.f.Close()
	}
}
