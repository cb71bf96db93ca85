package gitflow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// AddWorktree makes <home>/worktrees/<id> a worktree on branch, creating the
// branch from base when it does not exist yet and reusing it (and its
// commits) when it does. It is idempotent: a valid worktree already at the
// directory and on branch is returned as is, uncommitted work included; a
// registration whose directory was deleted is pruned and the worktree added
// again.
func (r *Repo) AddWorktree(ctx context.Context, id, branch, base string) (dir string, err error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if err := checkBranch(branch); err != nil {
		return "", err
	}
	dir, _, err = r.ensureWorktree(ctx, id, branch, base)
	return dir, err
}

// AddDetachedWorktree makes <home>/worktrees/<id> a worktree with a detached
// HEAD at base (the plan branch, for plan, spec and phase loops; with
// Remote, the remote's as last fetched), whose
// changes are never kept. A worktree already there is reset to base's
// current commit: tracked changes and untracked files are discarded (ignored
// files, such as build caches, stay).
func (r *Repo) AddDetachedWorktree(ctx context.Context, id, base string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	commit, err := r.baseCommit(ctx, base)
	if err != nil {
		return "", err
	}
	dir, reused, err := r.ensureWorktree(ctx, id, "", commit)
	if err != nil || !reused {
		return dir, err
	}
	if _, err := r.git(ctx, dir, "checkout", "--quiet", "--force", "--detach", commit); err != nil {
		return "", fmt.Errorf("reset worktree %s: %w", id, err)
	}
	if _, err := r.git(ctx, dir, "clean", "-ffdq"); err != nil {
		return "", fmt.Errorf("reset worktree %s: %w", id, err)
	}
	return dir, nil
}

// RemoveWorktree removes <home>/worktrees/<id> whatever its state and, when
// branch is not "", deletes that branch too (the loop's own: see Branch).
// A missing worktree or branch is not an error.
func (r *Repo) RemoveWorktree(ctx context.Context, id, branch string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if branch != "" {
		if err := checkOurs(branch); err != nil {
			return err
		}
	}
	root, err := r.worktreesRoot()
	if err != nil {
		return err
	}
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	err = r.removeLocked(ctx, filepath.Join(root, id))
	unlock()
	if err != nil || branch == "" {
		return err
	}
	return r.DeleteBranch(ctx, branch)
}

// DeleteBranch deletes branch (git branch -D) unless it is missing. It
// refuses names outside loopr/. The remote's copy, if any, stays: see
// DeleteRemoteBranch.
func (r *Repo) DeleteBranch(ctx context.Context, branch string) error {
	if err := checkOurs(branch); err != nil {
		return err
	}
	if ok, err := r.branchExists(ctx, branch); err != nil || !ok {
		return err
	}
	// git branch -D reads every worktree (is the branch checked out?).
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	_, err = r.git(ctx, r.Root, "branch", "-D", branch)
	unlock()
	if err != nil {
		return fmt.Errorf("delete branch %s: %w", branch, err)
	}
	r.logger().Info("deleted branch", "branch", branch)
	return nil
}

// Sweep removes every worktree under <home>/worktrees whose name keep
// rejects — the orphans a crash leaves behind — and prunes git's stale
// worktree records. Branches stay. keep sees loop ids and also the
// integration worktrees Merge keeps ("_merge-loopr-<plan>") and the clean
// checkouts of validate_in: clean ("_clean-<id>"); those are safe to
// reject, as they are made again on demand. Directories whose names are
// not ids are left alone. removed is sorted.
func (r *Repo) Sweep(ctx context.Context, keep func(id string) bool) (removed []string, err error) {
	if keep == nil {
		return nil, errors.New("sweep: keep func is nil")
	}
	root, err := r.worktreesRoot()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		integration := strings.HasPrefix(name, integrationPrefix)
		clean := strings.HasPrefix(name, cleanPrefix) && checkID(name[len(cleanPrefix):]) == nil
		if !e.IsDir() || (!integration && !clean && checkID(name) != nil) {
			r.logger().Warn("sweep: leaving unknown entry", "path", filepath.Join(root, name))
			continue
		}
		if keep(name) {
			continue
		}
		if err := r.sweepOne(ctx, filepath.Join(root, name), integration); err != nil {
			return removed, err
		}
		removed = append(removed, name)
	}
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return removed, err
	}
	defer unlock()
	if err := r.prune(ctx); err != nil {
		return removed, err
	}
	if len(removed) > 0 {
		r.logger().Info("swept worktrees", "removed", removed)
	}
	return removed, nil
}

func (r *Repo) sweepOne(ctx context.Context, dir string, integration bool) error {
	if integration {
		// Not in the middle of a merge, please.
		unlock, err := r.lockTarget(ctx, filepath.Base(dir))
		if err != nil {
			return err
		}
		defer unlock()
	}
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return r.removeLocked(ctx, dir)
}

// worktree is one record of `git worktree list --porcelain`.
type worktree struct {
	path   string
	branch string // short name; "" when detached
}

func (r *Repo) worktrees(ctx context.Context) ([]worktree, error) {
	out, err := r.git(ctx, r.Root, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	var list []worktree
	for block := range strings.SplitSeq(out, "\n\n") {
		var wt worktree
		for line := range strings.SplitSeq(block, "\n") {
			key, val, _ := strings.Cut(line, " ")
			switch key {
			case "worktree":
				wt.path = filepath.FromSlash(val)
			case "branch":
				wt.branch = strings.TrimPrefix(val, "refs/heads/")
			}
		}
		if wt.path != "" {
			list = append(list, wt)
		}
	}
	return list, nil
}

// registered finds the worktree record for dir.
func (r *Repo) registered(ctx context.Context, dir string) (worktree, bool, error) {
	list, err := r.worktrees(ctx)
	if err != nil {
		return worktree{}, false, err
	}
	want := canon(dir)
	i := slices.IndexFunc(list, func(wt worktree) bool { return canon(wt.path) == want })
	if i < 0 {
		return worktree{}, false, nil
	}
	return list[i], true, nil
}

// worktreesRoot returns <home>/worktrees, made if missing.
// WorktreePath returns where the worktree of loop id is (or would be):
// <home>/worktrees/<id>.
func (r *Repo) WorktreePath(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	root, err := r.worktreesRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, id), nil
}

func (r *Repo) worktreesRoot() (string, error) {
	home, err := filepath.Abs(r.Home)
	if err != nil || r.Home == "" {
		return "", fmt.Errorf("home %q: not usable: %v", r.Home, err)
	}
	root := filepath.Join(home, "worktrees")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("worktrees dir: %w", err)
	}
	return root, nil
}

// ensureWorktree makes <home>/worktrees/<name> a worktree: on branch when
// branch is set (created from base if missing), else detached at base. It
// reports whether an existing worktree was reused; a reused detached
// worktree is returned in whatever state it is in.
func (r *Repo) ensureWorktree(ctx context.Context, name, branch, base string) (dir string, reused bool, err error) {
	root, err := r.worktreesRoot()
	if err != nil {
		return "", false, err
	}
	dir = filepath.Join(root, name)
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return "", false, err
	}
	defer unlock()

	// Forget registrations whose directories are gone, so their branches
	// are free again.
	if err := r.prune(ctx); err != nil {
		return "", false, err
	}
	wt, ok, err := r.registered(ctx, dir)
	if err != nil {
		return "", false, err
	}
	switch {
	case ok && r.validWorktree(ctx, dir):
		if branch != "" && wt.branch != branch {
			on := wt.branch
			if on == "" {
				on = "a detached HEAD"
			}
			return "", false, fmt.Errorf("worktree %s is on %s, not %s", dir, on, branch)
		}
		return dir, true, nil
	case ok:
		r.logger().Warn("replacing broken worktree", "dir", dir)
		if err := r.removeLocked(ctx, dir); err != nil {
			return "", false, err
		}
	default:
		if _, err := os.Lstat(dir); err == nil {
			// Not a worktree git knows: debris of a crash in the middle of
			// an add. It is inside our home, so it is ours to clear.
			r.logger().Warn("removing leftover directory", "dir", dir)
			if err := os.RemoveAll(dir); err != nil {
				return "", false, fmt.Errorf("remove leftover %s: %w", dir, err)
			}
		}
	}

	// --lock: `git worktree prune` (ours, run for every add, or the
	// user's) must not forget a worktree while an agent has its .git file
	// deleted; SaveWork rewrites the file from this registration.
	args := []string{"worktree", "add", "--quiet", "--lock"}
	switch {
	case branch == "":
		args = append(args, "--detach", dir, base)
	default:
		exists, err := r.branchExists(ctx, branch)
		if err != nil {
			return "", false, err
		}
		if exists {
			if r.Lock != nil {
				// Workers sharing this repository from several homes: the
				// branch may still be checked out in the worktree of a
				// worker that lost the loop (it died, or was fenced). The
				// loop's lease is this worker's now.
				args = append(args, "--force")
			}
			args = append(args, dir, branch)
			break
		}
		if base == "" {
			return "", false, fmt.Errorf("worktree %s: branch %s does not exist and no base was given", name, branch)
		}
		commit, err := r.baseCommit(ctx, base)
		if err != nil {
			return "", false, err
		}
		args = append(args, "--no-track", "-b", branch, dir, commit)
	}
	if _, err := r.git(ctx, r.Root, args...); err != nil {
		return "", false, fmt.Errorf("add worktree %s: %w", name, err)
	}
	r.logger().Info("added worktree", "dir", dir, "branch", branch, "base", base)
	return dir, false, nil
}

// validWorktree reports whether dir is the top of a working tree.
func (r *Repo) validWorktree(ctx context.Context, dir string) bool {
	out, err := r.git(ctx, dir, "rev-parse", "--show-toplevel")
	return err == nil && canon(filepath.FromSlash(strings.TrimSpace(out))) == canon(dir)
}

// removeLocked removes the worktree or leftover directory at dir, with
// lockAdmin held. A worktree git refuses to remove (locked, submodules) is
// deleted from disk and pruned.
func (r *Repo) removeLocked(ctx context.Context, dir string) error {
	_, ok, err := r.registered(ctx, dir)
	if err != nil {
		return err
	}
	if ok {
		// Not locked: an older loopr did not lock its worktrees.
		_, _ = r.git(ctx, r.Root, "worktree", "unlock", dir)
		if _, err := r.git(ctx, r.Root, "worktree", "remove", "--force", dir); err != nil {
			r.logger().Warn("git worktree remove failed; deleting the directory", "dir", dir, "err", err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove worktree %s: %w", dir, err)
	}
	if ok {
		if err := r.prune(ctx); err != nil {
			return err
		}
		r.logger().Info("removed worktree", "dir", dir)
	}
	return nil
}

// checkOwnWorktree makes sure dir is the top of one of our worktrees, so that
// nothing ever stages or commits in the user's checkout.
func (r *Repo) checkOwnWorktree(ctx context.Context, dir string) error {
	root, err := r.worktreesRoot()
	if err != nil {
		return err
	}
	out, err := r.git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	top := canon(filepath.FromSlash(strings.TrimSpace(out)))
	if filepath.Dir(top) != canon(root) || top != canon(dir) {
		return fmt.Errorf("%s is not a loopr worktree under %s", dir, root)
	}
	return nil
}

// prune forgets worktree registrations whose directories are gone. Our
// worktrees are locked (so a prune never forgets one whose .git file an
// agent deleted); one whose whole directory is gone is unlocked first.
func (r *Repo) prune(ctx context.Context) error {
	wts, err := r.worktrees(ctx)
	if err != nil {
		return err
	}
	for _, wt := range wts {
		if _, err := os.Lstat(wt.path); errors.Is(err, os.ErrNotExist) {
			_, _ = r.git(ctx, r.Root, "worktree", "unlock", wt.path)
		}
	}
	_, err = r.git(ctx, r.Root, "worktree", "prune")
	return err
}

// RemoveIntegration removes the integration worktree where Merge merges
// into the branch into, if there is one, after any merge into it in
// progress. Merge makes it again when needed.
func (r *Repo) RemoveIntegration(ctx context.Context, into string) error {
	if err := checkBranch(into); err != nil {
		return err
	}
	root, err := r.worktreesRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, integrationName(into))
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return r.sweepOne(ctx, dir, true)
}
