package cli

import (
	"bufio"
	"fmt"
	"runtime/debug"
	"strconv"
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
			return e.withReader(func(b Backend) error {
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
	// tabwriter, one Write per row: 100k rows cell by cell through fmt
	// cost a good part of the command.
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	w := table(out)
	line := []byte("ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tRUNNABLE\n")
	for i := range v.Rows {
		if _, err := w.Write(line); err != nil {
			return err
		}
		r := &v.Rows[i]
		line = append(line[:0], r.ID...)
		line = append(append(line, '\t'), r.Type...)
		line = strconv.AppendInt(append(line, '\t'), int64(r.Priority), 10)
		line = append(append(line, '\t'), age(time.Duration(r.AgeSeconds)*time.Second)...)
		line = strconv.AppendInt(append(line, '\t'), int64(r.Depth), 10)
		line = strconv.AppendInt(append(line, '\t'), int64(r.Iteration), 10)
		line = append(append(line, '\t'), runnableText(r.Runnable, r.ReasonText)...)
		line = append(line, '\n')
	}
	if _, err := w.Write(line); err != nil {
		return err
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
