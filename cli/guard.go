package cli

import (
	"errors"
	"io"
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
			var logw io.Writer = io.Discard
			logs := filepath.Join(o.Home, "logs")
			_ = os.MkdirAll(logs, 0o700)
			if f, err := os.OpenFile(filepath.Join(logs, "guard.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
				defer f.Close()
				logw = f
			}
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
