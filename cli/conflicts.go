package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) conflictsCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "conflicts PLAN",
		Short: "Predicted merge conflicts between a plan's live loops, before they merge",
		Long: `Run the conflict radar over the tree of PLAN (any loop of the tree names
it): every live loop's branch with commits past the plan branch's tip is
dry-run merged (git merge-tree --write-tree, git 2.38 or later; no worktree,
index or branch moves) against that tip and against each other live branch.
Each overlap is listed once, naming both loops and the files.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withReader(func(b Backend) error {
				id, err := resolveID(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				c, err := b.Conflicts(cmd.Context(), id)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, c)
				}
				printConflicts(e.stdout, c)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return c
}

// printConflicts prints a radar report: a summary line, then a LOOP,
// OTHER, FILES table.
func printConflicts(w io.Writer, c api.Conflicts) {
	if c.Branch == "" {
		fmt.Fprintf(w, "plan %s has no branch yet: nothing to compare\n", loop.ShortID(c.Plan))
		return
	}
	fmt.Fprintf(w, "plan %s on %s: %d live branches, %d with commits past the tip, %d dry runs (the rest cached)\n",
		loop.ShortID(c.Plan), (loop.Base{Branch: c.Branch, Commit: c.Commit}).String(), c.Live, c.Checked, c.Ran)
	if c.Skipped > 0 {
		fmt.Fprintf(w, "%d loop pairs not compared (over the per-scan bound)\n", c.Skipped)
	}
	if len(c.Conflicts) == 0 {
		fmt.Fprintln(w, "no predicted conflicts")
		return
	}
	t := table(w)
	fmt.Fprintln(t, "LOOP\tOTHER\tFILES")
	for _, x := range c.Conflicts {
		fmt.Fprintf(t, "%s\t%s\t%s\n", conflictSide(x.Loop, x.Title, ""), conflictSide(x.Other, x.OtherTitle, x.With), conflictFiles(x.Files))
	}
	t.Flush()
}

// conflictSide is one side of a conflict: "plan 1a2b3c4d" for the plan
// tip, else a loop's short id and title.
func conflictSide(id, title, with string) string {
	if with == api.ConflictWithPlan {
		return "plan tip " + loop.ShortID(id)
	}
	return loop.ShortID(id) + " " + oneLine(title, 30)
}

// conflictFiles lists files, at most five, escaped for the terminal.
func conflictFiles(files []string) string {
	shown := files
	if len(shown) > 5 {
		shown = shown[:5]
	}
	s := termsafe.Line(strings.Join(shown, ", "))
	if n := len(files) - len(shown); n > 0 {
		s += fmt.Sprintf(" (+%d more)", n)
	}
	return s
}
