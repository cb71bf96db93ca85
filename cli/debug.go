package cli

import (
	"bufio"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
)

func (e *env) debugCmd() *cobra.Command {
	c := &cobra.Command{Use: "debug", Short: "Look inside loopr's decisions"}
	var (
		jsonOut bool
		nowFlag string
	)
	sched := &cobra.Command{
		Use:   "scheduler [--now T] [--json]",
		Short: "Every pending loop in scheduling order, with its priority and why it does or does not run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// One command that reads every waiting loop and keeps all of
			// it until it prints: collecting as it grows is wasted work.
			defer debug.SetGCPercent(debug.SetGCPercent(400))
			now := e.now().UTC()
			if nowFlag != "" {
				var err error
				if now, err = parseTime("--now", nowFlag); err != nil {
					return err
				}
			}
			return e.withBackend(func(b Backend) error {
				v, err := b.Scheduler(cmd.Context(), now)
				if err != nil {
					return err
				}
				if jsonOut {
					if v.Rows == nil {
						v.Rows = []api.SchedRow{}
					}
					return writeJSON(e.stdout, v.Rows)
				}
				return printScheduler(e, v)
			})
		},
	}
	sched.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array of rows (stable fields)")
	sched.Flags().StringVar(&nowFlag, "now", "", "evaluate at this RFC 3339 instant (deterministic replay)")
	c.AddCommand(sched)
	return c
}

func printScheduler(e *env, v api.SchedulerView) error {
	if len(v.Rows) == 0 {
		fmt.Fprintln(e.stdout, "no pending loops")
		return nil
	}
	// tabwriter writes cell by cell: buffer it, or 100k rows are a
	// million write calls.
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	w := table(out)
	fmt.Fprintln(w, "ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tRUNNABLE")
	for _, r := range v.Rows {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%s\n", r.ID, r.Type, r.Priority,
			age(time.Duration(r.AgeSeconds)*time.Second), r.Depth, r.Iteration, runnableText(r.Runnable, r.ReasonText))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return out.Flush()
}

// runnableText is "yes", or "no (reason, reason…)".
func runnableText(ok bool, reasons []string) string {
	if ok {
		return "yes"
	}
	if len(reasons) == 0 {
		return "no"
	}
	return "no (" + strings.Join(reasons, ", ") + ")"
}
