package cli

import (
	"fmt"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
)

func (e *env) budgetCmd() *cobra.Command {
	var (
		usd     float64
		tokens  int64
		jsonOut bool
	)
	c := &cobra.Command{
		Use:   "budget ID [--usd N] [--tokens N]",
		Short: "Change a loop's budget (a root's covers its tree); loops waiting for it resume",
		Long: `Change the budget of a loop: the dollars (--usd) and tokens (--tokens) its
iterations may spend, as the agents report them. A root loop's budget covers
its whole tree. 0 removes that ceiling; a flag not given keeps its value.
Loops of the tree that wait in needs_human because the budget was spent go
back to pending when it no longer is. An iteration in flight is never killed
for its budget.

ID is a loop id or a unique prefix of one (at least 4 characters).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var req api.BudgetRequest
			if cmd.Flags().Changed("usd") {
				req.USD = &usd
			}
			if cmd.Flags().Changed("tokens") {
				req.Tokens = &tokens
			}
			if err := checkUSD("--usd", usd, "0 removes the dollar ceiling"); err != nil {
				return err
			}
			if tokens < 0 {
				return &UsageError{fmt.Errorf("--tokens: must be >= 0 (0 removes the token ceiling), got %d", tokens)}
			}
			if req.USD == nil && req.Tokens == nil {
				return &UsageError{fmt.Errorf("budget: give --usd N, --tokens N or both (0 removes that ceiling)")}
			}
			return e.withBackend(func(b Backend) error {
				id, err := resolveID(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				res, err := b.SetBudget(cmd.Context(), id, req)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, res)
				}
				scope := "loop"
				if res.Loop.Parent == "" {
					scope = "tree"
				}
				fmt.Fprintf(e.stdout, "%s %s budget %s; %s spent %s\n", scope, res.Loop.ID, budgetText(res.Loop.Budget), scope, usageText(res.Usage))
				if len(res.Resumed) > 0 {
					fmt.Fprintf(e.stdout, "resumed %d loop(s) waiting for the budget: %s\n", len(res.Resumed), strings.Join(res.Resumed, ", "))
				}
				if len(res.Held) > 0 {
					fmt.Fprintf(e.stdout, "the budget is spent: %d waiting loop(s) now wait in needs_human: %s\n", len(res.Held), strings.Join(res.Held, ", "))
				}
				return nil
			})
		},
	}
	f := c.Flags()
	f.Float64Var(&usd, "usd", 0, "dollar ceiling; 0 = none")
	f.Int64Var(&tokens, "tokens", 0, "token ceiling (all kinds); 0 = none")
	f.BoolVar(&jsonOut, "json", false, "print the loop, its tree usage and the resumed loops as JSON")
	return c
}

// checkUSD refuses a dollar amount a flag cannot mean: negative, NaN or
// infinite (which no request could carry: JSON has no Inf).
func checkUSD(flag string, v float64, zero string) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return &UsageError{fmt.Errorf("%s: must be a finite number >= 0 (%s), got %g", flag, zero, v)}
	}
	return nil
}
