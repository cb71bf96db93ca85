package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/loop"
)

func (e *env) statusCmd() *cobra.Command {
	var jsonOut bool
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
				if jsonOut {
					return writeJSON(e.stdout, st)
				}
				now := e.now()
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
				switch {
				case st.RateLimited:
					fmt.Fprintf(w, "rate limit\tbacking off after %d hit(s); work resumes at %s (in %s)\n",
						st.RateLimit.Hits, st.ResumeAt.Local().Format("15:04:05"), age(st.ResumeAt.Sub(now).Round(time.Second)))
				case st.Recovering:
					fmt.Fprintf(w, "rate limit\trecovering until %s: one start per poll\n", st.RateLimit.RecoveryUntil.Local().Format("15:04:05"))
				default:
					fmt.Fprintf(w, "rate limit\tnone (hits %d)\n", st.RateLimit.Hits)
				}
				disk := fmt.Sprintf("%.1f GB free", st.DiskFreeGB)
				switch {
				case st.DiskFull:
					disk += " — full: no loop starts and new loops are refused until space returns"
				case st.DiskLow:
					disk += " — below storage.disk_quota_min_gb: no new loops start"
				}
				fmt.Fprintf(w, "disk\t%s\n", disk)
				if st.Warning != "" {
					fmt.Fprintf(w, "note\t%s\n", st.Warning)
				}
				return w.Flush()
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print status as JSON")
	return c
}
