package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
)

// answerCmd is `loopr answer ID [TEXT]`: a loop that needs a person goes
// back to pending, with TEXT in its next prompt.
func (e *env) answerCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "answer ID [TEXT]",
		Short: "Answer a loop that needs you: it resumes with TEXT in its next prompt (TEXT - reads stdin)",
		Long: `Answer a loop that needs you (needs_human): it goes back to pending at the
same iteration, with TEXT in its next prompt; TEXT - reads it from stdin.

ID is a loop id or a unique prefix of one (at least 4 characters).`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var req api.ActionRequest
			if len(args) == 2 {
				req.Answer = args[1]
			}
			if req.Answer == "-" {
				b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), control.MaxAnswerBytes+1))
				if err != nil {
					return fmt.Errorf("answer: read stdin: %w", err)
				}
				req.Answer = string(b)
			}
			return e.withBackend(func(b Backend) error {
				id, err := resolveID(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				res, err := b.Act(cmd.Context(), id, api.ActionAnswer, req)
				if err != nil {
					return err
				}
				if jsonOut {
					return writeJSON(e.stdout, res)
				}
				l := res.Loop
				fmt.Fprintf(e.stdout, "answer %s: now %s at iteration %d/%d", l.ID, l.Status, l.Iteration, l.MaxIterations)
				if a := strings.TrimSpace(l.Answer); a != "" {
					fmt.Fprintf(e.stdout, "; its next prompt carries your answer (%d bytes)", len(a))
				}
				fmt.Fprintln(e.stdout)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}
