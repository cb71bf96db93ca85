package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/store"
)

// storeCmd is `loopr store check|repair`: the way back from a damaged
// loopr.db. Both work on the file itself, with the daemon stopped; on an
// etcd store they refuse (etcd keeps and checks its own files).
func (e *env) storeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "store",
		Short: "Check or repair the store file (daemon stopped)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Check the store: exit 0 when sound, 1 with one line per problem, 4 when it is in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := e.storeFile(cmd.Context(), "check")
			if err != nil {
				return err
			}
			problems, err := store.CheckFile(path, dialTimeout)
			if err != nil {
				return storeFileErr(err, "check")
			}
			if len(problems) == 0 {
				fmt.Fprintf(e.stdout, "store %s: ok\n", path)
				return nil
			}
			for _, p := range problems {
				fmt.Fprintln(e.stdout, p)
			}
			fmt.Fprintf(e.stderr, "loopr: store %s has problems; run `loopr store repair`\n", path)
			return ExitStatus(1)
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "repair",
		Short: "Rebuild the store from every readable record; the damaged file is kept",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := e.storeFile(cmd.Context(), "repair")
			if err != nil {
				return err
			}
			rep, err := store.Repair(path, e.now())
			if err != nil {
				return storeFileErr(err, "repair")
			}
			fmt.Fprintf(e.stdout, "repaired %s\n", path)
			fmt.Fprintf(e.stdout, "recovered %d loops, %d journal events, %d meta keys\n", rep.Loops, rep.Events, rep.Meta)
			fmt.Fprintf(e.stdout, "skipped %d loops, %d journal events (unreadable in the damaged file)\n", len(rep.SkippedLoops), rep.SkippedEvents)
			if n := len(rep.SkippedLoops); n > 0 {
				ids := rep.SkippedLoops
				if n > 20 {
					ids = append(ids[:20:20], fmt.Sprintf("… %d more", n-20))
				}
				fmt.Fprintf(e.stdout, "lost loops: %s\n", strings.Join(ids, ", "))
			}
			if rep.DroppedIndexEntries > 0 {
				fmt.Fprintf(e.stdout, "dropped %d index entries that named no record (indexes rebuilt from the records)\n", rep.DroppedIndexEntries)
			}
			fmt.Fprintf(e.stdout, "the damaged file is kept as %s\n", rep.Backup)
			return nil
		},
	})
	return c
}

// storeFile resolves the store's path and refuses when a daemon runs: it
// owns the file, and repair replaces it.
func (e *env) storeFile(ctx context.Context, verb string) (string, error) {
	if err := e.resolve(); err != nil {
		// A loopr.yml that does not parse must not keep the user from
		// the store: its place does not depend on the configuration.
		var ce *config.Error
		if !errors.As(err, &ce) || e.paths.Home == "" {
			return "", err
		}
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if c, err := client.Dial(dctx, e.paths.Socket()); err == nil {
		pid := c.DaemonPID()
		c.Close()
		return "", &CodeError{Code: ExitInUse, Err: fmt.Errorf("the daemon (pid %d) is running; stop it (kill -TERM %d) before `loopr store %s`", pid, pid, verb)}
	}
	if e.cfg != nil && e.cfg.Store.Backend == store.BackendEtcd {
		return "", &UsageError{fmt.Errorf("`loopr store %s` works on the bbolt file only; this workspace's store is on etcd (store.backend in loopr.yml): use etcd's own tools (etcdctl endpoint health, etcdctl check perf, snapshot save/restore)", verb)}
	}
	path := e.paths.DB()
	if _, err := os.Stat(path); err != nil {
		return "", &UsageError{fmt.Errorf("no store at %s: %w", path, err)}
	}
	return path, nil
}

// ExitInUse is the exit code of `loopr store check` and `repair` when the
// store is in use (the daemon runs, or another process holds the file):
// nothing was checked or repaired. 1 is for a store check found damaged.
const ExitInUse = 4

// CodeError is an error with an exit code of its own: Main prints it, as
// any error, and exits with Code.
type CodeError struct {
	Code int
	Err  error
}

func (e *CodeError) Error() string { return e.Err.Error() }
func (e *CodeError) Unwrap() error { return e.Err }

// storeFileErr explains a store check or repair that could not start.
func storeFileErr(err error, verb string) error {
	var le *store.LockedError
	if errors.As(err, &le) {
		who := "another process"
		if le.PID > 0 {
			who = fmt.Sprintf("pid %d", le.PID)
		}
		return &CodeError{Code: ExitInUse, Err: fmt.Errorf("store %s is in use by %s (a daemon starting or stopping?); stop it before `loopr store %s`", le.Path, who, verb)}
	}
	return err
}
