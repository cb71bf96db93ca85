// Package landing lands a plan: `loopr land PLAN` merges the plan branch
// into the branch the plan started from — a fast forward when it can,
// else a merge commit — after merge.validate passed on the result, and
// never touches uncommitted work (gitflow.PrepareLand, MoveBase).
//
// It runs in the daemon (POST /v1/loops/{id}/land), where it holds the
// merge queue's locks on the plan branch (gitflow.Integrate), so no task
// lands on the plan branch while it is being landed; without a daemon the
// CLI runs it in its own process, where no merge queue runs.
//
//	Land: read the plan → lock the plan branch, then the base branch →
//	  PrepareLand (ff, merge or up to date; conflicts; the checkout's
//	  uncommitted changes) → refuse, or (dry run) say → merge.validate in a
//	  temporary worktree of the result → MoveBase → record Landed and a
//	  `landed` event on the plan
package landing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/mergequeue"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/sandbox"
	"github.com/loopr-dev/loopr/store"
)

// Lander lands plans of one workspace.
type Lander struct {
	Svc    *control.Service
	Git    *gitflow.Repo  // nil: no git flow, nothing to land
	Runner *runner.Runner // runs merge.validate
	Log    *slog.Logger   // nil: discard
}

// maxNamed is how many files a refusal names.
const maxNamed = 5

// Land lands the plan id (a full id) as req says. A refusal — the tree not
// done, a conflict, uncommitted changes in the way — is a
// *control.InputError of one line, and nothing moved.
func (ld *Lander) Land(ctx context.Context, id string, req api.LandRequest) (api.LandResult, error) {
	if err := ld.Svc.ErrUntrusted(); err != nil {
		return api.LandResult{}, err // merge.validate is the file's
	}
	if ld.Git == nil {
		return api.LandResult{}, &control.InputError{Msg: "land: no git flow in this workspace (git.worktrees is off, or it is not a git repository): nothing to land"}
	}
	plan, err := ld.Svc.Get(id)
	if err != nil {
		return api.LandResult{}, err
	}
	if plan.Type != loop.Plan || plan.Parent != "" {
		return api.LandResult{}, refuse("%s is a %s; land takes a plan (the root of a tree)", plan.ID, plan.Type)
	}
	if !req.Partial && (plan.Status != loop.Complete || plan.SubtreeDoneAt.IsZero()) {
		return api.LandResult{}, refuse("plan %s is not done (%s, its tree not complete): wait for it, or land what is there with --partial", loop.ShortID(plan.ID), plan.Status)
	}
	branch := plan.Branch
	if branch == "" {
		if branch, err = ld.Git.Branch(ctx, plan.ID, plan.Title); err != nil {
			return api.LandResult{}, err
		}
	}
	into := req.Into
	if into == "" {
		into = plan.Base.Branch
	}
	if into == "" {
		return api.LandResult{}, refuse("plan %s has no base branch recorded (it started on a detached HEAD): give --into BRANCH", loop.ShortID(plan.ID))
	}
	if into == branch {
		return api.LandResult{}, refuse("--into %s: that is the plan branch itself", into)
	}
	if ok, err := ld.Git.HasBranch(ctx, into); errors.Is(err, gitflow.ErrInvalidID) {
		return api.LandResult{}, refuse("cannot land on %s: %v; merge the plan branch yourself (git merge %s), or give --into BRANCH", into, err, branch)
	} else if err != nil {
		return api.LandResult{}, err
	} else if !ok {
		return api.LandResult{}, refuse("no branch %s to land on (give --into BRANCH)", into)
	}
	var res api.LandResult
	// The plan branch's merge locks (the merge queue's), then the base
	// branch's: no task lands on the plan branch, and no other landing
	// moves the base branch, meanwhile.
	err = ld.Git.Integrate(ctx, branch, func(*gitflow.Integration) error {
		return ld.Git.Integrate(ctx, into, func(*gitflow.Integration) error {
			res, err = ld.land(ctx, plan, branch, into, req)
			return err
		})
	})
	return res, err
}

// refuse is a refusal: the user's to fix, one line.
func refuse(format string, args ...any) error {
	return &control.InputError{Msg: fmt.Sprintf(format, args...)}
}

// land is Land under the locks.
func (ld *Lander) land(ctx context.Context, plan loop.Loop, branch, into string, req api.LandRequest) (api.LandResult, error) {
	from, err := ld.Git.LandFrom(ctx, branch)
	if err != nil {
		return api.LandResult{}, err
	}
	msg := fmt.Sprintf("loopr: land %s into %s\n\nPlan %s: %s", branch, into, plan.ID, oneLine(plan.Title))
	l, err := ld.Git.PrepareLand(ctx, branch, from, into, msg, req.DryRun)
	if err != nil {
		return api.LandResult{}, fmt.Errorf("land %s into %s: %w", branch, into, err)
	}
	res := api.LandResult{Plan: plan.ID, Branch: branch, Into: into, Mode: l.Mode, From: l.From, Onto: l.Onto, Result: l.Result,
		Commits: orEmpty(l.Commits), CommitCount: l.CommitCount, Files: orEmpty(l.Files), Checkout: l.Checkout, DryRun: req.DryRun}
	switch {
	case l.Busy != "":
		return res, refuse("%s: moving %s now would leave it unable to finish; finish it (--continue or --abort), then land again (nothing moved)", l.Busy, into)
	case len(l.Conflicts) > 0:
		return res, refuse("%s moved since the plan started and conflicts with %s in %s: merge %s into %s yourself, then land again (nothing moved)",
			into, branch, named(l.Conflicts), into, branch)
	case len(l.Touched) > 0:
		return res, refuse("your checkout of %s (%s) has uncommitted changes to %s, which the landing changes: commit or `git stash` them, then land again (nothing moved)",
			into, l.Checkout, named(l.Touched))
	case l.Mode == loop.LandUpToDate:
		res.Steps = append(res.Steps, fmt.Sprintf("%s already holds %s (%s): nothing to merge", into, branch, loop.ShortCommit(l.From)))
		if !req.DryRun && (plan.Landed.At.IsZero() || plan.ReadyToLand()) { // merged by hand: status stops listing it
			return res, ld.record(plan, l)
		}
		return res, nil
	case req.DryRun:
		res.Steps = append(res.Steps, dryStep(l, len(ld.Svc.Config().Merge.Validate))...)
		return res, nil
	}
	cfg := ld.Svc.Config()
	if cmds := cfg.Merge.Validate; len(cmds) > 0 {
		res.Steps = append(res.Steps, fmt.Sprintf("merge.validate: %s on %s in a temporary worktree", count(len(cmds), "command"), loop.ShortCommit(l.Result)))
		ev, err := ld.validate(ctx, plan, l, cmds)
		res.Evidence = ev
		if err != nil {
			return res, err
		}
		res.Steps = append(res.Steps, "merge.validate passed")
	}
	if err := ld.Git.MoveBase(ctx, l); err != nil {
		if errors.Is(err, gitflow.ErrLandMoved) {
			return res, refuse("%s moved while the landing was validated: land again", into)
		}
		return res, fmt.Errorf("land %s into %s: %w", branch, into, err)
	}
	how := "fast-forward"
	if l.Mode == loop.LandMerge {
		how = "a merge commit"
	}
	where := "the ref moved: " + into + " is checked out nowhere"
	if l.Checkout != "" {
		where = "in the checkout " + l.Checkout
	}
	res.Steps = append(res.Steps, fmt.Sprintf("%s: %s → %s (%s, %s)", into, loop.ShortCommit(l.Onto), loop.ShortCommit(l.Result), how, where))
	return res, ld.record(plan, l)
}

// dryStep says what a landing would do: what, then where.
func dryStep(l gitflow.Landing, validate int) []string {
	how := "fast-forward"
	if l.Mode == loop.LandMerge {
		how = "merge commit (" + l.Into + " moved since the plan started)"
	}
	steps := []string{fmt.Sprintf("would land %s on %s: %s, %s, %s", l.Branch, l.Into, how, count(l.CommitCount, "commit"), count(len(l.Files), "file"))}
	if validate > 0 {
		steps = append(steps, fmt.Sprintf("would run merge.validate (%s) on the result first", count(validate, "command")))
	}
	where := "would move the ref: " + l.Into + " is checked out nowhere"
	if l.Checkout != "" {
		where = "would update the checkout " + l.Checkout
		if n := len(l.Dirty); n > 0 {
			where += fmt.Sprintf(" (%s there, which the landing does not touch)", count(n, "uncommitted file"))
		}
	}
	return append(steps, where)
}

// count is "1 file", "2 files".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// validate runs merge.validate on the landing's result in a temporary
// detached worktree, removed after.
func (ld *Lander) validate(ctx context.Context, plan loop.Loop, l gitflow.Landing, cmds []string) ([]loop.Evidence, error) {
	name := "land-" + loop.ShortID(plan.ID)
	dir, err := ld.Git.AddDetachedWorktree(ctx, name, l.Result)
	if err != nil {
		return nil, fmt.Errorf("land: a worktree to validate in: %w", err)
	}
	defer func() {
		if err := ld.Git.RemoveWorktree(context.WithoutCancel(ctx), name, ""); err != nil {
			ld.logger().Warn("land: remove the validation worktree", "dir", dir, "err", err)
		}
	}()
	var out mergequeue.Tail
	// The default profile's environment, as the merge queue's
	// merge.validate: the allowlist and env:, no agent's secret.
	cfg := ld.Svc.Config()
	env := procenv.Set(procenv.Of(cfg.Agent, config.DefaultProfile, ld.Svc.Paths.Workspace).Commands(os.Environ()),
		"LOOPR_MERGE_INTO="+l.Into, "LOOPR_MERGE_COMMIT="+l.Result, "LOOPR_MERGE_BRANCHES="+l.Branch)
	// It runs the plan's agents' code: in the default profile's sandbox,
	// as the merge queue's merge.validate.
	s := runner.Settings{Sandbox: sandbox.PolicyOf(cfg.Agent, ld.Svc.Paths.Workspace, ld.Svc.Paths.Config, ld.Svc.Paths.Home), Preset: cfg.Agent.Preset}
	wrap, end, err := ld.Runner.CheckSandbox(s, plan, dir, env)
	if err != nil {
		return nil, fmt.Errorf("land: merge.validate: %w", err)
	}
	defer end()
	ev, f := ld.Runner.RunChecks(ctx, runner.Check{
		Commands: cmds, Dir: dir, Env: env, Log: &out, Where: loop.WhereMerge, Commit: l.Result,
		Name: "land", Home: ld.Git.Home, Worktree: dir, Wrap: wrap,
	})
	switch {
	case f != nil && f.Cancelled:
		return ev, fmt.Errorf("land: merge.validate: %w", context.Cause(ctx))
	case f != nil:
		return ev, fmt.Errorf("land: %s on the result (nothing moved); its output ends:\n%s", f.Reason, out.String())
	}
	return ev, nil
}

// record writes the landing on the plan and a `landed` event, in one
// transaction.
func (ld *Lander) record(plan loop.Loop, l gitflow.Landing) error {
	now := ld.Svc.Now()
	return ld.Svc.Store.Update(func(tx *store.Tx) error {
		p, err := tx.Get(plan.ID)
		if err != nil {
			return err
		}
		p.Landed = loop.Landed{Into: l.Into, Commit: l.Result, Mode: l.Mode, From: l.From, At: now}
		p.UpdatedAt = now
		if err := tx.Put(p); err != nil {
			return err
		}
		msg := fmt.Sprintf("landed %s on %s: %s, %s → %s", l.Branch, l.Into, l.Mode, loop.ShortCommit(l.Onto), loop.ShortCommit(l.Result))
		_, err = tx.AppendEvent(loop.Event{Time: now, Loop: p.ID, Kind: loop.EventLanded, Iteration: p.Iteration, Message: msg})
		return err
	})
}

func (ld *Lander) logger() *slog.Logger {
	if ld.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return ld.Log
}

// named lists files for a one-line message: the first maxNamed, and how
// many more.
func named(files []string) string {
	if len(files) <= maxNamed {
		return strings.Join(files, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(files[:maxNamed], ", "), len(files)-maxNamed)
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
