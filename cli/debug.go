package cli

import (
	"bufio"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	if !alignable(v.Rows) {
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
	// The table tabwriter would print (columns as wide as their widest
	// cell plus two spaces, the last column as it is), written directly:
	// 100k rows through tabwriter and fmt cost a good part of the command.
	ages := make([]string, len(v.Rows))
	head := [...]string{"ID", "TYPE", "PRIORITY", "AGE", "DEPTH", "ITER"}
	var width [6]int
	for i, h := range head {
		width[i] = len(h)
	}
	var num [20]byte
	digits := func(n int) int { return len(strconv.AppendInt(num[:0], int64(n), 10)) }
	for i := range v.Rows {
		r := &v.Rows[i]
		ages[i] = age(time.Duration(r.AgeSeconds) * time.Second)
		for c, w := range [6]int{utf8.RuneCountInString(r.ID), utf8.RuneCountInString(r.Type), digits(r.Priority),
			utf8.RuneCountInString(ages[i]), digits(r.Depth), digits(r.Iteration)} {
			width[c] = max(width[c], w)
		}
	}
	pad := func(text string, c int) {
		out.WriteString(text)
		for range width[c] + 2 - utf8.RuneCountInString(text) {
			out.WriteByte(' ')
		}
	}
	padInt := func(n, c int) {
		b := strconv.AppendInt(num[:0], int64(n), 10)
		out.Write(b)
		for range width[c] + 2 - len(b) {
			out.WriteByte(' ')
		}
	}
	for c, h := range head {
		pad(h, c)
	}
	out.WriteString("RUNNABLE\n")
	for i := range v.Rows {
		r := &v.Rows[i]
		pad(r.ID, 0)
		pad(r.Type, 1)
		padInt(r.Priority, 2)
		pad(ages[i], 3)
		padInt(r.Depth, 4)
		padInt(r.Iteration, 5)
		switch {
		case r.Runnable:
			out.WriteString("yes")
		case len(r.ReasonText) == 0:
			out.WriteString("no")
		default:
			out.WriteString("no (")
			for j, t := range r.ReasonText {
				if j > 0 {
					out.WriteString(", ")
				}
				out.WriteString(t)
			}
			out.WriteString(")")
		}
		out.WriteByte('\n')
	}
	return out.Flush()
}

// alignable reports whether the rows hold none of the characters that
// tabwriter treats as cell or line breaks, so that printScheduler can
// align them itself and print exactly what tabwriter would.
func alignable(rows []api.SchedRow) bool {
	bad := func(s string) bool { return strings.ContainsAny(s, "\t\n\v\f") }
	for i := range rows {
		r := &rows[i]
		if bad(r.ID) || bad(r.Type) {
			return false
		}
		for _, t := range r.ReasonText {
			if bad(t) {
				return false
			}
		}
	}
	return true
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
