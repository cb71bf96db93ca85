package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
)

// limitsCmd is `loopr limits`: the rate-limit state of every agent
// profile, and `loopr limits clear PROFILE` to forget one.
func (e *env) limitsCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "limits [--json]",
		Short: "List the rate limits of the agent profiles; `limits clear PROFILE` ends one now",
		Long: `List every agent profile of loopr.yml (and any other the store still holds a
state for) with its rate limit: free, limited until when (no loop starts on it
before then), or recovering (one start per poll); the consecutive hits; and how
many loops wait in needs_human for it (reason limit).

A limit the provider announced is honoured up to 7 days; loopr probes again
sooner when the announced reset is further away or already past.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withReader(func(b Backend) error {
				limits, err := b.Limits(cmd.Context())
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, limits)
				}
				e.printLimits(limits)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the profiles' states as JSON")
	c.AddCommand(e.limitsClearCmd())
	return c
}

func (e *env) limitsClearCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "clear PROFILE",
		Short: "Forget an agent profile's rate limit: its loops may start at once",
		Long: `Forget the rate limit of agent profile PROFILE (default, or a name under
agents: in loopr.yml): its loops may start at once, and the loops that wait in
needs_human for its limit go back to pending. Use it when you know the limit is
over (the plan was upgraded, the reset was misread); if it is not, the next run
is refused again and the profile backs off anew.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeProfiles,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.withBackend(func(b Backend) error {
				res, err := b.ClearLimit(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, res)
				}
				if res.Was.Limited || res.Was.Recovering || res.Was.Hits > 0 {
					fmt.Fprintf(e.stdout, "agent %s: rate limit cleared (it was %s)\n", res.Agent, limitState(res.Was, e.now()))
				} else {
					fmt.Fprintf(e.stdout, "agent %s: was not limited; nothing to clear\n", res.Agent)
				}
				if n := len(res.Released); n > 0 {
					fmt.Fprintf(e.stdout, "resumed %d %s that waited for it: %s\n", n, plural(n, "loop"), strings.Join(res.Released, ", "))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// printLimits is the table of `loopr limits`.
func (e *env) printLimits(limits []api.AgentLimit) {
	now := e.now()
	w := table(e.stdout)
	fmt.Fprintf(w, "AGENT\tSTATE\tHITS\tWAITING\n")
	limited := ""
	for _, l := range limits {
		state := limitState(l.ProfileLimit, now)
		if !l.Configured {
			state += " (not in loopr.yml)"
		}
		if l.Limited && limited == "" {
			limited = l.Agent
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", termsafe.Line(l.Agent), state, l.Hits, l.Held)
	}
	w.Flush()
	if limited != "" {
		fmt.Fprintf(e.stdout, "\nloops on a limited profile start again by themselves then; `loopr limits clear %s` ends a limit now\n", limited)
	}
}

// limitState reads "free", "limited until 2026-05-01 15:04:05 (in 59m)"
// or "recovering (one start per poll)".
func limitState(p api.ProfileLimit, now time.Time) string {
	switch {
	case p.Limited:
		return fmt.Sprintf("limited until %s (in %s)", p.ResumeAt.Local().Format("2006-01-02 15:04:05"), age(p.ResumeAt.Sub(now).Round(time.Second)))
	case p.Recovering:
		return "recovering (one start per poll)"
	}
	return "free"
}

// completeProfiles completes PROFILE with the agent profiles of loopr.yml.
func (e *env) completeProfiles(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 || e.resolve() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.cfg.Profiles(), cobra.ShellCompDirectiveNoFileComp
}
