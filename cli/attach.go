package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
)

// attachPoll is how often attach looks whether the loop's agent stopped,
// and attachSay how often it says it still waits.
const (
	attachPoll = 250 * time.Millisecond
	attachSay  = 5 * time.Second
)

func (e *env) attachCmd() *cobra.Command {
	var wait time.Duration
	c := &cobra.Command{
		Use:   "attach ID",
		Short: "Take a loop over by hand: pause it, open its agent's session in its worktree, save what you did",
		Long: `Take a loop over by hand. attach pauses the loop (a running agent is stopped: the
iteration is not spent), then opens the agent's session interactively in the
loop's worktree, in this terminal: claude --resume ID, codex resume ID,
gemini --resume ID, opencode --session ID (the profile's attach_args replace
it); without a recorded session, or with the command preset and no
attach_args, your $SHELL. When you quit, loopr commits what you changed on
the loop's branch as that iteration's work (a commit marked manual), and the
loop stays paused: loopr resume ID lets it go on.

ID is a loop id, a unique prefix of one (at least 4 characters), or its short id.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait <= 0 {
				return &UsageError{errors.New("--wait: must be positive, e.g. 10m")}
			}
			return e.withBackend(func(b Backend) error {
				ctx := cmd.Context()
				id, err := resolveID(ctx, b, args[0])
				if err != nil {
					return err
				}
				l, err := e.pauseForAttach(ctx, b, id, wait)
				if err != nil {
					return err
				}
				return e.attach(ctx, b, l)
			})
		},
	}
	c.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for a running agent to stop")
	return c
}

// pauseForAttach pauses loop id and waits, saying so, until it is paused:
// a running agent stops first (the manager pauses the loop then).
func (e *env) pauseForAttach(ctx context.Context, b Backend, id string, wait time.Duration) (loop.Loop, error) {
	l, err := b.Get(ctx, id)
	if err != nil {
		return l, err
	}
	switch l.Status {
	case loop.Paused:
		return l, checkWorktree(l)
	case loop.Pending:
		if err := checkWorktree(l); err != nil {
			return l, err
		}
	case loop.Running:
	default:
		return l, fmt.Errorf("attach takes a pending, running or paused loop; %s is %s (loopr show %s)", id, l.Status, id)
	}
	if _, err := b.Act(ctx, id, api.ActionPause, api.ActionRequest{}); err != nil {
		return l, err
	}
	began := time.Now()
	said := began
	for {
		if l, err = b.Get(ctx, id); err != nil {
			return l, err
		}
		switch {
		case l.Status == loop.Paused:
			fmt.Fprintf(e.stderr, "loopr: %s paused at iteration %d\n", id, l.Iteration)
			return l, checkWorktree(l)
		case l.Status != loop.Running:
			return l, fmt.Errorf("%s's agent ended before it could be stopped: the loop is now %s, nothing to take over (loopr show %s)", id, l.Status, id)
		case time.Since(began) > wait:
			return l, fmt.Errorf("%s's agent did not stop within %s: it will be paused when it does; run loopr attach %s again then", id, wait, id)
		case time.Since(said) >= attachSay:
			said = time.Now()
			fmt.Fprintf(e.stderr, "loopr: waiting for %s's agent to stop (%s)…\n", id, time.Since(began).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return l, ctx.Err()
		case <-time.After(attachPoll):
		}
	}
}

// checkWorktree says when l has no worktree to take over.
func checkWorktree(l loop.Loop) error {
	dir := attachDir(l)
	if fi, err := os.Stat(dir); dir == "" || err != nil || !fi.IsDir() {
		return fmt.Errorf("%s has no worktree to attach to (it has not run an iteration yet, or its worktree was removed): loopr resume %s and let it run first", l.ID, l.ID)
	}
	return nil
}

// attachDir is where the loop's agent ran: its session's workdir, else the
// loop's.
func attachDir(l loop.Loop) string {
	if l.Session != nil && l.Session.Workdir != "" {
		return l.Session.Workdir
	}
	return l.Workdir
}

// attachArgv is what attach runs for l: its profile's session argv
// (preset.AttachArgv), or the user's shell.
func (e *env) attachArgv(l loop.Loop) []string {
	profile, session := "", ""
	if l.Session != nil {
		profile, session = l.Session.Profile, l.Session.ID
	}
	if e.cfg != nil {
		if profile == "" {
			profile = e.cfg.ProfileOf(&l)
		}
		if ag, ok := e.cfg.Profile(profile); ok {
			args := ag.AttachArgs
			if t, _ := control.CheckTrust(e.cfg, e.getenv); t != nil && len(args) > 0 {
				fmt.Fprintf(e.stderr, "loopr: attach_args of loopr.yml not run: its commands are not trusted here (`loopr trust`)\n")
				args = nil
			}
			if argv := preset.AttachArgv(ag.Preset, session, args); argv != nil {
				return argv
			}
		}
	}
	return []string{cmp.Or(e.getenv("SHELL"), "/bin/sh")}
}

// attach runs the session in l's worktree on this terminal, then saves
// what changed there on the loop's branch and says what comes next.
func (e *env) attach(ctx context.Context, b Backend, l loop.Loop) error {
	dir, argv := attachDir(l), e.attachArgv(l)
	fmt.Fprintf(e.stderr, "loopr: opening %s in %s; quit it to hand %s back\n", strings.Join(argv, " "), dir, l.ID)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Your environment, as when you run the CLI by hand: you are at the
	// terminal, watching it (the daemon's agents get an allowlist, package
	// procenv).
	cmd.Env = append(os.Environ(), "LOOPR_LOOP_ID="+l.ID, "LOOPR_WORKTREE="+dir)
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fmt.Errorf("run %s in %s: %w (the loop stays paused: loopr resume %s)", argv[0], dir, err, l.ID)
		}
		fmt.Fprintf(e.stderr, "loopr: %s exited %d\n", argv[0], ee.ExitCode())
	}
	return e.saveManual(ctx, b, l, dir)
}

// saveManual commits what the user did in dir on l's branch as the
// iteration's work, journals it, and prints what to do next.
func (e *env) saveManual(ctx context.Context, b Backend, l loop.Loop, dir string) error {
	next := fmt.Sprintf("next: loopr resume %s — the loop goes on at iteration %d", l.ID, l.Iteration)
	if l.Session != nil && e.cfg != nil {
		if ag, ok := e.cfg.Profile(l.Session.Profile); ok && ag.ResumeMode() != config.ResumeOff {
			next += ", its agent resuming session " + l.Session.ID
		}
	}
	if e.paths.Workspace == "" || l.Branch == "" {
		fmt.Fprintln(e.stdout, "nothing committed: the loop has no git branch")
		fmt.Fprintln(e.stdout, next)
		return nil
	}
	g, err := gitflow.Open(e.paths.Workspace, e.paths.Home, nil)
	if err != nil {
		return err
	}
	msg := gitflow.CommitMessage(l.Type, l.Title, l.Iteration, l.ID)
	first, rest, _ := strings.Cut(msg, "\n")
	msg = first + " (manual: loopr attach)\n" + rest
	committed, err := g.SaveWork(ctx, dir, l.Branch, msg)
	if err != nil {
		return fmt.Errorf("save your work on %s: %w (the loop stays paused; commit it there yourself, then loopr resume %s)", l.Branch, err, l.ID)
	}
	req := api.ManualRequest{Iteration: l.Iteration, Branch: l.Branch}
	if committed {
		if req.Commit, _, err = g.BranchTip(ctx, l.Branch); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "saved your work on %s as iteration %d's (manual commit %s)\n", l.Branch, l.Iteration, req.Commit[:min(len(req.Commit), 12)])
	} else {
		fmt.Fprintf(e.stdout, "no change to save on %s\n", l.Branch)
	}
	if err := b.RecordManual(ctx, l.ID, req); err != nil {
		fmt.Fprintf(e.stderr, "loopr: the journal does not say so: %v\n", err)
	}
	fmt.Fprintln(e.stdout, next)
	return nil
}

// attachCommand is `loopr attach ID` for the dashboard's T key: this
// binary, with the workspace's flags; when it fails it asks for enter
// before the dashboard comes back, so its message can be read.
func (e *env) attachCommand(id string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		self = "loopr"
	}
	args := []string{"attach", id}
	if e.homeFlag != "" {
		args = append(args, "--home", e.homeFlag)
	}
	if e.configFlag != "" {
		args = append(args, "--config", e.configFlag)
	}
	// On a failure its message stays on the screen until enter.
	const keep = `"$0" "$@"; s=$?; if [ $s -ne 0 ]; then printf 'press enter to go back to the dashboard '; read -r _; fi; exit $s`
	cmd := exec.Command("/bin/sh", append([]string{"-c", keep, self}, args...)...)
	cmd.Dir = e.cwd
	return cmd
}
