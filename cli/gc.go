package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
)

func (e *env) gcCmd() *cobra.Command {
	var (
		req     api.GCRequest
		jsonOut bool
	)
	c := &cobra.Command{
		Use:   "gc [--dry-run] [--days N]",
		Short: "Remove finished loops older than retention.days, with their files",
		Long: `Run the retention pass now (the daemon also runs it at start and hourly):
loops that are complete, failed, cancelled, expired or invalidated and
finished more than retention.days ago are removed with their journal
entries and their <home>/loops/<id> directories. A loop goes only with its
whole subtree: never while a descendant is still live or finished recently.
It also deletes the git branches (and worktrees) of cancelled and
invalidated loops, whatever their age; branches of complete loops were
merged and deleted already, and branches of failed loops are kept (a reset
resumes their work). Goes through the daemon when one runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("days") && req.Days < 1 {
				return &UsageError{fmt.Errorf("--days: must be at least 1 (retention.days 0 keeps everything; nothing to run)")}
			}
			req.Branches = true
			return e.withBackend(func(b Backend) error {
				res, err := b.GC(cmd.Context(), req)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, res)
				}
				e.printGC(res)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&req.DryRun, "dry-run", false, "only list what would be removed")
	c.Flags().IntVar(&req.Days, "days", 0, "retention for this run, in days (default: retention.days of loopr.yml)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (e *env) printGC(res api.GCResult) {
	out := e.stdout
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	if len(res.Branches) > 0 {
		branchVerb := "deleted"
		if res.DryRun {
			branchVerb = "would delete"
		}
		fmt.Fprintf(out, "%s %d git %s of cancelled and invalidated loops:\n", branchVerb, len(res.Branches), plural(len(res.Branches), "branch"))
		w := table(out)
		for _, b := range res.Branches {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", b.Branch, b.Status, b.ID, oneLine(b.Title, 50))
		}
		w.Flush()
	}
	if res.Days == 0 {
		fmt.Fprintln(out, "retention.days is 0: every loop is kept (use --days N to remove old loops once)")
		return
	}
	cutoff := res.Cutoff.Local().Format("2006-01-02 15:04")
	if len(res.Removed) == 0 {
		fmt.Fprintf(out, "nothing to remove: no finished loop is older than %d days (before %s)", res.Days, cutoff)
	} else {
		fmt.Fprintf(out, "%s %d loops that finished before %s (%d days), %d directories, %s",
			verb, len(res.Removed), cutoff, res.Days, res.Dirs, control.HumanBytes(res.Bytes))
	}
	if res.Kept > 0 {
		fmt.Fprintf(out, "; kept %d old loops whose descendants are live or recent", res.Kept)
	}
	fmt.Fprintln(out)
	if len(res.Removed) == 0 {
		return
	}
	now := e.now()
	w := table(out)
	fmt.Fprintln(w, "ID\tTYPE\tSTATUS\tFINISHED\tTITLE")
	for _, l := range res.Removed {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s ago\t%s\n", l.ID, l.Type, l.Status, age(now.Sub(l.FinishedAt).Truncate(time.Hour)), oneLine(l.Title, 60))
	}
	w.Flush()
}
