package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/trust"
)

func (e *env) trustCmd() *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "trust [--yes]",
		Short: "Show the commands loopr.yml runs and trust them on this machine",
		Long: `Show every command the workspace's loopr.yml would run — each agent
profile's argv, env, env_pass, secrets and sandbox, the validate commands,
hooks, merge.validate, notify.command, the webhook URLs, worktree.copy —
and, once you say yes, record the sha256 of those values for this file's
path in $XDG_CONFIG_HOME/loopr/trusted (~/.config/loopr/trusted).

Until then the daemon runs none of them: loops wait (reason untrusted),
and a change to any of them while it runs is held, the previous
configuration staying in force. A daemon that runs is told at once
(SIGHUP) and applies the file without a restart.

On a terminal it asks; --yes trusts without asking (without a terminal
--yes is needed: exit 2). LOOPR_TRUST_ALL=1 trusts every loopr.yml
without this step (for CI: see docs/security.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.trust(cmd.Context(), yes)
		},
	}
	c.Flags().BoolVar(&yes, "yes", false, "trust without asking")
	return c
}

// trust is `loopr trust`.
func (e *env) trust(ctx context.Context, yes bool) error {
	if err := e.resolve(); err != nil {
		return err
	}
	if e.paths.Config == "" || e.cfg.File == "" {
		fmt.Fprintln(e.stdout, "no loopr.yml here: loopr's built-in commands need no trust")
		return nil
	}
	store, err := trust.DefaultStore(e.getenv)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s runs:\n", e.cfg.File)
	printCommands(e, trust.Commands(e.cfg))
	st, err := store.Check(e.cfg, func(string) string { return "" }) // what the file says, not LOOPR_TRUST_ALL
	if err != nil {
		return err
	}
	if st.Trusted && st.Why == trust.WhyBuiltin {
		// Needs no trust at start; recorded all the same, so that a running
		// daemon whose trusted commands this file drops applies it.
		ok, err := store.Recorded(e.cfg)
		if err != nil {
			return err
		}
		st.Trusted = ok
	}
	if st.Trusted {
		fmt.Fprintf(e.stdout, "already trusted (%s)\n", st.Why)
		e.tellDaemon(ctx)
		return nil
	}
	if !yes {
		if !isTerminal(e.stdin) {
			return &UsageError{errors.New("no terminal to ask on: read the commands above and pass --yes to trust them")}
		}
		fmt.Fprint(e.stdout, "Trust these commands? [y/N] ")
		answer, _ := bufio.NewReader(e.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(e.stdout, "not trusted: nothing of this loopr.yml runs")
			return ExitStatus(1)
		}
	}
	if err := store.Add(st.Fingerprint, e.cfg.File); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "trusted %s (recorded in %s)\n", st.File, store.Path)
	e.tellDaemon(ctx)
	return nil
}

// printCommands prints a configuration's commands, keys aligned.
func printCommands(e *env, cmds []trust.Command) {
	w := table(e.stdout)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %s\t%s\n", c.Key, c.Value)
	}
	w.Flush()
}

// tellDaemon sends SIGHUP to the workspace's daemon, if one runs, so that
// it reads loopr.yml and its trust again, and says whether it applied it.
func (e *env) tellDaemon(ctx context.Context) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := client.Dial(dctx, e.paths.Socket())
	if err != nil {
		return // no daemon: the next one reads the trust file at start
	}
	defer c.Close()
	st, err := c.Status(dctx)
	if err != nil || st.PID <= 0 {
		return
	}
	if err := syscall.Kill(st.PID, syscall.SIGHUP); err != nil {
		fmt.Fprintf(e.stderr, "loopr: could not tell the daemon (pid %d): %v; restart it to apply the file\n", st.PID, err)
		return
	}
	// The daemon reloads in the background: wait a little to say it did.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if st, err := c.Status(dctx); err == nil && st.Trust == nil {
			fmt.Fprintf(e.stdout, "the daemon (pid %d) applied it\n", st.PID)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(e.stdout, "the daemon (pid %d) was told; `loopr status` shows when it applied the file\n", st.PID)
}

// warnUntrusted says on stderr, in one line, when loopr.yml's commands are
// not trusted here: the loop just made waits until `loopr trust`.
func (e *env) warnUntrusted() {
	if e.cfg == nil {
		return
	}
	if t, _ := control.CheckTrust(e.cfg, e.getenv); t != nil {
		fmt.Fprintln(e.stderr, "loopr: warning: loopr.yml's commands are not trusted on this machine: nothing runs until you check them with `loopr trust`")
	}
}
