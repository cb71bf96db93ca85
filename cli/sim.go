package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/sim"
)

func (e *env) simCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "sim WORKLOAD.yaml",
		Short: "Run a workload through the scheduler under a virtual clock, with loopr.yml and the workload's overrides",
		Long: `Run a workload through loopr's scheduler (the same policy code as the daemon)
under a virtual clock, to try a configuration before deploying it. The
configuration is loopr.yml with the workload's config: and types: laid over it.

  until: 30
  config: {concurrency: {max_loops: 8}, scheduler: {fairness: {enabled: true}}}
  types: {sync-clone: {base: 100, tier: 8, max_running: 8, conflict_group: git}}
  loops:
    - {id: a1, type: sync-clone, key: clientA, conflict_key: repo1, cost: 10, duration: 3, at: 1}

Loop keys: id, type (required); key (fairness key), owner, conflict_key,
parent, cost (cost hint, seconds), duration (seconds, default 1), at (arrival
second), deadline (expires if still waiting then). Each virtual second:
arrivals, then completions, then expiries, then admissions.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &UsageError{err}
			}
			w, err := sim.Parse(data, args[0], e.cfg)
			if err != nil {
				return &UsageError{err}
			}
			r := sim.Run(w)
			if jsonOut {
				return r.WriteJSON(e.stdout)
			}
			return r.WriteText(e.stdout)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, `print the events as JSON: [{"t":3,"event":"admit","id":"a1"}, …]`)
	return c
}
