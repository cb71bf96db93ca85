package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/hooks"
	"github.com/loopr-dev/loopr/internal/contain"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/mergequeue"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// Lifecycle hooks (package hooks runs them; this file decides when, and
// what a failure does). Every run is journaled in one line; its output is
// in iterations/<NNN>/hooks/<name>.log.
//
//   - after_create, after a new worktree was made and worktree.copy's
//     files copied in: block or suspend remove the worktree again (the
//     next attempt makes it anew and runs the hook again), and act as
//     before_run's.
//   - before_run, before each iteration's agent: block starts no agent
//     and spends no iteration: the loop waits (pending, the backoff of a
//     setup failure, growing with each failure in a row) with the hook's
//     failure as the reason its backoff gate shows, then tries again;
//     suspend puts it in needs_human (hook), and `loopr answer` runs the
//     same iteration again.
//   - after_run, after each iteration that ran (agent, validation,
//     commit): block fails the iteration (a pass becomes a failure, with
//     the hook's output as feedback); suspend puts the loop in
//     needs_human (hook) without recording the pass.
//   - before_merge, in the merge worktree on the merged result, after
//     merge.validate: block refuses the merge as a failing merge.validate
//     does (the task goes back with the hook's output, at the cost of an
//     iteration); suspend puts the task in needs_human (hook).
//   - after_merge (a task landed) and before_remove (its worktree is about
//     to go) come after the fact: nothing to undo, so block and suspend
//     only journal, except that a failing before_remove with block or
//     suspend keeps the worktree.
//
// warn always journals the failure and goes on.

// hookError is a hook that stopped a step (on_error block or suspend).
type hookError struct{ res hooks.Result }

func (e *hookError) Error() string { return e.res.Summary() }

// hookOutcome marks a result a hook decided (hookError).
const hookOutcome runner.Outcome = "hook"

// jail returns what contains the agents' processes, for the hooks'.
func (m *Manager) jail() *contain.Jail {
	if r, ok := m.o.Runner.(*runner.Runner); ok {
		return r.Jail
	}
	return nil
}

// runHook runs hook name of l's type, when it has commands, in dir with
// its output under l's iteration directory, and journals it. ok is false
// when there is no such hook. worktree is LOOPR_WORKTREE.
func (m *Manager) runHook(ctx context.Context, l loop.Loop, name, dir, worktree string) (res hooks.Result, ok bool) {
	h, set := m.cfg().HooksFor(l.Type)[name]
	if !set || len(h.Run) == 0 {
		return res, false
	}
	if why := m.svc.Untrusted(); why != "" {
		m.journal(l, "hook "+name+" not run: "+why)
		return res, false
	}
	env := hooks.Env{Home: m.svc.Paths.Home, Loop: l.ID, Worktree: worktree, Branch: l.Branch, PlanBranch: m.planBranch(ctx, l)}
	res = hooks.Run(ctx, hooks.Spec{
		Name: name, Hook: h, Dir: dir, Env: env, Base: m.commandEnv(l), Jail: m.jail(), Redact: m.o.Redact,
		Log: filepath.Join(runner.IterationDir(m.svc.Paths.Home, l.ID, l.Iteration), "hooks", name+".log"),
	})
	msg := res.Summary()
	if res.Failed() {
		msg += fmt.Sprintf("; on_error %s; log %s", h.OnError, res.Log)
		m.log.Warn("hook failed", "loop", l.ID, "hook", name, "on_error", h.OnError, "err", res.Err)
	}
	m.journal(l, msg)
	return res, true
}

// commandEnv is the environment l's hooks start from: its profile's
// allowlist and env:, without the agent's own variables and secrets
// (procenv.Profile.Commands).
func (m *Manager) commandEnv(l loop.Loop) []string {
	c := m.cfg()
	name := c.ProfileOf(&l)
	ag, _ := c.Profile(name)
	return procenv.Of(ag, name, m.svc.Paths.Workspace).Commands(os.Environ())
}

// stops reports whether res is a failure that stops its step.
func stops(res hooks.Result) bool {
	return res.Failed() && res.OnError != config.OnErrorWarn
}

// journal appends one iteration event about l.
func (m *Manager) journal(l loop.Loop, msg string) {
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		_, err := tx.AppendEvent(loop.Event{Time: m.now(), Loop: l.ID, Kind: loop.EventIteration, Iteration: l.Iteration, Message: msg})
		return err
	})
	if err != nil {
		m.log.Warn("journal", "loop", l.ID, "msg", msg, "err", err)
	}
}

// planBranch names the branch of l's root plan, "" when it has none.
func (m *Manager) planBranch(ctx context.Context, l loop.Loop) string {
	if m.o.Git == nil {
		return ""
	}
	root, err := m.root(l)
	if err != nil || root.Type != loop.Plan {
		return ""
	}
	b, err := m.o.Git.Branch(ctx, root.ID, root.Title)
	if err != nil {
		return ""
	}
	return b
}

// newWorktree readies a worktree just made for l: worktree.copy's files,
// then after_create. A stopping after_create removes the worktree again
// (keeping the branch) and returns a *hookError.
func (m *Manager) newWorktree(ctx context.Context, l loop.Loop, dir string) error {
	if list := m.cfg().Worktree.Copy; len(list) > 0 {
		rep := hooks.Copy(m.svc.Paths.Workspace, dir, list)
		if s := rep.String(); s != "" {
			m.journal(l, s)
		}
	}
	res, ok := m.runHook(ctx, l, config.AfterCreate, dir, dir)
	if ctx.Err() != nil {
		return fmt.Errorf("after_create: %w", context.Cause(ctx))
	}
	if !ok || !stops(res) {
		return nil
	}
	if err := m.o.Git.RemoveWorktree(context.WithoutCancel(ctx), l.ID, ""); err != nil {
		m.log.Warn("remove the worktree after_create refused", "loop", l.ID, "err", err)
	}
	return &hookError{res: res}
}

// beforeRun runs before_run for job: a *hookError when it stops the
// iteration, the context's error when the iteration was cancelled.
func (m *Manager) beforeRun(ctx context.Context, job runner.Job) error {
	res, ok := m.runHook(ctx, job.Loop, config.BeforeRun, job.Workdir, m.worktreeOf(job))
	if ctx.Err() != nil {
		return fmt.Errorf("before_run: %w", context.Cause(ctx))
	}
	if ok && stops(res) {
		return &hookError{res: res}
	}
	return nil
}

// afterRun runs after_run once an iteration ran; it returns the hook's
// result when it stops the step.
func (m *Manager) afterRun(ctx context.Context, job runner.Job, res runner.Result) *hooks.Result {
	if res.Outcome == runner.Cancelled || ctx.Err() != nil {
		return nil
	}
	hr, ok := m.runHook(ctx, job.Loop, config.AfterRun, job.Workdir, m.worktreeOf(job))
	if !ok || !stops(hr) || ctx.Err() != nil {
		return nil
	}
	return &hr
}

// worktreeOf is LOOPR_WORKTREE for job: its worktree, "" in the workspace.
func (m *Manager) worktreeOf(job runner.Job) string {
	if job.Workdir == m.svc.Paths.Workspace {
		return ""
	}
	return job.Workdir
}

// afterRunFailed applies a stopping after_run (block) to an iteration's
// result: a pass fails, a failure says so too.
func afterRunFailed(res runner.Result, h hooks.Result) runner.Result {
	why := h.Summary()
	fb := "The after_run hook failed after your iteration: " + why + "\nEnd of its output:\n" + h.Tail
	switch res.Outcome {
	case runner.Passed:
		return runner.Result{Outcome: runner.Failed, Reason: why, Feedback: fb, Usage: res.Usage,
			AgentStart: res.AgentStart, AgentEnd: res.AgentEnd, Evidence: res.Evidence}
	case runner.Failed:
		res.Reason += "; " + why
		res.Feedback += "\n" + fb
	}
	return res
}

// hookStopped records a step a hook stopped at iteration: suspend puts the
// loop in needs_human (hook); block requeues it at the same iteration
// after a backoff that grows with each such failure in a row, the hook's
// failure being the reason its backoff gate shows.
func (m *Manager) hookStopped(id string, iteration int, h hooks.Result, now time.Time) error {
	detail := h.Summary() + "\nlog: " + h.Log + "\nEnd of its output:\n" + h.Tail
	if h.OnError == config.OnErrorSuspend {
		return m.update(id, func(tx *store.Tx) error {
			cur, err := m.ours(tx, id, iteration)
			if err != nil {
				return err
			}
			return m.toNeeds(tx, cur, loop.NeedsHook, detail, "", now)
		})
	}
	n := m.setupFails[id] + 1
	m.setupFails[id] = n
	delay := max(m.cfg().Retry.Delay(n), m.cfg().PollInterval())
	why := clipLine(h.Summary(), 300)
	msg := fmt.Sprintf("%s (%d in a row): no agent started, no iteration spent; retry in %s", why, n, delay)
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		return control.Move(tx, cur, loop.Pending, now, msg, func(l *loop.Loop) {
			l.RunnableAt = now.Add(delay)
			l.Reason = why // starts with loop.HookHold: the backoff gate shows it
		})
	})
}

// hookResultOf returns the hook that decided r, if one did.
func hookResultOf(r result) *hooks.Result {
	var he *hookError
	if errors.As(r.err, &he) {
		return &he.res
	}
	return r.hook
}

// beforeMerge is the merge queue's Plan.Before: the before_merge hook of
// every merged item's loop, in dir (the merge worktree, on the merged
// result), until one refuses.
func (m *Manager) beforeMerge(ctx context.Context, dir string, merged []mergequeue.Item) *mergequeue.Refusal {
	for _, it := range merged {
		l, err := m.svc.Get(it.ID)
		if err != nil {
			continue // gone: the fence finds it
		}
		res, ok := m.runHook(ctx, l, config.BeforeMerge, dir, l.Workdir)
		if ok && stops(res) && ctx.Err() == nil {
			return &mergequeue.Refusal{Reason: res.Summary(), Output: res.Tail, Suspend: res.OnError == config.OnErrorSuspend}
		}
	}
	return nil
}

// beforeRemove runs before_remove in l's worktree, when it is there; it
// reports whether the worktree may go.
func (m *Manager) beforeRemove(ctx context.Context, l loop.Loop) bool {
	dir, err := m.o.Git.WorktreePath(l.ID)
	if err != nil {
		return true
	}
	if _, err := os.Stat(dir); err != nil {
		return true
	}
	res, ok := m.runHook(ctx, l, config.BeforeRemove, dir, dir)
	if ok && stops(res) {
		m.journal(l, "the worktree is kept: before_remove failed with on_error "+res.OnError+" ("+dir+")")
		return false
	}
	return true
}

// hookRefused reports whether a merge attempt was refused by a hook
// rather than merge.validate.
func hookRefused(a *mergequeue.Attempt) bool {
	return a != nil && strings.HasPrefix(a.Reason, loop.HookHold)
}
