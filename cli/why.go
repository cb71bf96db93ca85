package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) whyCmd() *cobra.Command {
	var (
		jsonOut bool
		nowFlag string
	)
	c := &cobra.Command{
		Use:               "why ID",
		Short:             "Explain a loop's priority and every scheduling gate",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			now := e.now().UTC()
			if nowFlag != "" {
				var err error
				if now, err = parseTime("--now", nowFlag); err != nil {
					return err
				}
			}
			return e.withReader(func(b Backend) error {
				id, err := resolveID(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				w, err := b.Why(cmd.Context(), id, now)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, w)
				}
				fmt.Fprintf(e.stdout, "%s %q  %s  (%s, iteration %d/%d)\n", w.Loop.Type, w.Loop.Title, loop.ShortID(w.Loop.ID),
					w.Loop.Status, w.Loop.Iteration, w.Loop.MaxIterations)
				fmt.Fprintln(e.stdout, w.Formula)
				if w.Tree != "" {
					fmt.Fprintln(e.stdout, termsafe.Line(w.Tree))
				}
				var failed []string // the gates that hold it, each said once
				for _, g := range w.Gates {
					mark := "✓"
					if !g.OK {
						if saidBefore(failed, g.Text) {
							continue
						}
						failed = append(failed, g.Text)
						mark = "✗"
					}
					fmt.Fprintf(e.stdout, "  %s %s\n", mark, g.Text)
				}
				if f := w.Loop.Fanout; f != nil {
					fmt.Fprintln(e.stdout, f.Text(w.Loop.ID)) // best-of-N: where this candidate stands
				}
				printWhyConflicts(e.stdout, w)
				switch w.Loop.Status {
				case loop.AwaitingApproval:
					printApprovalHint(e.stdout, w.Loop.ID)
				case loop.AwaitingReview:
					printReviewHint(e.stdout, w.Loop.ID)
				}
				switch {
				case !w.Scheduled:
				case w.Row.Runnable:
					fmt.Fprintln(e.stdout, "runnable: yes — starts at the next scheduling tick")
				default:
					fmt.Fprintf(e.stdout, "runnable: %s\n", runnableText(w.Row.Runnable, w.Row.ReasonText))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the explanation as JSON")
	c.Flags().StringVar(&nowFlag, "now", "", "evaluate at this RFC 3339 instant")
	return c
}

// printApprovalHint says how to act on a loop awaiting approval.
func printApprovalHint(w io.Writer, id string) {
	id = loop.ShortID(id)
	fmt.Fprintf(w, "awaiting your approval: read it with `loopr show %s --artifact`, then one of\n", id)
	t := table(w)
	fmt.Fprintf(t, "  loopr approve %s\tstart what it plans\n", id)
	fmt.Fprintf(t, "  loopr iterate %s --feedback \"…\"\tsend it back with what to change\n", id)
	fmt.Fprintf(t, "  loopr reject %s [--reason \"…\"]\tfail it\n", id)
	t.Flush()
}

func printReviewHint(w io.Writer, id string) {
	id = loop.ShortID(id)
	fmt.Fprintf(w, "awaiting your review: read its diff with `loopr diff %s`, then one of\n", id)
	t := table(w)
	fmt.Fprintf(t, "  loopr approve %s\tmerge it (the merge queue)\n", id)
	fmt.Fprintf(t, "  loopr iterate %s --feedback \"…\"\tsend it back with what to change\n", id)
	fmt.Fprintf(t, "  loopr comment %s PATH:LINE \"…\"\tsend it back with a comment on one line\n", id)
	fmt.Fprintf(t, "  loopr reject %s [--reason \"…\"]\tfail it\n", id)
	t.Flush()
}

// printWhyConflicts lists the loop's predicted merge conflicts (the
// conflict radar), from its side.
func printWhyConflicts(w io.Writer, why api.Why) {
	for _, c := range why.Conflicts {
		other := conflictSide(c.Other, c.OtherTitle, c.With)
		if c.With == api.ConflictWithLoop && c.Other == why.Loop.ID {
			other = conflictSide(c.Loop, c.Title, "")
		}
		fmt.Fprintf(w, "  ⚠ predicted merge conflict with %s in %s\n", other, conflictFiles(c.Files))
	}
	if why.ConflictCheck != "" {
		fmt.Fprintf(w, "  ? conflict radar: %s\n", termsafe.Line(why.ConflictCheck))
	}
}
