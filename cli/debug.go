package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
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
			// One command that reads every waiting loop and keeps its
			// table until it prints: collecting as it grows is wasted work.
			defer debug.SetGCPercent(debug.SetGCPercent(400))
			now := e.now().UTC()
			if nowFlag != "" {
				var err error
				if now, err = parseTime("--now", nowFlag); err != nil {
					return err
				}
			}
			return e.withReader(func(b Backend) error {
				if !jsonOut {
					printSchedulerWorker(cmd.Context(), e, b)
				}
				if rs, ok := b.(schedStreamer); ok {
					each := func(row func(*api.SchedRow) error) error {
						_, err := rs.SchedulerRows(cmd.Context(), now, func(_ *api.SchedulerView, r *api.SchedRow) error { return row(r) })
						return err
					}
					if jsonOut {
						return writeRowsJSON(e.stdout, each)
					}
					return printScheduler(e, each)
				}
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
				return printScheduler(e, rowsOf(v))
			})
		},
	}
	sched.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array of rows (stable fields)")
	sched.Flags().StringVar(&nowFlag, "now", "", "evaluate at this RFC 3339 instant (deterministic replay)")
	c.AddCommand(sched)
	return c
}

// schedStreamer is a Backend that hands over the plan's rows as they
// arrive (the daemon's client): the table is built while the rest is on
// its way, and 100k rows are never held.
type schedStreamer interface {
	SchedulerRows(ctx context.Context, now time.Time, row func(*api.SchedulerView, *api.SchedRow) error) (api.SchedulerView, error)
}

// writeRowsJSON prints the rows each yields as one JSON array, the bytes
// writeJSON writes for the slice of them, a row at a time: 100k rows are
// never held, nor their 50 MB document. An error leaves the output cut
// short, never a valid-looking array.
func writeRowsJSON(w io.Writer, each func(row func(*api.SchedRow) error) error) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	opts := json.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.WithIndent("  "))
	enc := jsontext.NewEncoder(bw, opts)
	if err := enc.WriteToken(jsontext.BeginArray); err != nil {
		return err
	}
	if err := each(func(r *api.SchedRow) error { return json.MarshalEncode(enc, r, opts) }); err != nil {
		return err
	}
	if err := enc.WriteToken(jsontext.EndArray); err != nil {
		return err
	}
	return bw.Flush() // the encoder ends the top-level value with a newline
}

// printScheduler prints the table of the rows each yields, aligned by
// text/tabwriter, one Write per row (100k rows cell by cell through fmt
// cost a good part of the command). Nothing is printed when each fails.
func printScheduler(e *env, each func(row func(*api.SchedRow) error) error) error {
	out := bufio.NewWriterSize(e.stdout, 64<<10)
	w := table(out)
	var line []byte
	n := 0
	tree := false // the tree term is on: every row has its tree's work left
	err := each(func(r *api.SchedRow) error {
		if n == 0 {
			header := "ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tRUNNABLE\n"
			if tree = r.TreeLeft > 0; tree {
				header = "ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tTREE\tRUNNABLE\n"
			}
			if _, err := io.WriteString(w, header); err != nil {
				return err
			}
		}
		n++
		line = append(line[:0], r.ID...)
		line = append(append(line, '\t'), r.Type...)
		line = strconv.AppendInt(append(line, '\t'), int64(r.Priority), 10)
		line = append(append(line, '\t'), age(time.Duration(r.AgeSeconds)*time.Second)...)
		line = strconv.AppendInt(append(line, '\t'), int64(r.Depth), 10)
		line = strconv.AppendInt(append(line, '\t'), int64(r.Iteration), 10)
		if tree { // its points (boost + age) and the work left in its tree: +24 5m
			line = strconv.AppendInt(append(line, '\t', '+'), int64(r.TreeBoost+r.TreeAgeBoost), 10)
			line = append(append(line, ' '), scheduler.Seconds(r.TreeLeft)...)
		}
		line = append(append(line, '\t'), runnableText(r.Runnable, r.ReasonText)...)
		_, err := w.Write(append(line, '\n'))
		return err
	})
	switch {
	case err != nil:
		return err
	case n == 0:
		fmt.Fprintln(e.stdout, "no pending loops")
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return out.Flush()
}

// rowsOf yields the rows of v to printScheduler.
func rowsOf(v api.SchedulerView) func(row func(*api.SchedRow) error) error {
	return func(row func(*api.SchedRow) error) error {
		for i := range v.Rows {
			if err := row(&v.Rows[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// runnableText is "yes", or "no (reason, reason…)", each thing said once
// (see saidBefore).
func runnableText(ok bool, reasons []string) string {
	if ok {
		return "yes"
	}
	var b strings.Builder
	b.WriteString("no")
	n := 0
	for i, r := range reasons {
		if saidBefore(reasons[:i], r) {
			continue
		}
		if n == 0 {
			b.WriteString(" (")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(r)
		n++
	}
	if n > 0 {
		b.WriteByte(')')
	}
	return b.String()
}

// saidBefore reports whether one of the earlier reason texts already says
// text: a loop held for its spent budget reads "needs you (budget): budget
// spent: $0.30 of $0.25", and the budget gate's "budget spent: $0.30 of
// $0.25" after it would say it twice. Only the human output drops it; the
// --json rows keep every reason.
func saidBefore(earlier []string, text string) bool {
	for _, e := range earlier {
		if e == text || len(e) > len(text)+2 && strings.HasSuffix(e, text) && e[len(e)-len(text)-2:len(e)-len(text)] == ": " {
			return true
		}
	}
	return false
}

// printSchedulerWorker names, on an etcd store, the worker that is the
// elected scheduler: the one that acts on this plan.
func printSchedulerWorker(ctx context.Context, e *env, b Backend) {
	if e.cfg == nil || e.cfg.Store.Backend != store.BackendEtcd {
		return // one daemon schedules: no status round trip
	}
	st, err := b.Status(ctx)
	if err != nil || st.Cluster == nil {
		return
	}
	if st.Cluster.Scheduler == "" {
		fmt.Fprintf(e.stdout, "scheduler: none elected (no live worker); nothing starts until a daemon runs\n\n")
		return
	}
	fmt.Fprintf(e.stdout, "scheduler: worker %s (elected among %d); it starts the loops below marked yes\n\n", st.Cluster.Scheduler, len(st.Cluster.Workers))
}
