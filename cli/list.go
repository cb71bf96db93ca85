package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) listCmd() *cobra.Command {
	var (
		req          api.ListRequest
		status       []string
		jsonOut, all bool
		quiet        bool
	)
	c := &cobra.Command{
		Use:   "list [--status S] [--type T] [--parent ID] [--all] [-q]",
		Short: "List loops in creation order",
		Long: `List loops in creation order: the short id (the end of the id, as branch
names carry it; any command takes it), type, status, iteration, age, what
the loop and everything below it spent, its parent and its title, clipped
to the terminal's width.

Loops that finished (complete, cancelled, expired, invalidated) more than
a day ago are left out unless --all, or --status names their status;
failed loops stay until you reset them. -q prints the full ids of the
loops listed, one a line, for scripts. --json prints every loop's record.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jsonOut && quiet {
				return &UsageError{errors.New("--json and -q: give one")}
			}
			for _, s := range status {
				for _, part := range strings.Split(s, ",") {
					req.Status = append(req.Status, loop.Status(strings.TrimSpace(part)))
				}
			}
			return e.withReader(func(b Backend) error {
				if req.Parent != "" {
					id, err := resolveID(cmd.Context(), b, req.Parent)
					if err != nil {
						return fmt.Errorf("--parent: %w", err)
					}
					req.Parent = id
				}
				if jsonOut {
					if streamed, err := writeListJSON(cmd.Context(), b, req, e.stdout); streamed {
						return err
					}
				}
				loops, err := b.List(cmd.Context(), req)
				if err != nil {
					return err
				}
				if jsonOut {
					if loops == nil {
						loops = []loop.Loop{}
					}
					return writeJSON(e.stdout, loops)
				}
				shown, hidden := loops, 0
				if !all && req.Status == nil {
					shown, hidden = recent(loops, e.now())
				}
				if quiet {
					for _, l := range shown {
						fmt.Fprintln(e.stdout, l.ID)
					}
					return nil
				}
				return e.printList(cmd.Context(), b, req, shown, hidden)
			})
		},
	}
	f := c.Flags()
	f.StringSliceVar(&status, "status", nil, "only these statuses (repeat or comma-separate)")
	f.StringVar(&req.Type, "type", "", "only this type")
	f.StringVar(&req.Parent, "parent", "", "only children of this loop")
	f.BoolVar(&all, "all", false, "also the loops that finished more than a day ago")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the full ids of the loops listed, one a line")
	f.BoolVar(&jsonOut, "json", false, "print a JSON array of every matching loop's record")
	c.RegisterFlagCompletionFunc("parent", e.completeFlagIDs)
	c.RegisterFlagCompletionFunc("type", e.completeTypes)
	c.RegisterFlagCompletionFunc("status", completeStatuses)
	return c
}

// listAge is how long `loopr list` keeps showing a loop that finished.
const listAge = 24 * time.Hour

// recent returns the loops `loopr list` shows without --all: all but
// those that finished (failed aside: it waits for a reset) more than
// listAge before now, and how many it left out.
func recent(loops []loop.Loop, now time.Time) ([]loop.Loop, int) {
	out := make([]loop.Loop, 0, len(loops))
	for _, l := range loops {
		done := l.FinishedAt
		if done.IsZero() {
			done = l.UpdatedAt
		}
		if l.Status.Terminal() && l.Status != loop.Failed && now.Sub(done) > listAge {
			continue
		}
		out = append(out, l)
	}
	return out, len(loops) - len(out)
}

// printList prints loops as the table of `loopr list`, titles clipped to
// the terminal's width (60 characters when stdout is not a terminal),
// and says how many finished loops it left out.
func (e *env) printList(ctx context.Context, b Backend, req api.ListRequest, loops []loop.Loop, hidden int) error {
	if len(loops) == 0 {
		if hidden > 0 {
			fmt.Fprintf(e.stdout, "no loops in the last day (%s finished before: loopr list --all)\n", count(hidden, "loop"))
		} else {
			fmt.Fprintln(e.stdout, "no loops")
		}
		return nil
	}
	all := loops
	if req.Status != nil || req.Type != "" || req.Parent != "" || hidden > 0 {
		// COST rolls up descendants the filter leaves out too.
		var err error
		if all, err = b.List(ctx, api.ListRequest{}); err != nil {
			return err
		}
	}
	tree := treeUsage(all)
	now := e.now()
	rows := [][]string{{"ID", "TYPE", "STATUS", "ITER", "AGE", "COST", "PARENT"}}
	for _, l := range loops {
		parent := "-"
		if l.Parent != "" {
			parent = loop.ShortID(l.Parent)
		}
		rows = append(rows, []string{loop.ShortID(l.ID), l.Type, string(l.Status),
			fmt.Sprintf("%d/%d", l.Iteration, l.MaxIterations), age(now.Sub(l.CreatedAt)), costText(tree[l.ID]), parent})
	}
	titleW := lastColumn(rows, terminalWidth(e.stdout), 60)
	w := table(e.stdout)
	for i, r := range rows {
		title := "TITLE"
		if i > 0 {
			title = oneLine(loops[i-1].Title, titleW)
		}
		fmt.Fprintf(w, "%s\t%s\n", strings.Join(r, "\t"), title)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(e.stdout, "(%s that finished more than a day ago not shown: loopr list --all)\n", count(hidden, "loop"))
	}
	return nil
}

// terminalWidth is the width of w when it is a terminal, else 0.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(f.Fd()) {
		return 0
	}
	width, _, err := term.GetSize(f.Fd())
	if err != nil {
		return 0
	}
	return width
}

func (e *env) showCmd() *cobra.Command {
	var jsonOut, artifactOnly bool
	c := &cobra.Command{
		Use:   "show ID [--artifact]",
		Short: "Show one loop's record, its task and its accepted artifact",
		Long: `Show one loop: its record, its task and feedback, and the artifact its
last passing iteration produced (the plan or spec text, as validated and
kept under <home>/loops/<id>/accepted/). --artifact prints only the artifact.

ID is a loop id, a unique prefix of one (at least 4 characters), or its short id (the end of the id, as list and branch names show it).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if jsonOut && artifactOnly {
				return &UsageError{errors.New("--json and --artifact: give one (--json prints the record, whose artifact field names the file)")}
			}
			return e.withReader(func(b Backend) error {
				l, err := lookup(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				tu, err := b.TreeUsage(cmd.Context(), l.ID)
				if err != nil {
					return err
				}
				if jsonOut {
					n := e.gitNotes(l)
					return writeJSON(e.stdout, shown{Loop: l, TreeUsage: tu.Usage, WorkdirRemoved: n.workdirGone, BranchDeleted: n.branchGone})
				}
				if artifactOnly {
					if l.Artifact == "" {
						return fmt.Errorf("%s has no accepted artifact yet (%s)", l.ID, l.Status)
					}
					text, err := e.readArtifact(b, l)
					if err != nil {
						return err
					}
					fmt.Fprint(e.stdout, ensureNewline(text))
					return nil
				}
				printLoop(e, l, tu)
				if l.Artifact != "" {
					text, err := e.readArtifact(b, l)
					if err != nil {
						fmt.Fprintf(e.stdout, "\nartifact: %v\n", err)
					} else {
						fmt.Fprintf(e.stdout, "\nartifact (%s):\n%s\n", l.Artifact, indent(text))
					}
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the record as JSON, with tree_usage: its usage plus all its descendants'")
	c.Flags().BoolVar(&artifactOnly, "artifact", false, "print only the accepted artifact")
	return c
}

// readArtifact reads l's accepted artifact as a regular file of at most
// artifact.MaxSize bytes beneath the home (nothing planted there can block,
// redirect or leak), or the etcd store's copy when it passed on another
// machine, with what a terminal would act on escaped: agents wrote it.
func (e *env) readArtifact(b Backend, l loop.Loop) (string, error) {
	text, err := e.readAccepted(b, l)
	if err != nil {
		return "", fmt.Errorf("artifact of %s: %w", l.ID, err)
	}
	return termsafe.Text(text), nil
}

// ensureNewline ends s with a newline.
func ensureNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// shown is `loopr show --json`: the record, its tree's usage, and what
// became of its worktree and branch on this machine (gitNotes).
type shown struct {
	loop.Loop
	TreeUsage      loop.Usage `json:"tree_usage"`
	WorkdirRemoved bool       `json:"workdir_removed,omitzero"`
	BranchDeleted  bool       `json:"branch_deleted,omitzero"`
}

// treeUsage sums each loop's usage with its descendants' among loops.
func treeUsage(loops []loop.Loop) map[string]loop.Usage {
	parent := make(map[string]string, len(loops))
	for _, l := range loops {
		parent[l.ID] = l.Parent
	}
	out := make(map[string]loop.Usage, len(loops))
	for _, l := range loops {
		if l.Usage == (loop.Usage{}) {
			if _, ok := out[l.ID]; !ok {
				out[l.ID] = loop.Usage{}
			}
			continue
		}
		seen := 0
		for id := l.ID; id != "" && seen < 1000; id, seen = parent[id], seen+1 {
			out[id] = out[id].Add(l.Usage)
		}
	}
	return out
}

func printLoop(e *env, l loop.Loop, tu api.TreeUsage) {
	w := table(e.stdout)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%s\t%s\n", k, termsafe.Line(v)) // titles and reasons are agents' text
		}
	}
	row("id", l.ID)
	row("type", l.Type)
	row("status", string(l.Status))
	row("title", l.Title)
	row("parent", l.Parent)
	row("depth", fmt.Sprint(l.Depth))
	row("iteration", fmt.Sprintf("%d/%d", l.Iteration, l.MaxIterations))
	fmtT := func(k string, t time.Time) {
		if !t.IsZero() {
			row(k, t.UTC().Format("2006-01-02T15:04:05Z07:00"))
		}
	}
	fmtT("created_at", l.CreatedAt)
	fmtT("updated_at", l.UpdatedAt)
	fmtT("started_at", l.StartedAt)
	fmtT("finished_at", l.FinishedAt)
	fmtT("runnable_at", l.RunnableAt)
	fmtT("deadline", l.Deadline)
	row("triggered_by", l.TriggeredBy)
	row("artifact", l.Artifact)
	n := e.gitNotes(l)
	row("workdir", n.workdir)
	row("branch", n.branch)
	row("base", l.Base.String())
	row("landed", landedText(l))
	row("commit", l.Commit)
	row("owner", l.Owner)
	row("fairness_key", l.FairnessKey)
	row("conflict_key", l.ConflictKey)
	row("reason", l.Reason)
	if n := l.Needs; n != nil {
		row("needs", fmt.Sprintf("%s, since %s", n.Reason, n.Since.UTC().Format("2006-01-02T15:04:05Z07:00")))
		row("act with", l.NeedsAction())
	}
	row("answer", l.Answer)
	row("agent", l.Agent)
	if s := l.Session; s != nil {
		ended := s.Ended
		if ended == "" {
			ended = "running"
		}
		row("session", fmt.Sprintf("%s (profile %s, iteration %d, %s)", s.ID, s.Profile, s.Iteration, ended))
	}
	if l.Budget != (loop.Budget{}) {
		row("budget", budgetText(l.Budget))
	}
	row("usage", usageText(l.Usage))
	if tu.Loops > 1 {
		row("tree usage", fmt.Sprintf("%s (%d loops)", usageText(tu.Usage), tu.Loops))
	}
	if l.Lease != nil {
		row("lease", fmt.Sprintf("%s until %s (pid %d)", l.Lease.Owner, l.Lease.ExpiresAt.UTC().Format("15:04:05"), l.Lease.PID))
	}
	w.Flush()
	if n := l.Needs; n != nil && n.Detail != "" {
		label := "needs you"
		if n.Reason == loop.NeedsQuestion {
			label = "question"
		}
		fmt.Fprintf(e.stdout, "\n%s:\n%s\n", label, indent(termsafe.Text(n.Detail)))
	}
	if l.Task != "" {
		fmt.Fprintf(e.stdout, "\ntask:\n%s\n", indent(termsafe.Text(l.Task)))
	}
	if len(l.Evidence) > 0 {
		fmt.Fprintf(e.stdout, "\nevidence:\n%s", evidenceText(l.Evidence))
	}
	if l.Feedback != "" {
		fmt.Fprintf(e.stdout, "\nfeedback:\n%s\n", indent(termsafe.Text(l.Feedback)))
	}
}

// evidenceText is show's evidence: one line a command — where it ran, the
// commit it validated, how it ended, how long it took, the command.
func evidenceText(ev []loop.Evidence) string {
	var b strings.Builder
	w := table(&b)
	for _, e := range ev {
		commit := loop.ShortCommit(e.Commit)
		if commit == "" {
			commit = "-"
		}
		took := time.Duration(e.DurationMS) * time.Millisecond
		fmt.Fprintf(w, "  %s\t%s\texit %d\t%s\t%s\n", e.Where, commit, e.ExitCode, took.Round(time.Millisecond), termsafe.Line(e.Command))
	}
	w.Flush()
	return b.String()
}

// gitNotes are the workdir and branch rows of show: as recorded, with what
// became of them when this machine ran the loop (its workdir is under this
// home) and they are gone: a finished loop's worktree is removed, and a
// task's branch, once merged into its plan's, deleted.
type gitNotes struct {
	workdir, branch         string
	workdirGone, branchGone bool
}

// landedText is show's landed row: where and when the plan landed, and
// the command when its tree is ready to land (again, after a comment
// re-opened it); "" otherwise.
func landedText(l loop.Loop) string {
	cmd := "loopr land " + loop.ShortID(l.ID)
	if l.Base.Branch == "" {
		cmd += " --into BRANCH" // started on a detached HEAD
	}
	ld := l.Landed
	switch {
	case ld.Into == "" && l.ReadyToLand():
		return "not yet: " + cmd
	case ld.Into == "":
		return ""
	}
	s := fmt.Sprintf("on %s at %s (%s), %s", ld.Into, loop.ShortCommit(ld.Commit), ld.Mode, ld.At.UTC().Format("2006-01-02T15:04:05Z07:00"))
	if l.ReadyToLand() {
		s += "; its tree did more since: " + cmd
	}
	return s
}

func (e *env) gitNotes(l loop.Loop) gitNotes {
	n := gitNotes{workdir: l.Workdir, branch: l.Branch}
	home := e.paths.Home
	if n.workdir == "" || home == "" || !strings.HasPrefix(n.workdir, filepath.Join(home, "worktrees")+string(filepath.Separator)) {
		return n
	}
	if _, err := os.Stat(n.workdir); errors.Is(err, fs.ErrNotExist) {
		n.workdir += " (removed)"
		n.workdirGone = true
	}
	if n.branch == "" {
		return n
	}
	err := exec.Command("git", "-C", e.paths.Workspace, "rev-parse", "--verify", "--quiet", "refs/heads/"+n.branch).Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		n.branchGone = true
		if l.Status == loop.Complete && l.Parent != "" {
			n.branch += " (merged into its plan's branch, then deleted)"
		} else {
			n.branch += " (deleted)"
		}
	}
	return n
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
