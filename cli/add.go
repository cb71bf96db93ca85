package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) planCmd() *cobra.Command {
	var (
		jsonOut, noStart bool
		req              = api.CreateRequest{Type: loop.Plan}
	)
	c := &cobra.Command{
		Use:   "plan TEXT... [--no-start]",
		Short: "Start a plan loop for a request (starts a daemon in the background if none runs)",
		Long: `Start a plan loop for a request: loopr plan "Add a timeout option", or
without quotes, loopr plan Add a timeout option (the words are joined with
single spaces; quote a request that holds characters your shell reads,
such as ? * ' " or a newline).

With no daemon running, plan starts one in the background and says so on
stderr; --no-start, or LOOPR_NO_START=1, only queues the loop. When
loops.plan.require_approval is on (the default), the plan waits for
` + "`loopr approve`" + ` once written: plan says so, and loopr status lists it.

With --review, every task of the plan's tree that passes waits for your
review (awaiting_review, listed under NEEDS YOU) instead of going to the
merge queue: ` + "`loopr diff ID`" + ` shows its work, ` + "`loopr approve ID`" + ` merges it,
` + "`loopr iterate ID --feedback`" + ` or ` + "`loopr comment ID PATH:LINE`" + ` sends it back,
` + "`loopr reject ID`" + ` fails it (loops.<type>.require_review does the same for
every loop of a type).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.Join(args, " ")
			if strings.TrimSpace(text) == "" {
				return &UsageError{fmt.Errorf("plan: the request text is empty")}
			}
			req.Task = text
			return e.create(cmd, req, jsonOut, noStart)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the created loop as JSON")
	c.Flags().BoolVar(&noStart, "no-start", false, "only queue the loop in the store: do not start a daemon when none runs")
	c.Flags().BoolVar(&req.Review, "review", false, "every task of this plan's tree waits for your review (loopr approve) before it merges")
	agentFlags(c, &req)
	return c
}

// agentFlags adds --agent, --budget-usd and --budget-tokens to a command
// that creates a loop.
func agentFlags(c *cobra.Command, req *api.CreateRequest) {
	f := c.Flags()
	f.StringVar(&req.Agent, "agent", "", "agent profile the loop (and the loops it spawns) runs on: default or a name under agents: in loopr.yml")
	f.Float64Var(&req.Budget.USD, "budget-usd", 0, "dollars the loop may spend (a root's covers its whole tree); 0 = loopr.yml's budget")
	f.Int64Var(&req.Budget.Tokens, "budget-tokens", 0, "tokens the loop may use (a root's covers its whole tree); 0 = loopr.yml's budget")
}

func (e *env) addCmd() *cobra.Command {
	var (
		req        api.CreateRequest
		at, in, dl string
		file       string
		after      []string
		jsonOut    bool
		noStart    bool
	)
	c := &cobra.Command{
		Use:   "add --type T [--parent ID] [--after ID,...] [--task TEXT] [--title S] [--fanout N [--agents A,B]] | add --file LOOPS.yaml",
		Short: "Add a loop of any type, or the loops listed in a file (starts a daemon if none runs)",
		Long: `Add one loop, or with --file every loop of a YAML list of create requests:

  - {type: ralph, task: "Fix the flaky login test", owner: alice}
  - type: review
    title: Review the API
    in: 10m                        # or runnable_at: 2026-01-25T12:00:00Z
    deadline: 2026-01-26T00:00:00Z

Item keys are the JSON fields of POST /v1/loops (type, parent, task, title,
max_iterations, runnable_at, deadline, fairness_key, conflict_key,
cost_hint, owner, agent, fanout) plus in, budget_usd and budget_tokens. Each item is created or refused on its own; one
line per item is printed. Exit 1 if any item was refused, 2 if the file
itself is invalid (nothing is created then).

With no daemon running, add starts one in the background (as
` + "`loopr daemon --detach`" + ` does) and says so on stderr; --no-start, or
LOOPR_NO_START=1 in the environment, only queues the loops in the store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file != "" {
				for _, f := range []string{"type", "parent", "after", "task", "title", "max-iterations", "at", "in", "deadline", "owner", "key", "conflict-key", "agent", "budget-usd", "budget-tokens", "fanout", "agents"} {
					if cmd.Flags().Changed(f) {
						return &UsageError{fmt.Errorf("--file and --%s: the file gives every field of its loops", f)}
					}
				}
				err := e.addFile(cmd, file, jsonOut)
				e.startIfQueued(cmd.Context(), noStart)
				return err
			}
			var err error
			if at != "" && in != "" {
				return &UsageError{fmt.Errorf("--at and --in: give one, not both")}
			}
			if at != "" {
				if req.RunnableAt, err = parseTime("--at", at); err != nil {
					return err
				}
			}
			if in != "" {
				d, err := time.ParseDuration(in)
				if err != nil || d < 0 {
					return &UsageError{fmt.Errorf("--in: %q is not a duration like 10m or 1h30m", in)}
				}
				req.RunnableAt = e.now().UTC().Add(d)
			}
			if dl != "" {
				if req.Deadline, err = parseTime("--deadline", dl); err != nil {
					return err
				}
			}
			for _, a := range after {
				if a = strings.TrimSpace(a); a == "" {
					return &UsageError{fmt.Errorf("--after: an empty id (give loop ids, repeated or comma-separated)")}
				}
				req.DependsOn = append(req.DependsOn, a)
			}
			return e.create(cmd, req, jsonOut, noStart)
		},
	}
	f := c.Flags()
	f.StringVar(&req.Type, "type", "", "loop type: plan, spec, phase, ralph or a type from loopr.yml")
	f.StringVar(&req.Parent, "parent", "", "parent loop id (or a unique prefix of one, or its short id)")
	f.StringSliceVar(&after, "after", nil, "start only once these loops (ids, unique prefixes or short ids; repeat or comma-separate) and every loop below them are complete or cancelled")
	f.StringVar(&req.Task, "task", "", "what the loop works on")
	f.StringVar(&req.Title, "title", "", "short display name (default: the task's first line)")
	f.IntVar(&req.MaxIterations, "max-iterations", 0, "iteration budget (default from loopr.yml)")
	f.StringVar(&at, "at", "", "not runnable before this RFC 3339 time")
	f.StringVar(&in, "in", "", "not runnable before this long from now (e.g. 10m)")
	f.StringVar(&dl, "deadline", "", "expire if still pending at this RFC 3339 time")
	f.StringVar(&req.Owner, "owner", "", "owner, for quotas")
	f.StringVar(&req.FairnessKey, "key", "", "fairness key (default: the root plan)")
	f.StringVar(&req.ConflictKey, "conflict-key", "", "resource the loop must hold exclusively within its conflict group")
	f.StringVar(&file, "file", "", "create the loops of a YAML list of create requests (see below)")
	f.BoolVar(&jsonOut, "json", false, "print the created loop as JSON (with --file: the result of each item)")
	f.BoolVar(&noStart, "no-start", false, "only queue in the store: do not start a daemon when none runs")
	f.IntVar(&req.Fanout, "fanout", 0, "best-of-N: run the task as N candidates in parallel worktrees, of which only the winner merges (loops.<type>.fanout_pick); 0 = loops.<type>.fanout")
	f.StringSliceVar(&req.Agents, "agents", nil, "the candidates' agent profiles, in turn (comma-separated); without --fanout, one candidate per profile")
	c.RegisterFlagCompletionFunc("parent", e.completeFlagIDs)
	c.RegisterFlagCompletionFunc("after", e.completeFlagIDs)
	c.RegisterFlagCompletionFunc("type", e.completeTypes)
	agentFlags(c, &req)
	return c
}

func (e *env) create(cmd *cobra.Command, req api.CreateRequest, jsonOut, noStart bool) error {
	if err := checkUSD("--budget-usd", req.Budget.USD, "0 = loopr.yml's budget"); err != nil {
		return err
	}
	defer e.startIfQueued(cmd.Context(), noStart)
	return e.withBackend(func(b Backend) error {
		if req.Parent != "" {
			id, err := resolveID(cmd.Context(), b, req.Parent)
			if err != nil {
				return fmt.Errorf("--parent: %w", err)
			}
			req.Parent = id
		}
		for i, ref := range req.DependsOn {
			id, err := resolveID(cmd.Context(), b, ref)
			if err != nil {
				if notFound(err) {
					return &UsageError{fmt.Errorf("--after: no loop %s (see loopr list)", ref)}
				}
				return fmt.Errorf("--after: %w", err)
			}
			req.DependsOn[i] = id
		}
		l, err := b.Create(cmd.Context(), req)
		if err != nil {
			return err
		}
		_, e.queued = b.(*local)
		if l.Parent == "" {
			e.warnUncommitted()
		}
		e.warnUntrusted()
		if jsonOut {
			return writeJSON(e.stdout, l)
		}
		ref := loop.ShortID(l.ID)
		fmt.Fprintf(e.stdout, "created %s %s %q\n", l.Type, ref, l.Title)
		if f := l.Fanout; f != nil {
			fmt.Fprintf(e.stdout, "best-of-%d: %d candidates of group %s (loopr list shows them; loopr events %s says how many started and why)\n", f.Of, f.Of, ref, ref)
		}
		if l.Type == loop.Plan && e.cfg != nil && e.cfg.Loop(loop.Plan).RequireApproval {
			fmt.Fprintf(e.stdout, "once written, the plan waits for your approval: loopr approve %s\n", ref)
			fmt.Fprintln(e.stdout, "(loopr status lists it then; loops.plan.require_approval: false skips the wait)")
		}
		return nil
	})
}
