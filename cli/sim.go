package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/sim"
)

func (e *env) simCmd() *cobra.Command {
	var (
		jsonOut, metrics bool
		compare          string
	)
	c := &cobra.Command{
		Use:   "sim WORKLOAD.yaml",
		Short: "Run a workload through the scheduler under a virtual clock, with loopr.yml and the workload's overrides",
		Long: `Run a workload through loopr's scheduler (the same policy code as the daemon)
under a virtual clock, to try a configuration before deploying it. The
configuration is loopr.yml with the workload's config: and types: laid over it.

  until: 30
  config: {concurrency: {max_loops: 8}, scheduler: {fairness: {enabled: true}}}
  types: {sync-clone: {base: 100, tier: 8, max_running: 8, conflict_group: git}}
  limits: [{profile: default, from: 600, until: 2400}]
  loops:
    - {id: a1, type: sync-clone, key: clientA, conflict_key: repo1, cost: 10, duration: 3, at: 1}
    - {id: p1, type: plan, duration: 300, approval: 600}
    - {id: p1s1, type: spec, parent: p1, iterations: [{duration: 200, pass: false}, {duration: 150, pass: true}]}

Loop keys: id, type (required); key (fairness key), owner, conflict_key,
parent, cost (cost hint, seconds), duration (seconds, default 1), iterations
(a list of {duration, pass}, or {pass_rate, sigma, seed} to draw them: a
failed one waits the retry backoff and runs again, as in the daemon), approval (seconds a passed loop waits for loopr
approve), agent (profile), at (arrival second; a child without at is created
when its parent completes), deadline (expires if still waiting then).
limits: rate-limit windows of an agent profile. Each virtual second:
arrivals, then ended iterations and approvals, then expiries, then admissions.

The summary reports the makespan against its lower bound max(critical path,
work ÷ max_loops), slot utilisation, and each tree's submission, first task
done, completion, flow time and slowdown (flow ÷ the tree's critical path).
--compare runs built-in policies on the same workload: loopr (as
configured), seed (loopr with the tree weights at 0), fifo (by tree
submission) and cpf (critical path first, knowing the true durations).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := e.resolve(); err != nil {
				return err
			}
			var names []string
			if cmd.Flags().Changed("compare") {
				var err error
				if names, err = sim.ParsePolicies(compare); err != nil {
					return &UsageError{err}
				}
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &UsageError{err}
			}
			w, err := sim.Parse(data, args[0], e.cfg)
			if err != nil {
				return &UsageError{err}
			}
			if names != nil {
				rs, err := sim.Compare(w, names)
				if err != nil {
					return &UsageError{err}
				}
				if jsonOut {
					return sim.WriteCompareJSON(e.stdout, rs)
				}
				return sim.WriteCompareText(e.stdout, rs)
			}
			r, err := sim.RunWith(w, sim.Options{})
			if err != nil {
				return &UsageError{err}
			}
			switch {
			case jsonOut && metrics:
				return r.WriteJSONMetrics(e.stdout)
			case jsonOut:
				return r.WriteJSON(e.stdout)
			}
			return r.WriteText(e.stdout)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, `print the events as JSON: [{"t":3,"event":"admit","id":"a1"}, …]`)
	c.Flags().BoolVar(&metrics, "metrics", false, `with --json, print an object {"policy", "events", "metrics"} instead of the events array`)
	c.Flags().StringVar(&compare, "compare", "", "run these built-in policies on the workload and compare them (comma-separated: loopr, seed, fifo, cpf)")
	return c
}
