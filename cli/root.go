// Package cli implements loopr's command line (SPEC §8) with cobra. Each
// subcommand lives in its own file and talks to a Backend: the daemon's
// client when a daemon runs, or the store opened directly when none does.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// Version is loopr's version, set at build time with -ldflags.
var Version = "0.1.0-dev"

// Backend is what the commands need from loopr: the daemon's client
// implements it over the socket, the local backend over the store.
type Backend interface {
	Create(ctx context.Context, req api.CreateRequest) (loop.Loop, error)
	List(ctx context.Context, req api.ListRequest) ([]loop.Loop, error)
	Get(ctx context.Context, id string) (loop.Loop, error)
	Act(ctx context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error)
	Why(ctx context.Context, id string, now time.Time) (api.Why, error)
	Scheduler(ctx context.Context, now time.Time) (api.SchedulerView, error)
	Status(ctx context.Context) (api.Status, error)
	Export(ctx context.Context, w io.Writer) (int, error)
	Import(ctx context.Context, loops []loop.Loop) (int, error)
	CreateBatch(ctx context.Context, reqs []api.CreateRequest) (api.BatchResult, error)
	GC(ctx context.Context, req api.GCRequest) (api.GCResult, error)
	Stats(ctx context.Context) (api.Stats, error)
	TreeUsage(ctx context.Context, id string) (api.TreeUsage, error)
	Conflicts(ctx context.Context, id string) (api.Conflicts, error)
	Diff(ctx context.Context, id string) (api.Diff, error)
	SetBudget(ctx context.Context, id string, req api.BudgetRequest) (api.BudgetResult, error)
	Limits(ctx context.Context) ([]api.AgentLimit, error)
	ClearLimit(ctx context.Context, agent string) (api.ClearLimitResult, error)
	Comment(ctx context.Context, id string, req api.CommentRequest) (api.Comment, error)
	Comments(ctx context.Context, id string) ([]api.Comment, error)
	RecordManual(ctx context.Context, id string, req api.ManualRequest) error
	Land(ctx context.Context, id string, req api.LandRequest) (api.LandResult, error)
	Close() error
}

// UsageError marks an error as the user's (exit code 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode maps an error to loopr's exit codes: 0 ok, 2 usage or invalid
// input, a *CodeError's own code, 1 anything else.
func ExitCode(err error) int {
	var ue *UsageError
	var ce *CodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return ce.Code
	case errors.As(err, &ue), control.IsUsage(err):
		return 2
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Usage() {
		return 2
	}
	var se *store.SchemaError
	if errors.As(err, &se) {
		return 1
	}
	return 1
}

// env is the state shared by all commands of one invocation.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	cwd            string
	getenv         func(string) string
	now            func() time.Time

	homeFlag, configFlag string
	paths                workspace.Paths
	cfg                  *config.Config

	queued bool // plan or add stored a loop with no daemon running
}

// Main runs loopr with args and returns the exit code. Errors are printed
// as one line on stderr.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "loopr:", err)
		return 1
	}
	e := &env{stdout: stdout, stderr: stderr, stdin: stdin, cwd: cwd, getenv: os.Getenv, now: time.Now}
	root := e.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err = root.ExecuteContext(ctx)
	var status ExitStatus
	if errors.As(err, &status) {
		return int(status)
	}
	if err != nil {
		fmt.Fprintln(stderr, "loopr:", err)
	}
	return ExitCode(err)
}

func (e *env) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "loopr",
		Short:         "Run hierarchical loops of coding agents, scheduled by an explainable priority",
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          unknownCommand,
		// Suggest commands up to two edits away ("versoin" → version).
		SuggestionsMinimumDistance: 2,
		// Plain `loopr` opens the dashboard.
		RunE: func(cmd *cobra.Command, _ []string) error { return e.runTUI(cmd.Context(), false) },
	}
	root.PersistentFlags().StringVar(&e.homeFlag, "home", "", "state directory (default <workspace>/.loopr, or $LOOPR_HOME)")
	root.PersistentFlags().StringVar(&e.configFlag, "config", "", "configuration file (default <workspace>/loopr.yml)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{err} })
	root.AddCommand(
		e.initCmd(), e.configCmd(), e.trustCmd(), e.planCmd(), e.addCmd(), e.listCmd(), e.showCmd(), e.whyCmd(), e.conflictsCmd(), e.diffCmd(), e.commentCmd(), e.commentsCmd(), e.budgetCmd(), e.landCmd(), e.prCmd(),
		e.statusCmd(), e.limitsCmd(), e.debugCmd(), e.exportCmd(), e.importCmd(), e.daemonCmd(),
		e.tuiCmd(), e.demoCmd(), e.agentSimCmd(), e.guardCmd(),
	)
	root.AddCommand(e.actionCmds()...)
	root.AddCommand(e.answerCmd(), e.attachCmd())
	root.AddCommand(e.simCmd())
	root.AddCommand(e.gcCmd(), e.statsCmd())
	root.AddCommand(e.storeCmd(), e.versionCmd())
	root.AddCommand(e.completionCmd(), e.logsCmd(), e.eventsCmd())
	root.AddCommand(e.sandboxShimCmd(), e.webCmd(), e.mcpCmd())
	for _, c := range root.Commands() {
		wrapArgs(c)
	}
	return root
}

// unknownCommand refuses arguments to plain `loopr` (which opens the
// dashboard): they are a mistyped command, so it says which commands are
// close, as git does, and exits 2.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		msg += "; `loopr --help` lists the commands"
	}
	return &UsageError{errors.New(msg)}
}

// wrapArgs makes argument-count errors usage errors.
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return &UsageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// resolve finds the workspace and loads the configuration once.
func (e *env) resolve() error {
	if e.cfg != nil {
		return nil
	}
	p, err := workspace.Resolve(e.cwd, e.homeFlag, e.configFlag, e.getenv)
	if err != nil {
		return &UsageError{err}
	}
	e.paths = p
	if p.Config == "" {
		e.cfg = config.Default()
		return nil
	}
	cfg, err := config.Load(p.Config)
	if errors.Is(err, os.ErrNotExist) && !p.ConfigSet {
		e.cfg = config.Default()
		return nil
	}
	if err != nil {
		return &UsageError{err}
	}
	e.cfg = cfg
	return nil
}

// dialTimeout bounds how long a command waits for the daemon to answer
// its first request before giving up on it. A daemon that is gone is known
// at once (no socket, or the connection refused); this limit is for one
// that is alive but slow. Status never waits for the manager or git (issue
// 20.8), so only a saturated machine makes it slow: at a load of 20 on 2
// cores a process start alone can take a second, and a 1 s limit made every
// command fail there while the daemon was fine.
const dialTimeout = 10 * time.Second

// backend connects to the daemon when one runs, else opens the store. A
// missing socket or a refused connection means no daemon; a daemon that
// answers with another protocol version, or does not answer in time, is an
// error: opening the store behind its back would fail on the lock anyway.
//
// A loopr.yml that does not parse is an error unless a daemon answers: the
// daemon refused that edit and keeps the configuration in force, so the
// command goes through it, with a warning.
func (e *env) backend() (Backend, error) {
	if err := e.resolve(); err != nil {
		var ce *config.Error
		if !errors.As(err, &ce) || e.paths.Home == "" {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		defer cancel()
		c, derr := client.Dial(ctx, e.paths.Socket())
		if derr != nil {
			return nil, err
		}
		fmt.Fprintf(e.stderr, "loopr: warning: %v (the daemon keeps the configuration in force)\n", ce)
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	c, err := client.Dial(ctx, e.paths.Socket())
	if err == nil {
		return c, nil
	}
	if !errors.Is(err, client.ErrNoDaemon) {
		return nil, err
	}
	b, err := e.openLocal()
	var le *store.LockedError
	if !errors.As(err, &le) {
		return b, err
	}
	// The store is held but nothing answers on the socket yet: a daemon
	// that is starting (recovering, sweeping worktrees). Wait for it.
	deadline := time.Now().Add(daemonStartWait)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		c, derr := client.Dial(ctx, e.paths.Socket())
		cancel()
		if derr == nil {
			return c, nil
		}
		if !errors.Is(derr, client.ErrNoDaemon) {
			return nil, derr
		}
	}
	return nil, err
}

// daemonStartWait is how long a command waits for a daemon that holds the
// store but does not answer yet.
const daemonStartWait = 5 * time.Second

func (e *env) openLocal() (Backend, error) {
	st, err := control.OpenStore(e.cfg, e.paths, store.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	cfg := e.cfg
	svc := control.New(st, e.paths, func() *config.Config { return cfg }, e.now)
	svc.EnableWorkspaceGates()
	if t, _ := control.CheckTrust(cfg, e.getenv); t != nil {
		svc.SetTrust(t) // why and status say what a daemon would do
	}
	return &local{svc: svc}, nil
}

// withReader is withBackend for the commands that only read (list, show,
// status, why, debug scheduler, stats, export): where there is no
// workspace — no loopr.yml, no store, no daemon — they say so instead of
// creating a .loopr/ in whatever directory they were run from.
func (e *env) withReader(fn func(Backend) error) error {
	if err := e.resolve(); err == nil && e.paths.Config == "" {
		_, dbErr := os.Stat(e.paths.DB())
		_, sockErr := os.Stat(e.paths.Socket())
		if errors.Is(dbErr, fs.ErrNotExist) && errors.Is(sockErr, fs.ErrNotExist) {
			return &UsageError{errors.New("no loopr workspace here (run `loopr init`)")}
		}
	}
	return e.withBackend(fn)
}

// withBackend runs fn with a backend and closes it.
func (e *env) withBackend(fn func(Backend) error) error {
	b, err := e.backend()
	if err != nil {
		return err
	}
	err = fn(b)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}
