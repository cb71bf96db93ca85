package loopmgr

import (
	"context"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TidyTree removes the plan's worktree and its integration (merge)
// worktree once the tree holding loop id is done: no loop of it is
// pending, paused, running or awaiting approval. Failed loops do not keep
// a tree alive (their own worktrees and branches stay); a reset loop gets
// the worktrees made again. The manager calls it when a loop finishes, the
// daemon after a user's cancel or reject. Without git it does nothing.
func (m *Manager) TidyTree(ctx context.Context, id string) {
	if m.o.Git == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	l, err := m.svc.Get(id)
	if err != nil {
		return
	}
	root, err := m.root(l)
	if err != nil || root.Type != loop.Plan {
		return
	}
	live, err := m.treeLive(root.ID)
	if err != nil || live {
		return
	}
	if err := m.o.Git.RemoveWorktree(ctx, root.ID, ""); err != nil {
		m.log.Warn("tidy a finished tree: remove the plan's worktree", "plan", root.ID, "err", err)
	}
	branch, err := m.o.Git.Branch(ctx, root.ID, root.Title)
	if err == nil {
		err = m.o.Git.RemoveIntegration(ctx, branch)
	}
	if err != nil {
		m.log.Warn("tidy a finished tree: remove the merge worktree", "plan", root.ID, "err", err)
		return
	}
	m.log.Info("tree finished: removed its plan and merge worktrees", "plan", root.ID)
}

// treeLive reports whether a loop of the tree under root (root included)
// is live: pending, paused, running or awaiting approval. It stops at the
// first one found, breadth first, where live loops of a busy tree are.
func (m *Manager) treeLive(root string) (bool, error) {
	live := false
	err := m.svc.Store.View(func(tx *store.Tx) error {
		r, err := tx.Get(root)
		if err != nil {
			return err
		}
		if !r.Status.Terminal() {
			live = true
			return nil
		}
		queue := []string{root}
		seen := map[string]bool{root: true}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			kids, err := tx.Children(id)
			if err != nil {
				return err
			}
			for _, k := range kids {
				if !k.Status.Terminal() {
					live = true
					return nil
				}
				if !seen[k.ID] {
					seen[k.ID] = true
					queue = append(queue, k.ID)
				}
			}
		}
		return nil
	})
	return live, err
}
