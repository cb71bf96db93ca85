package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// landTimeout bounds `loopr land`'s wait for the daemon: merge.validate
// runs within it.
const landTimeout = 6 * time.Hour

func (e *env) landCmd() *cobra.Command {
	var req api.LandRequest
	var jsonOut bool
	c := &cobra.Command{
		Use:   "land PLAN [--dry-run]",
		Short: "Merge a done plan's branch into the branch it started from",
		Long: `Land a plan: merge its branch (loopr/p-…) into its base branch, the branch
checked out when the plan was made (show's base row): a fast forward when
the base branch has not moved, else a merge commit. merge.validate runs
first on the result, in a temporary worktree; the base branch moves only
if it passes.

Uncommitted work is never touched. When the base branch is checked out in
your worktree, it is updated as ` + "`git merge --ff-only`" + ` would there, and only
when none of your uncommitted changes is in a file the landing changes;
when it is checked out nowhere, the ref moves (guarded by its old value).

It refuses, exit 2 and one line saying why, nothing moved, when the tree is
not done (--partial lands what is there), when the base branch moved in a
way that conflicts with the plan branch, or when your uncommitted changes
touch a file the landing changes. --dry-run says what would happen.

With a daemon running, the landing runs in it, holding the merge queue's
lock on the plan branch: no task lands on it meanwhile. While it runs,
stderr shows how long it has taken (a line rewritten each second on a
terminal, a line every 30 seconds elsewhere).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withReader(func(b Backend) error {
				ctx, cancel := context.WithTimeout(cmd.Context(), landTimeout)
				defer cancel()
				l, err := lookup(ctx, b, args[0])
				if err != nil {
					return err
				}
				if !jsonOut && !req.DryRun {
					fmt.Fprintf(e.stdout, "landing plan %s %q…\n", loop.ShortID(l.ID), oneLine(l.Title, 50))
				}
				what := "landing"
				if req.DryRun {
					what = "checking the landing"
				}
				stop := showWaiting(e.stderr, isTerminal(e.stderr), what)
				res, err := b.Land(ctx, l.ID, req)
				stop()
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, res)
				}
				printLanding(e.stdout, res)
				return nil
			})
		},
	}
	f := c.Flags()
	f.BoolVar(&req.DryRun, "dry-run", false, "say what would happen (fast forward or merge, commits, files); change nothing")
	f.StringVar(&req.Into, "into", "", "land on this branch instead of the plan's base branch")
	f.BoolVar(&req.Partial, "partial", false, "land a plan whose tree is not done yet")
	f.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// printLanding prints what a landing did or would do: its steps, then the
// commits and files.
func printLanding(w io.Writer, res api.LandResult) {
	for _, s := range res.Steps {
		fmt.Fprintln(w, s)
	}
	if res.Mode == loop.LandUpToDate {
		return
	}
	if len(res.Commits) > 0 {
		fmt.Fprintf(w, "commits (%d):\n", res.CommitCount)
		for _, c := range res.Commits {
			fmt.Fprintf(w, "  %s\n", oneLine(c, 76))
		}
		if more := res.CommitCount - len(res.Commits); more > 0 {
			fmt.Fprintf(w, "  … and %d more\n", more)
		}
	}
	fmt.Fprintf(w, "files (%d):\n", len(res.Files))
	const maxFiles = 40
	for i, f := range res.Files {
		if i == maxFiles {
			fmt.Fprintf(w, "  … and %d more\n", len(res.Files)-maxFiles)
			break
		}
		fmt.Fprintf(w, "  %s\n", f)
	}
	if !res.DryRun {
		fmt.Fprintf(w, "landed: %s is at %s\n", res.Into, loop.ShortCommit(res.Result))
	}
}
