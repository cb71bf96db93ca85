package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) statusCmd() *cobra.Command {
	var jsonOut bool
	var shown *api.Status // for PostRunE: the workers of an etcd store
	c := &cobra.Command{
		Use:   "status",
		Short: "Daemon, counts by status, usage against caps, rate-limit state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withReader(func(b Backend) error {
				st, err := b.Status(cmd.Context())
				if err != nil {
					return err
				}
				shown = &st
				if jsonOut {
					return writeJSON(e.stdout, st)
				}
				now := e.now()
				if n := st.Counts[loop.NeedsHuman]; n > 0 {
					printNeedsYou(e, st.NeedsYou, n, now)
				}
				w := table(e.stdout)
				if st.Daemon {
					fmt.Fprintf(w, "daemon\trunning, pid %d, version %s, up %s\n", st.PID, st.Version, age(time.Duration(st.UptimeSecs)*time.Second))
				} else {
					fmt.Fprintf(w, "daemon\tnot running\n")
				}
				fmt.Fprintf(w, "home\t%s\n", st.Home)
				if st.Store != "" {
					fmt.Fprintf(w, "store\t%s\n", st.Store)
				}
				var counts []string
				for _, s := range loop.Statuses {
					counts = append(counts, fmt.Sprintf("%s %d", s, st.Counts[s]))
				}
				fmt.Fprintf(w, "loops\t%s\n", strings.Join(counts, ", "))
				usage := []string{fmt.Sprintf("total %d/%d", st.Running, st.MaxLoops)}
				for _, t := range st.Types {
					cp := "-"
					if t.Cap > 0 {
						cp = fmt.Sprint(t.Cap)
					}
					usage = append(usage, fmt.Sprintf("%s %d/%s", t.Type, t.Running, cp))
				}
				fmt.Fprintf(w, "running\t%s\n", strings.Join(usage, ", "))
				limited := 0
				for _, p := range st.Profiles {
					switch {
					case p.Limited:
						fmt.Fprintf(w, "rate limit\tagent %s: backing off after %d hit(s); its loops resume at %s (in %s)\n",
							p.Agent, p.Hits, p.ResumeAt.Local().Format("2006-01-02 15:04:05"), age(p.ResumeAt.Sub(now).Round(time.Second)))
						limited++
					case p.Recovering:
						fmt.Fprintf(w, "rate limit\tagent %s: recovering, one start per poll\n", p.Agent)
						limited++
					}
				}
				if limited == 0 {
					fmt.Fprintf(w, "rate limit\tnone\n")
				}
				if len(st.Spent) > 0 {
					fmt.Fprintf(w, "budget\t%d tree(s) spent their budget: `loopr budget ROOT --usd N` raises it\n", len(st.Spent))
				}
				fmt.Fprintf(w, "spent today\t%s\n", usageText(st.SpentToday))
				disk := fmt.Sprintf("%.1f GB free", st.DiskFreeGB)
				switch {
				case st.DiskFull:
					disk += " — full: no loop starts and new loops are refused until space returns"
				case st.DiskLow:
					disk += " — below storage.disk_quota_min_gb: no new loops start"
				}
				fmt.Fprintf(w, "disk\t%s\n", disk)
				if st.NoGit != "" {
					fmt.Fprintf(w, "no git\t%s\n", st.NoGit)
				}
				if st.Containment != "" {
					fmt.Fprintf(w, "containment\t%s\n", st.Containment)
				}
				if st.Warning != "" {
					fmt.Fprintf(w, "note\t%s\n", st.Warning)
				}
				if err := w.Flush(); err != nil || len(st.Problems) == 0 {
					return err
				}
				fmt.Fprintf(e.stdout, "\nproblems: loops of these types do not start (reason preflight) until fixed\n")
				w = table(e.stdout)
				for _, p := range st.Problems {
					fmt.Fprintf(w, "  %s\t%s\t%s\n", p.TypesText, p.What, p.Fix)
				}
				return w.Flush()
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print status as JSON")
	c.PostRunE = func(*cobra.Command, []string) error {
		if shown != nil && shown.Cluster != nil && !jsonOut {
			printWorkers(e, shown.Cluster)
		}
		return nil
	}
	return c
}

// printNeedsYou lists the loops that need a person, first in `loopr
// status`: what each waits for and the command that answers it.
func printNeedsYou(e *env, items []api.NeedsYou, total int, now time.Time) {
	fmt.Fprintf(e.stdout, "NEEDS YOU (%d)\n", total)
	w := table(e.stdout)
	for _, n := range items {
		detail := n.Detail
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s ago\t%s\n", n.ID, n.Reason, termsafe.Line(clipText(n.Title, 40)), age(now.Sub(n.Since).Round(time.Second)), termsafe.Line(clipText(detail, 80)))
		fmt.Fprintf(w, "  \t\t\t\t→ %s\n", n.Action)
	}
	w.Flush()
	if total > len(items) {
		fmt.Fprintf(e.stdout, "  … and %d more: loopr list --status needs_human\n", total-len(items))
	}
	fmt.Fprintln(e.stdout)
}

func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
