package loopmgr

import (
	"context"
	"os"

	"github.com/loopr-dev/loopr/loop"
)

// branchRec is the working directory worktree made and the branch to
// record on the loop: its own branch (ralph and user types) or its plan's
// integration branch (the plan itself), and where that branch started
// when it was made now.
type branchRec struct {
	dir, synced string
	branch      string
	base        loop.Base
	refresh     *refreshed // what the refresh from the plan branch did; nil when none ran
	made        bool       // the worktree was made now: worktree.copy and after_create are due
}

// record sets l's branch and, when l has none yet, its base.
func (b branchRec) record(l *loop.Loop) {
	if b.branch == "" {
		return
	}
	l.Branch = b.branch
	if l.Base == (loop.Base{}) {
		l.Base = b.base
	}
}

// worktree makes the loop's working directory: ralph-like loops get a
// branch loopr/<slug>-<short-id> from their plan's branch; plan/spec/phase loops get a
// throwaway worktree of the plan branch. With git.remote, the plan branch
// and the loop's branch are the remote's (gitflow.SyncBranch: the previous
// iteration may have run on another machine); synced is the loop branch's
// tip there, which the push after the iteration expects.
func (m *Manager) worktree(ctx context.Context, l loop.Loop) (branchRec, error) {
	g := m.o.Git
	var rec branchRec
	root, err := m.root(l)
	if err != nil {
		return rec, err
	}
	// made reports whether branch is missing, so this call makes it and
	// its base is known.
	made := func(branch string) bool {
		ok, err := g.HasBranch(ctx, branch)
		return err == nil && !ok && l.Base == (loop.Base{})
	}
	// baseOf is where branch, just made from base, started; a failure to
	// tell is logged, never the iteration's.
	baseOf := func(branch, base string) loop.Base {
		b, err := g.BaseOf(ctx, branch, base)
		if err != nil {
			m.log.Warn("record where the branch started", "loop", l.ID, "branch", branch, "err", err)
		}
		return b
	}
	base := "HEAD"
	if root.Type == loop.Plan {
		pb, err := g.Branch(ctx, root.ID, root.Title)
		if err != nil {
			return rec, err
		}
		fresh := root.ID == l.ID && made(pb)
		if err := g.EnsurePlanBranch(ctx, pb); err != nil {
			return rec, err
		}
		if root.ID == l.ID {
			rec.branch = pb
			if fresh {
				rec.base = baseOf(pb, "HEAD")
			}
		}
		base = pb
	}
	path, err := g.WorktreePath(l.ID)
	if err != nil {
		return rec, err
	}
	_, statErr := os.Stat(path)
	rec.made = statErr != nil
	if !ownBranch(l.Type) {
		rec.dir, err = g.AddDetachedWorktree(ctx, l.ID, base)
		return rec, err
	}
	b, err := g.Branch(ctx, l.ID, l.Title)
	if err != nil {
		return rec, err
	}
	fresh := made(b)
	if g.Remote != "" {
		if rec.synced, err = g.SyncBranch(ctx, b, base); err != nil {
			return rec, err
		}
	}
	if rec.dir, err = g.AddWorktree(ctx, l.ID, b, base); err != nil {
		return rec, err
	}
	if base != "HEAD" && !fresh {
		rec.refresh = m.refresh(ctx, l, rec.dir, b, base)
	}
	rec.branch = b
	if fresh {
		rec.base = baseOf(b, base)
	}
	return rec, nil
}
