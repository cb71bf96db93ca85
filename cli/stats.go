package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) statsCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "stats",
		Short: "Throughput, success rate, iterations per type, rate limits, scheduler latencies",
		Long: `Summarise loopr's work: completions in the last hour and day, the success
rate of finished loops (complete / (complete + failed)), the mean iterations
a complete loop of each type needed, and, from the daemon since it started,
starts, completions, failures, rate-limit hits and blocked time, and the
p50/p99 of the scheduling tick and of the dispatch latency (from a loop
being ready to its start). Without a daemon only the store's part is shown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withReader(func(b Backend) error {
				st, err := b.Stats(cmd.Context())
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, st)
				}
				e.printStats(st)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the statistics as JSON")
	return c
}

func (e *env) printStats(st api.Stats) {
	w := table(e.stdout)
	up := time.Duration(st.UptimeSecs) * time.Second
	if st.Daemon {
		fmt.Fprintf(w, "daemon\tup %s (since %s); counters below cover this run\n", age(up), st.Since.Local().Format("2006-01-02 15:04:05"))
	} else {
		fmt.Fprintf(w, "daemon\tnot running: counters and latencies need the daemon\n")
	}
	fmt.Fprintf(w, "loops\t%d kept; %d completed in the last hour, %d in the last day\n", st.Total, st.CompletedHour, st.CompletedDay)
	if n := st.FinishedOK + st.FinishedFailed; n > 0 {
		fmt.Fprintf(w, "success\t%.1f%% (%d complete, %d failed)\n", 100*st.SuccessRate, st.FinishedOK, st.FinishedFailed)
	} else {
		fmt.Fprintf(w, "success\t- (no loop has finished)\n")
	}
	fmt.Fprintf(w, "spent\t%s\n", usageText(st.Usage))
	fmt.Fprintf(w, "today\t%s\n", usageText(st.Today))
	if st.Daemon {
		var done int64
		for _, t := range st.Types {
			done += t.Completions
		}
		rate := "-"
		if h := up.Hours(); h > 0 {
			rate = fmt.Sprintf("%.1f/h", float64(done)/h)
		}
		fmt.Fprintf(w, "throughput\t%s (%d completions in %s)\n", rate, done, age(up))
		fmt.Fprintf(w, "rate limit\t%d hits, work blocked %s; %s\n", st.RateLimit.Hits,
			(time.Duration(st.RateLimit.BlockedSecs * float64(time.Second))).Round(time.Second), rateNow(st))
		fmt.Fprintf(w, "tick\t%s\n", latency(st.Tick, "ticks"))
		fmt.Fprintf(w, "dispatch\t%s\n", latency(st.Dispatch, "starts"))
	} else {
		fmt.Fprintf(w, "rate limit\t%s\n", rateNow(st))
	}
	w.Flush()

	fmt.Fprintln(e.stdout)
	w = table(e.stdout)
	head := "TYPE\tLOOPS\tRUNNING\tCOMPLETE\tFAILED\tMEAN ITER"
	if st.Daemon {
		head += "\tSTARTS\tCOMPLETIONS\tFAILURES"
	}
	head += "\tCOST\tTOKENS"
	fmt.Fprintln(w, head)
	for _, t := range st.Types {
		total := 0
		for _, n := range t.Counts {
			total += n
		}
		mean := "-"
		if t.Counts[loop.Complete] > 0 {
			mean = fmt.Sprintf("%.1f", t.MeanIterations)
		}
		row := fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%s", t.Type, total, t.Counts[loop.Running], t.Counts[loop.Complete], t.Counts[loop.Failed], mean)
		if st.Daemon {
			row += fmt.Sprintf("\t%d\t%d\t%d", t.Starts, t.Completions, t.Failures)
		}
		row += fmt.Sprintf("\t%s\t%s", costText(t.Usage), tokens(t.Usage.Tokens()))
		fmt.Fprintln(w, row)
	}
	w.Flush()
}

func rateNow(st api.Stats) string {
	if st.RateLimit.Blocked {
		return fmt.Sprintf("now backing off until %s", st.RateLimit.State.BackoffUntil.Local().Format("15:04:05"))
	}
	return "not backing off now"
}

// latency formats a summary: "p50 1.2 ms, p99 8.5 ms, max 20 ms (of the last 2048 of 7200 ticks)".
func latency(l api.Latency, what string) string {
	if l.Count == 0 {
		return "no " + what + " yet"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "p50 %s, p99 %s, max %s (", msString(l.P50Ms), msString(l.P99Ms), msString(l.MaxMs))
	if int64(l.Window) < l.Count {
		fmt.Fprintf(&b, "last %d of %d %s)", l.Window, l.Count, what)
	} else {
		fmt.Fprintf(&b, "%d %s)", l.Count, what)
	}
	return b.String()
}

// msString formats milliseconds: 0.42 ms, 12 ms, 1.5 s, 2m5s.
func msString(ms float64) string {
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 1000:
		return fmt.Sprintf("%.0f ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1f s", ms/1000)
	}
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Second).String()
}
