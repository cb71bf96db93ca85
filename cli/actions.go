package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) actionCmds() []*cobra.Command {
	type spec struct {
		action, use, short string
		reason, feedback   bool
	}
	specs := []spec{
		{api.ActionCancel, "cancel ID", "Cancel a loop and all its descendants", true, false},
		{api.ActionReset, "reset ID", "Bring a failed (parked) loop back to pending with a fresh budget", false, false},
		{api.ActionPause, "pause ID", "Hold a pending loop", false, false},
		{api.ActionResume, "resume ID", "Release a paused loop", false, false},
		{api.ActionApprove, "approve ID", "Approve a plan awaiting approval: its specs start", false, false},
		{api.ActionReject, "reject ID [--reason S]", "Reject a plan awaiting approval", true, false},
		{api.ActionIterate, "iterate ID --feedback S", "Send a plan awaiting approval back with feedback", false, true},
	}
	var cmds []*cobra.Command
	for _, s := range specs {
		var req api.ActionRequest
		var jsonOut bool
		c := &cobra.Command{
			Use:   s.use,
			Short: s.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return e.withBackend(func(b Backend) error {
					res, err := b.Act(cmd.Context(), args[0], s.action, req)
					if err != nil {
						return err
					}
					if jsonOut {
						return writeJSON(e.stdout, res)
					}
					if s.action == api.ActionCancel && res.Loop.Status != loop.Cancelled {
						// A finished loop keeps its status; what ran below it stopped.
						fmt.Fprintf(e.stdout, "cancel %s: stays %s; cancelled %d loop(s) below it\n", res.Loop.ID, res.Loop.Status, len(res.Affected))
						return nil
					}
					fmt.Fprintf(e.stdout, "%s %s: now %s\n", s.action, res.Loop.ID, res.Loop.Status)
					if n := len(res.Affected); n > 0 {
						verb := "also changed"
						if s.action == api.ActionApprove {
							verb = "created"
						}
						others := n
						if len(res.Affected) > 0 && res.Affected[0] == res.Loop.ID {
							others--
						}
						if others > 0 {
							fmt.Fprintf(e.stdout, "%s %d other loop(s)\n", verb, others)
						}
					}
					return nil
				})
			},
		}
		if s.reason {
			c.Flags().StringVar(&req.Reason, "reason", "", "why (recorded on the loop)")
		}
		if s.feedback {
			c.Flags().StringVar(&req.Feedback, "feedback", "", "what the agent should change (required)")
		}
		c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
		cmds = append(cmds, c)
	}
	return cmds
}
