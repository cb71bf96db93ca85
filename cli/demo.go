package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/simagent"
	"github.com/loopr-dev/loopr/tui"
	"github.com/loopr-dev/loopr/workspace"
)

// demoRequest is what the demo asks the simulated agent to build.
const demoRequest = "Add a URL shortener service with an HTTP API, storage and metrics"

// demoConfig is the loopr.yml of the demo workspace: the simulated agent,
// the approval stop of a real workspace (the demo approves its plan
// itself, once it has shown the step), a validation that catches the
// agent's planted bugs, small caps so the scheduler's choices show, and
// short backoffs.
func demoConfig(exe string) string {
	return fmt.Sprintf(`# loopr demo workspace: the built-in simulated agent stands in for a real one.
scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 6
  max_api_calls: 4
  per_type: {plan: 1, spec: 2, phase: 2, ralph: 4}
rate_limit:
  initial_backoff_secs: 2
  max_backoff_secs: 10
  recovery_period_secs: 4
retry:
  backoff_base_secs: 1
  backoff_factor: 2
  backoff_max_secs: 4
agent:
  preset: command                  # plain text output, no structured events
  command: [%q, "agent-sim"]
  timeout_secs: 120
loops:
  plan:  {require_approval: true}    # the demo approves its plan itself
  ralph: {validate: ["! grep -rq %s --include=*.go ."]}
storage:
  disk_quota_min_gb: 0
`, exe, simagent.BrokenMarker)
}

func (e *env) demoCmd() *cobra.Command {
	var (
		dir     string
		plain   bool
		clean   bool
		keep    bool
		speed   float64
		seed    int64
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run a whole plan offline in a temporary git repo with the built-in simulated agent",
		Long: `Create a throwaway git workspace, start a daemon whose agent is loopr's
simulated agent, submit a plan and show it run: the dashboard in a terminal,
progress lines otherwise. The plan stops for approval as in a real
workspace, and the demo approves it for you (saying so). Ends with a
summary of loops, iterations and rate-limit waits. Needs no agent, API key
or network.

The workspace is a new temporary directory, removed at the end unless
--keep; --dir DIR uses (and keeps) DIR instead, unless --clean.

The simulated agent's choices (titles, bugs, rate limits) follow --seed:
the same seed gives the same tree. Ctrl-C stops the demo and its daemon,
prints the summary so far and exits 130.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if speed < 0 {
				return &UsageError{fmt.Errorf("--speed: must be >= 0")}
			}
			useTUI := !plain && isTerminal(e.stdout) && isTerminal(e.stdin)
			// A temporary workspace goes at the end unless kept; one the
			// user named stays unless --clean.
			clean = clean || dir == "" && !keep
			return e.runDemo(cmd.Context(), demoOptions{dir: dir, useTUI: useTUI, clean: clean, speed: speed, seed: seed, timeout: timeout})
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "dir", "", "workspace to create (default: a new temporary directory)")
	f.BoolVar(&plain, "plain", false, "print progress lines instead of the dashboard")
	f.BoolVar(&clean, "clean", false, "remove the demo workspace afterwards, even the --dir one")
	f.BoolVar(&keep, "keep", false, "keep the temporary workspace afterwards (to look at its branches and logs)")
	f.Float64Var(&speed, "speed", 1, "scale the simulated agent's thinking time (0 = instant)")
	f.Int64Var(&seed, "seed", simagent.DefaultSeed, "seed of the simulated agent's choices: the same seed gives the same tree, titles and failures")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	return c
}

// isTerminal reports whether f, a writer or a reader, is a terminal.
func isTerminal(f any) bool {
	o, ok := f.(*os.File)
	return ok && term.IsTerminal(o.Fd())
}

// demoOptions are the flags of `loopr demo`.
type demoOptions struct {
	dir     string
	useTUI  bool
	clean   bool
	speed   float64
	seed    int64
	timeout time.Duration
}

// errDemoInterrupted ends a demo stopped by Ctrl-C (or SIGINT, SIGTERM): the
// summary so far is printed, the exit status is 130.
const errDemoInterrupted = ExitStatus(130)

func (e *env) runDemo(ctx context.Context, o demoOptions) error {
	began := time.Now()
	dir, useTUI, clean, timeout := o.dir, o.useTUI, o.clean, o.timeout
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find loopr executable: %w", err)
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "loopr-demo-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if clean {
		defer os.RemoveAll(dir)
	}
	say := func(format string, args ...any) { fmt.Fprintf(e.stdout, format+"\n", args...) }
	say("loopr demo: workspace %s", dir)
	git := initDemoRepo(ctx, dir)
	if git != nil {
		say("loopr demo: git unavailable (%v): loops run in the workspace directly", git)
	}
	if err := os.WriteFile(filepath.Join(dir, workspace.ConfigName), []byte(demoConfig(exe)), 0o644); err != nil {
		return err
	}
	paths, err := workspace.Resolve(dir, "", "", func(string) string { return "" })
	if err != nil {
		return err
	}
	cfg, err := config.Load(paths.Config)
	if err != nil {
		return fmt.Errorf("demo config: %w", err)
	}
	// The simulated agent reads its pace and seed from the environment it inherits.
	os.Setenv("LOOPR_SIM_SPEED", fmt.Sprint(o.speed))
	os.Setenv("LOOPR_SIM_SEED", fmt.Sprint(o.seed))
	if err := os.MkdirAll(paths.Logs(), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(paths.Logs(), "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()

	dctx, stopDaemon := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(dctx, daemon.Options{Paths: paths, Config: cfg, Version: Version, Trusted: true, // the demo wrote it
			Log:   slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo})),
			Ready: func(int) { close(ready) }})
	}()
	stop := func() error {
		stopDaemon()
		return <-done
	}
	select {
	case <-ready:
	case err := <-done:
		return fmt.Errorf("demo daemon: %w", err)
	case <-time.After(15 * time.Second):
		stop()
		return errors.New("demo daemon did not start within 15s")
	}
	c, err := client.Dial(ctx, paths.Socket())
	if err != nil {
		stop()
		return err
	}
	defer c.Close()
	plan, err := c.Create(ctx, api.CreateRequest{Type: loop.Plan, Task: demoRequest})
	if err != nil {
		stop()
		return err
	}
	say("loopr demo: plan %s %q submitted", loop.ShortID(plan.ID), plan.Title)

	say("loopr demo: seed %d (`loopr demo --seed N` for another tree)", o.seed)

	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w := demoWatch{dashboard: useTUI}
	if useTUI {
		w.pause = time.Duration(4 * o.speed * float64(time.Second)) // the plan shows waiting for a moment
	}
	var took time.Duration // the run: from the start to the moment every loop had settled
	if useTUI {
		// A watcher beside the dashboard notes when the run ends, so
		// "finished in" does not count time spent browsing afterwards.
		watched := make(chan error, 1)
		var finished time.Time
		go func() {
			err := w.follow(wctx, c, io.Discard, began)
			finished = time.Now()
			watched <- err
		}()
		e.paths, e.cfg = paths, cfg
		opts := e.tuiOptions(c)
		opts.DoneHint = "✓ the demo's loops have all finished: press q for the summary"
		opts.ReportInterrupt = true
		err = tui.Run(wctx, opts, e.stdin, e.stdout)
		select {
		case werr := <-watched:
			if werr == nil && errors.Is(err, tui.ErrInterrupted) {
				err = nil // ctrl+c after the end only leaves the dashboard
			}
			if err == nil {
				err = werr
			}
			took = finished.Sub(began)
		default: // quit before the end: stop here, the summary says so far
			cancel()
			<-watched
			took = time.Since(began)
			if err == nil {
				err = errDemoStopped
			}
		}
	} else {
		err = w.follow(wctx, c, e.stdout, began)
		took = time.Since(began)
	}
	interrupted := ctx.Err() != nil || errors.Is(err, tui.ErrInterrupted)
	switch {
	case interrupted:
		err = errDemoInterrupted
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("demo did not finish within %s (see %s)", timeout, filepath.Join(paths.Logs(), "daemon.log"))
	}
	// Stop the daemon first: an interrupted demo's summary is the state
	// it left (running loops requeued), and nothing changes under it.
	derr := stop()
	if err == nil {
		err = derr
	}
	e.paths, e.cfg = paths, cfg
	summaryErr := e.demoSummary(context.WithoutCancel(ctx), plan, dir, w, took, err)
	if err == nil || errors.Is(err, errDemoStopped) {
		err = summaryErr
	}
	if clean {
		say("\nThe workspace %s is removed (loopr demo --keep keeps it).", dir)
	} else {
		say("\nThe workspace is kept: %s (see `git -C %s log --oneline --graph %s`)", dir, dir, gitflow.BranchName(plan.ID, plan.Title))
	}
	return err
}

// errDemoStopped means the dashboard was closed with q before the run
// ended: the demo stops there, with the summary so far, and exits 0.
var errDemoStopped = errors.New("demo stopped before the end")

// initDemoRepo makes dir a git repository with one commit, or says why not.
func initDemoRepo(ctx context.Context, dir string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return err
	}
	files := map[string]string{
		"README.md": "# shortener\n\nA URL shortener, built by loopr's demo.\n",
		"go.mod":    "module example.com/shortener\n\ngo 1.22\n",
		"main.go":   "package main\n\nfunc main() {}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=loopr demo", "-c", "user.email=demo@localhost", "-c", "commit.gpgsign=false",
			"commit", "-q", "--no-verify", "-m", "initial commit"},
	} {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// demoWatch follows the event stream and counts what the summary needs.
// It approves the plan once it awaits approval, after saying what a user
// would do there, pause (so the dashboard shows the plan waiting) later.
type demoWatch struct {
	status     map[string]loop.Status
	deps       map[string][]string // depends_on of the loops seen
	met        map[string]bool     // whether a loop seen lets the loops that depend on it start
	rateLimits int
	pause      time.Duration
	approved   bool
	dashboard  bool // its lines go nowhere: the dashboard shows the run
}

// settled reports whether every loop seen has reached a final status, or
// waits for a person (needs_human: nothing more happens on its own), or is
// pending behind a dependency that is not done while nothing runs (a loop
// it waits for failed or waits for a person).
func (w *demoWatch) settled() bool {
	if len(w.status) == 0 {
		return false
	}
	for id, st := range w.status {
		if !st.Terminal() && st != loop.NeedsHuman && !(st == loop.Pending && w.held(id)) {
			return false
		}
	}
	return true
}

// held reports whether loop id waits on a dependency that is not done.
func (w *demoWatch) held(id string) bool {
	for _, d := range w.deps[id] {
		if met, seen := w.met[d]; seen && !met {
			return true
		}
	}
	return false
}

// see records what the watch needs of a loop record.
func (w *demoWatch) see(l *loop.Loop) {
	w.status[l.ID] = l.Status
	w.deps[l.ID] = l.DependsOn
	w.met[l.ID] = l.DependencyMet()
}

// follow prints one line per change until every loop has settled.
func (w *demoWatch) follow(ctx context.Context, c *client.Client, out io.Writer, began time.Time) error {
	w.status, w.deps, w.met = map[string]loop.Status{}, map[string][]string{}, map[string]bool{}
	ch, err := c.Events(ctx)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case msg, ok := <-ch:
			if !ok {
				return errors.New("the daemon closed the event stream")
			}
			switch msg.Type {
			case api.StreamSnapshot:
				for i := range msg.Loops {
					w.see(&msg.Loops[i])
				}
			case api.StreamEvent:
				if msg.Loop != nil {
					w.see(msg.Loop)
				}
				if msg.Event != nil {
					w.line(out, msg, time.Since(began))
				}
			}
			for id, st := range w.status {
				if st == loop.AwaitingApproval && !w.approved {
					w.approved = true
					w.approve(ctx, c, out, id)
				}
			}
			if w.settled() {
				// Children are created after their parent's completion event:
				// only the daemon's counts say that nothing is left to run.
				st, err := c.Status(ctx)
				if err != nil {
					return err
				}
				held := 0 // pending loops seen, settled: each held behind a dependency
				for _, st := range w.status {
					if st == loop.Pending {
						held++
					}
				}
				if st.Counts[loop.Pending] == held && st.Counts[loop.Paused]+st.Counts[loop.Running]+st.Counts[loop.Merging]+st.Counts[loop.AwaitingApproval]+st.Counts[loop.AwaitingReview] == 0 {
					return nil
				}
			}
		}
	}
}

// approve approves the plan id after saying what a user would do in a
// workspace of their own. With a pause (the dashboard, where the plan
// shows waiting, and a keypress may approve it first) it approves that
// much later, in the background, and says nothing more.
func (w *demoWatch) approve(ctx context.Context, c *client.Client, out io.Writer, id string) {
	fmt.Fprintf(out, "        ◆ %s\n", approvalNote(id, false))
	act := func() error {
		_, err := c.Act(ctx, id, api.ActionApprove, api.ActionRequest{})
		return err
	}
	if w.pause <= 0 {
		if err := act(); err != nil && ctx.Err() == nil {
			fmt.Fprintf(out, "        approve %s: %v\n", loop.ShortID(id), err)
		}
		return
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(w.pause):
			_ = act() // refused only when approved from the dashboard first
		}
	}()
}

// approvalNote says that the demo's plan stopped for approval, what a user
// would do then, and that the demo approves (done: approved) it.
func approvalNote(id string, done bool) string {
	ref := loop.ShortID(id)
	verb := "approves"
	if done {
		verb = "approved"
	}
	return fmt.Sprintf("the plan waited for your approval, as plans do: in your own workspace, read it (loopr show %s --artifact), then loopr approve %s; the demo %s it for you", ref, ref, verb)
}

// line prints one event as a progress line.
func (w *demoWatch) line(out io.Writer, msg api.StreamMsg, at time.Duration) {
	ev := msg.Event
	var typ, title string
	if msg.Loop != nil {
		typ, title = msg.Loop.Type, msg.Loop.Title
	}
	var what string
	switch ev.Kind {
	case loop.EventCreated:
		what = "created"
	case loop.EventTransition:
		what = fmt.Sprintf("%s → %s", ev.From, ev.To)
		if ev.Message != "" {
			what += "  " + oneLine(ev.Message, 70)
		}
	case loop.EventRateLimit:
		w.rateLimits++
		what = "⚠ " + oneLine(ev.Message, 90)
	case loop.EventTreeComplete:
		what = "✓ " + oneLine(ev.Message, 110)
	default:
		return
	}
	fmt.Fprintf(out, "%6.1fs  %-5s  %-30s  %s\n", at.Seconds(), typ, oneLine(title, 30), what)
}

// counts waits until every loop has settled (after the dashboard closed
// early, the summary still needs final numbers).
func (w *demoWatch) counts(ctx context.Context, c *client.Client) error {
	return w.follow(ctx, c, io.Discard, time.Now())
}

// demoSummary prints loops by type and status, iterations, rate-limit
// waits and what landed on the plan branch, from the store the stopped
// daemon left. runErr says how the run ended: finished (nil), stopped with
// q, interrupted, or failed.
func (e *env) demoSummary(ctx context.Context, plan loop.Loop, dir string, w demoWatch, took time.Duration, runErr error) error {
	b, err := e.openLocal()
	if err != nil {
		return fmt.Errorf("demo summary: %w", err)
	}
	defer b.Close()
	loops, err := b.List(ctx, api.ListRequest{})
	if err != nil {
		return err
	}
	st, err := b.Status(ctx)
	if err != nil {
		return err
	}
	byType := map[string]map[loop.Status]int{}
	iterations := map[string]int{}
	for _, l := range loops {
		if byType[l.Type] == nil {
			byType[l.Type] = map[loop.Status]int{}
		}
		byType[l.Type][l.Status]++
		iterations[l.Type] += l.Iteration
	}
	switch took := took.Round(100 * time.Millisecond); {
	case errors.Is(runErr, errDemoInterrupted):
		fmt.Fprintf(e.stdout, "\nloopr demo interrupted after %s; the daemon is stopped. The summary so far:\n\n", took)
	case errors.Is(runErr, errDemoStopped):
		fmt.Fprintf(e.stdout, "\nloopr demo stopped after %s, before the end; the daemon is stopped. The summary so far:\n\n", took)
	default:
		fmt.Fprintf(e.stdout, "\nloopr demo finished in %s\n\n", took)
	}
	tw := table(e.stdout)
	fmt.Fprintln(tw, "TYPE\tLOOPS\tCOMPLETE\tFAILED\tOTHER\tITERATIONS")
	total, totalIter := 0, 0
	for _, t := range loop.BuiltinTypes {
		m := byType[t]
		n := 0
		for _, v := range m {
			n += v
		}
		other := n - m[loop.Complete] - m[loop.Failed]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\n", t, n, m[loop.Complete], m[loop.Failed], other, iterations[t])
		total += n
		totalIter += iterations[t]
	}
	fmt.Fprintf(tw, "total\t%d\t\t\t\t%d\n", total, totalIter)
	tw.Flush()
	retried := 0
	for _, l := range loops {
		if l.Status == loop.Complete && l.Iteration > 1 {
			retried++
		}
	}
	fmt.Fprintf(e.stdout, "\n%d loop(s) passed validation only on a later iteration (feedback carried into the next prompt)\n", retried)
	if w.approved && w.dashboard { // plain output said it as it happened
		fmt.Fprintln(e.stdout, approvalNote(plan.ID, true))
	}
	// The simulated agent leaves one marker per 429 it answered.
	markers, _ := filepath.Glob(filepath.Join(dir, ".loopr", "sim", "429-*"))
	fmt.Fprintf(e.stdout, "%d rate-limit signal(s) from the agent; the loops on that agent profile waited out its backoff (no iteration spent)\n",
		max(len(markers), w.rateLimits, st.RateLimit.Hits))
	branch := gitflow.BranchName(plan.ID, plan.Title)
	if out, err := exec.CommandContext(ctx, "git", "-C", dir, "ls-tree", "-r", "--name-only", branch, "sim").Output(); err == nil {
		files := strings.Fields(string(out))
		slices.Sort(files)
		fmt.Fprintf(e.stdout, "%d file(s) merged onto branch %s\n", len(files), branch)
	}
	for _, l := range loops {
		if l.Status == loop.Failed {
			return fmt.Errorf("loop %s (%s) failed: %s", l.ID, l.Title, l.Reason)
		}
	}
	return nil
}
