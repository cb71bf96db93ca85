package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
)

// Git work after an iteration.
//
// Committing what the agent left and merging a passed loop's branch can
// take long (a huge file, a slow file system), so it runs on the
// iteration's own goroutine, never on the manager's: scheduling, cancels
// and shutdown go on meanwhile. Every git command has a deadline:
// gitWorkTimeout normally, stopGitTimeout once the daemon is stopping, so
// a stop never waits on git for long.

const (
	gitWorkTimeout = 10 * time.Minute
	stopGitTimeout = 20 * time.Second
)

// saved is the outcome of the git work after one iteration.
type saved struct {
	err      error // the work could not be put on the loop's branch
	mergeErr error // the branch could not be merged into the plan branch (passed only)
	// unchanged: the iteration passed but the loop's branch holds no
	// commit past the base it was made from (require_changes: no pass).
	unchanged bool
}

// save commits the agent's work onto the loop's branch (repairing what
// gitflow.SaveWork can), pushes it to git.remote when set, and, when the
// iteration passed, merges the branch into its plan's branch (on the
// remote, under the lock the workers share). The fence is checked before
// every push and before the plan branch moves.
func (m *Manager) save(ctx context.Context, a *active, job runner.Job, res runner.Result) saved {
	l := job.Loop
	if m.o.Git == nil || !ownBranch(l.Type) || job.Workdir == "" {
		return saved{}
	}
	timeout := gitWorkTimeout
	m.mu.Lock()
	if a.stopping {
		timeout = stopGitTimeout
	}
	m.mu.Unlock()
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	msg := gitflow.CommitMessage(l.Type, l.Title, a.iteration)
	branch, err := m.o.Git.Branch(gctx, l.ID, l.Title)
	if err != nil {
		return saved{err: err}
	}
	if _, err := m.o.Git.SaveWork(gctx, job.Workdir, branch, msg); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("git gave no answer within %s: %w", timeout, err)
		}
		return saved{err: err}
	}
	fence := m.fenceFor(l.ID, a.iteration)
	if m.o.Git.Remote != "" {
		// The next iteration may run on another machine: it continues
		// from the remote's branch. A worker fenced out pushes nothing,
		// and a push whose lease on the branch is stale (another worker
		// pushed since this iteration began) is refused.
		err := fence(gctx)
		if err == nil {
			err = m.o.Git.PushBranch(gctx, branch, a.synced)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("git gave no answer within %s: %w", timeout, err)
			}
			return saved{err: err}
		}
	}
	if res.Outcome != runner.Passed {
		return saved{}
	}
	root, err := m.root(l)
	if err != nil {
		return saved{mergeErr: err}
	}
	base := "HEAD" // as worktree() made the branch
	into := ""
	if root.Type == loop.Plan {
		if into, err = m.o.Git.Branch(gctx, root.ID, root.Title); err != nil {
			return saved{mergeErr: err}
		}
		base = into
	}
	if m.cfg().Loop(l.Type).RequireChanges {
		n, err := m.o.Git.Ahead(gctx, branch, base)
		if err != nil {
			m.log.Warn("require_changes: count the loop's commits", "loop", l.ID, "err", err)
		} else if n == 0 {
			return saved{unchanged: true} // nothing to merge either
		}
	}
	if root.Type == loop.Plan && root.ID != l.ID {
		err = m.o.Git.MergeWith(gctx, branch, into, gitflow.MergeOptions{Fence: fence})
		if err == nil && m.o.Git.Remote != "" {
			// Merged: the remote's copy of the branch is done with (the
			// local one goes when the completion is recorded). Here, not
			// there: that runs on the manager's goroutine, and this
			// talks to the remote.
			if err := m.o.Git.DeleteRemoteBranch(gctx, branch); err != nil {
				m.log.Warn("delete the merged branch on the remote", "loop", l.ID, "branch", branch, "err", err)
			}
		}
	}
	return saved{mergeErr: err}
}

// fenceFor is Options.Fence for one iteration, for the git steps: nil error
// while the iteration's lease is still this process's.
func (m *Manager) fenceFor(id string, iteration int) func(context.Context) error {
	return func(ctx context.Context) error {
		if m.o.Fence == nil {
			return nil
		}
		return m.o.Fence(ctx, id, iteration)
	}
}
