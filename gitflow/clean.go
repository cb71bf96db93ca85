package gitflow

import (
	"context"
	"fmt"
	"path/filepath"
)

// cleanPrefix starts the names of the clean checkouts CleanCheckout makes
// under <home>/worktrees. Loop ids may not use it.
const cleanPrefix = "_clean-"

// CleanCheckout makes <home>/worktrees/_clean-<id> a worktree of commit
// holding exactly what the commit holds — nothing the agent left
// uncommitted or ignored — for loops.<type>.validate_in: clean, and
// returns it with the function that removes it. A checkout a crash left
// there is reset first.
func (r *Repo) CleanCheckout(ctx context.Context, id, commit string) (dir string, remove func(), err error) {
	if err := checkID(id); err != nil {
		return "", nil, err
	}
	if err := checkCommit(commit); err != nil {
		return "", nil, fmt.Errorf("clean checkout of %s: %w", id, err)
	}
	name := cleanPrefix + id
	dir, reused, err := r.ensureWorktree(ctx, name, "", commit)
	if err != nil {
		return "", nil, err
	}
	remove = func() {
		unlock, err := r.lockAdmin(context.WithoutCancel(ctx))
		if err == nil {
			err = r.removeLocked(context.WithoutCancel(ctx), dir)
			unlock()
		}
		if err != nil {
			r.logger().Warn("remove clean checkout", "dir", dir, "err", err)
		}
	}
	if reused {
		if _, err := r.git(ctx, dir, "checkout", "--quiet", "--force", "--detach", commit); err != nil {
			remove()
			return "", nil, fmt.Errorf("reset clean checkout %s: %w", filepath.Base(dir), err)
		}
		if _, err := r.git(ctx, dir, "clean", "-ffdxq"); err != nil {
			remove()
			return "", nil, fmt.Errorf("reset clean checkout %s: %w", filepath.Base(dir), err)
		}
	}
	return dir, remove, nil
}
