package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// Fresh bases (merge.refresh).
//
// Before each iteration of a loop with its own branch in a plan's tree, the
// plan branch's current tip is brought into the loop's branch, so a retry
// (after a failure, `loopr answer`, `reset` or `iterate`: they all start
// here) builds on what other loops have merged since. It runs in prepare,
// on the iteration's goroutine, like the rest of the git work. A conflict
// is the loop's agent's to resolve: it is left in the worktree, the prompt
// names the files, and the commit after the iteration concludes the merge.
// A refresh that fails otherwise is logged and journaled; the iteration
// runs on the branch as it was.

// refreshed is what the refresh before an iteration did, for the prompt
// and the journal.
type refreshed struct {
	from string // the plan branch
	res  gitflow.Refreshed
	err  error
}

// refresh brings base's tip into branch, checked out in dir, unless
// merge.refresh is off.
func (m *Manager) refresh(ctx context.Context, l loop.Loop, dir, branch, base string) *refreshed {
	how := m.cfg().Merge.Refresh
	if how == config.RefreshOff || how == "" {
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, gitWorkTimeout)
	defer cancel()
	res, err := m.o.Git.Refresh(gctx, dir, branch, base, how)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("git gave no answer within %s: %w", gitWorkTimeout, err)
		}
		m.log.Warn("refresh the loop's branch", "loop", l.ID, "branch", branch, "from", base, "err", err)
	}
	return &refreshed{from: base, res: res, err: err}
}

// message is the journal line for what the refresh did; "" when it did
// nothing worth a line (the branch was up to date).
func (r *refreshed) message() string {
	if r == nil {
		return ""
	}
	var parts []string
	if r.res.Saved {
		parts = append(parts, "work left uncommitted in the worktree was committed first")
	}
	switch res := r.res; {
	case r.err != nil:
		parts = append(parts, "not refreshed from "+r.from+": "+r.err.Error()+"; the iteration runs on the branch as it was")
	case res.Pending:
		msg := "a merge from " + r.from + " is still in progress in the worktree"
		if len(res.Conflicts) > 0 {
			msg += ", conflicts left to resolve in " + strings.Join(res.Conflicts, ", ")
		}
		parts = append(parts, msg)
	case res.Base == "":
	case res.FellBack:
		parts = append(parts, fmt.Sprintf("refreshed from %s at %.12s: the rebase conflicted, so it was aborted and %s merged instead", r.from, res.Base, r.from))
	default:
		parts = append(parts, fmt.Sprintf("refreshed from %s at %.12s by %s", r.from, res.Base, res.How))
	}
	if r.err == nil && !r.res.Pending && len(r.res.Conflicts) > 0 {
		parts = append(parts, "conflicts in "+strings.Join(r.res.Conflicts, ", ")+" are left in the worktree for the agent to resolve")
	}
	return strings.Join(parts, "; ")
}

// apply gives the job what the agent must know: the files a merge from
// the plan branch left in conflict.
func (r *refreshed) apply(j *runner.Job) {
	if r == nil || len(r.res.Conflicts) == 0 {
		return
	}
	j.Refresh = runner.Refresh{From: r.from, Conflicts: r.res.Conflicts}
}

// journalRefresh writes what the refresh did into the loop's journal.
func (m *Manager) journalRefresh(l loop.Loop, r *refreshed) error {
	msg := r.message()
	if msg == "" {
		return nil
	}
	return m.svc.Store.Update(func(tx *store.Tx) error {
		_, err := tx.AppendEvent(loop.Event{Time: m.now(), Loop: l.ID, Kind: loop.EventIteration, Iteration: l.Iteration, Message: msg})
		return err
	})
}

// conflictFeedback is the feedback of a pass whose merge into the plan
// branch conflicted. With merge.refresh on, the next iteration starts with
// the plan branch merged in and the conflict left to resolve.
func conflictFeedback(ce *gitflow.ConflictError, how string) string {
	files := strings.Join(ce.Files, ", ")
	if how == config.RefreshOff || how == "" {
		return fmt.Sprintf("Your branch %s conflicts with %s in: %s. Rebase your change onto the current plan branch state and resolve the conflict.\n%s",
			ce.Branch, ce.Into, files, ce.Output)
	}
	return fmt.Sprintf("Your branch %s passed but conflicts with %s in: %s (other work landed there meanwhile). loopr merged %s into your branch for this iteration: resolve the conflicts it left, keeping both sides' work.\n%s",
		ce.Branch, ce.Into, files, ce.Into, ce.Output)
}
