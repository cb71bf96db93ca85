package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// maxNamed is how many affected loops an action names before it says
// "and N more".
const maxNamed = 20

func (e *env) actionCmds() []*cobra.Command {
	type spec struct {
		action, use, short string
		reason, feedback   bool
	}
	specs := []spec{
		{api.ActionCancel, "cancel ID", "Cancel a loop and all its descendants", true, false},
		{api.ActionReset, "reset ID", "Bring a failed (parked) loop back to pending with a fresh budget", false, false},
		{api.ActionPause, "pause ID", "Hold a pending loop; a running loop's agent is stopped first (the iteration is not spent)", false, false},
		{api.ActionResume, "resume ID", "Release a paused loop", false, false},
		{api.ActionApprove, "approve ID", "Approve a plan awaiting approval (its specs start) or a task awaiting review (it goes to the merge queue)", false, false},
		{api.ActionReject, "reject ID [--reason S]", "Reject a plan awaiting approval or a task awaiting review: it fails", true, false},
		{api.ActionIterate, "iterate ID --feedback S", "Send a plan awaiting approval or a task awaiting review back with feedback", false, true},
	}
	var cmds []*cobra.Command
	for _, s := range specs {
		var req api.ActionRequest
		var jsonOut bool
		c := &cobra.Command{
			Use:               s.use,
			Short:             s.short,
			Long:              s.short + ".\n\nID is a loop id, a unique prefix of one (at least 4 characters), or its short id (the end of the id, as list and branch names show it).",
			Args:              cobra.ExactArgs(1),
			ValidArgsFunction: e.completeLoopIDs,
			RunE: func(cmd *cobra.Command, args []string) error {
				return e.withBackend(func(b Backend) error {
					ctx := cmd.Context()
					id, err := resolveID(ctx, b, args[0])
					if err != nil {
						return err
					}
					res, err := b.Act(ctx, id, s.action, req)
					if err != nil {
						return err
					}
					if jsonOut {
						return writeJSON(e.stdout, res)
					}
					e.printAction(ctx, b, s.action, res)
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

// printAction says what an action did: the loop's new status and, by
// title, every loop it created or changed (beyond maxNamed, how many more).
func (e *env) printAction(ctx context.Context, b Backend, action string, res api.ActionResult) {
	l := res.Loop
	var others []string
	for _, id := range res.Affected {
		if id != l.ID {
			others = append(others, id)
		}
	}
	name := fmt.Sprintf("%s %s %q", l.Type, loop.ShortID(l.ID), oneLine(l.Title, 60))
	switch {
	case action == api.ActionCancel && l.Status != loop.Cancelled:
		// A finished loop keeps its status; what ran below it stopped.
		fmt.Fprintf(e.stdout, "cancel %s: stays %s; cancelled %s below it:\n", name, l.Status, count(len(others), "loop"))
	case action == api.ActionCancel && len(others) > 0:
		fmt.Fprintf(e.stdout, "cancelled %s and %s below it:\n", name, count(len(others), "loop"))
	case action == api.ActionPause && l.Status == loop.Running:
		fmt.Fprintf(e.stdout, "pausing %s: its agent is being stopped; the loop is paused at iteration %d when it has\n", name, l.Iteration)
	case action == api.ActionApprove:
		fmt.Fprintf(e.stdout, "approved %s: now %s\n", name, l.Status)
		if len(others) > 0 {
			fmt.Fprintf(e.stdout, "created %s:\n", count(len(others), "loop"))
		}
	default:
		fmt.Fprintf(e.stdout, "%s %s: now %s\n", action, name, l.Status)
		if len(others) > 0 {
			fmt.Fprintf(e.stdout, "also changed %s:\n", count(len(others), "other loop"))
		}
	}
	named := others[:min(len(others), maxNamed)]
	w := table(e.stdout)
	for _, id := range named {
		o, err := b.Get(ctx, id)
		if err != nil {
			fmt.Fprintf(w, "  %s\t\t(%v)\n", loop.ShortID(id), err)
			continue
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", loop.ShortID(o.ID), o.Type, o.Status, oneLine(o.Title, 60))
	}
	w.Flush()
	if more := len(others) - len(named); more > 0 {
		fmt.Fprintf(e.stdout, "  and %d more\n", more)
	}
}

// count is "1 loop", "3 loops".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, strings.TrimSuffix(noun, "s"))
}
