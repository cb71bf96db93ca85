package gitflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Merge merges branch into the branch into (`git merge --no-ff`) without
// touching the user's checkout: the merge happens in the integration worktree
// <home>/worktrees/_merge-<into with '/' as '-'>, made on demand. Merges into
// the same branch are serialized; waiting for one gives up when ctx ends.
//
// On conflicts the merge is aborted and a *ConflictError names the files; the
// target branch does not move. Between merges the integration worktree keeps
// a detached HEAD, so the target branch is not "checked out" there and the
// user may check it out, or delete it, as they please. If the user has into
// checked out in a worktree of their own, Merge fails rather than touch it.
//
// With Remote, the merge is into the remote's into (remote.go): see
// MergeWith.
func (r *Repo) Merge(ctx context.Context, branch, into string) error {
	return r.MergeWith(ctx, branch, into, MergeOptions{})
}

// MergeWith is Merge with options. With Remote, it takes this process's
// lock and then Lock (shared by every worker), fetches, merges branch onto
// the remote's into at a detached HEAD in the integration worktree, calls
// the fence, and pushes the merge with --force-with-lease; a push refused
// because into moved meanwhile (someone pushed without the lock) starts
// again from the fetch, MergeAttempts times in all. The local into follows
// when it can (a fast forward, not checked out).
func (r *Repo) MergeWith(ctx context.Context, branch, into string, o MergeOptions) error {
	if err := checkBranch(branch); err != nil {
		return err
	}
	if err := checkBranch(into); err != nil {
		return err
	}
	if branch == into {
		return fmt.Errorf("%w: merge of %s into itself", ErrInvalidID, branch)
	}
	name := integrationName(into)
	unlock, err := r.lockTarget(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	if r.Remote != "" {
		return r.mergeRemote(ctx, branch, into, name, o)
	}
	checkout := []string{"checkout", "--quiet", into, "--"}
	if r.Lock != nil {
		// Workers sharing this repository from several homes, each with
		// its own integration worktree: one merges into a branch at a
		// time, and a worker that died with into checked out does not
		// block the others.
		unlockShared, err := r.Lock.Lock(ctx, into)
		if err != nil {
			return fmt.Errorf("merge of %s into %s: %w", branch, into, err)
		}
		defer unlockShared()
		checkout = []string{"checkout", "--quiet", "--ignore-other-worktrees", into, "--"}
	}

	for _, b := range []string{branch, into} {
		ok, err := r.branchExists(ctx, b)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("merge of %s into %s: branch %s does not exist", branch, into, b)
		}
	}
	dir, _, err := r.ensureWorktree(ctx, name, "", "refs/heads/"+into)
	if err != nil {
		return err
	}
	if err := r.cleanIntegration(ctx, dir); err != nil {
		return err
	}
	if o.Fence != nil {
		if err := o.Fence(ctx); err != nil {
			return fmt.Errorf("merge of %s into %s: not merged: %w", branch, into, err)
		}
	}
	// checkout reads every worktree (is into checked out elsewhere?).
	unlockAdmin, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	_, err = r.git(ctx, dir, checkout...)
	unlockAdmin()
	if err != nil {
		return fmt.Errorf("merge into %s: check out in %s: %w", into, dir, err)
	}
	defer func() {
		// Let go of the branch; the next merge checks it out again.
		if _, err := r.git(context.WithoutCancel(ctx), dir, "checkout", "--quiet", "--detach"); err != nil {
			r.logger().Warn("detach integration worktree", "dir", dir, "err", err)
		}
	}()

	message := fmt.Sprintf("loopr: merge %s into %s", branch, into)
	args := append(identityArgs(), "merge", "--no-ff", "--no-edit", "--no-verify", "-m", message, "refs/heads/"+branch)
	if _, err := r.gitEnv(ctx, dir, identityEnv, args...); err != nil {
		return r.mergeFailed(ctx, dir, branch, into, err)
	}
	r.logger().Info("merged", "branch", branch, "into", into)
	return nil
}

// mergeFailed cleans the integration worktree dir after a merge that did
// not succeed and says why: a *ConflictError when files conflict.
func (r *Repo) mergeFailed(ctx context.Context, dir, branch, into string, mergeErr error) error {
	var output string
	var ge *gitError
	if errors.As(mergeErr, &ge) {
		output = strings.TrimSpace(ge.stdout + "\n" + ge.stderr)
	}
	// Whatever went wrong, leave nothing half-merged behind.
	files, filesErr := r.unmerged(ctx, dir)
	if err := r.cleanIntegration(context.WithoutCancel(ctx), dir); err != nil {
		return errors.Join(mergeErr, err)
	}
	if filesErr == nil && len(files) > 0 {
		return &ConflictError{Branch: branch, Into: into, Files: files, Output: output}
	}
	return fmt.Errorf("merge of %s into %s: %w", branch, into, mergeErr)
}

// unmerged lists the paths with conflicts in dir, sorted.
func (r *Repo) unmerged(ctx context.Context, dir string) ([]string, error) {
	out, err := r.git(ctx, dir, "diff", "--name-only", "--diff-filter=U", "-z")
	if err != nil {
		return nil, err
	}
	var files []string
	for f := range strings.SplitSeq(out, "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// cleanIntegration brings the integration worktree back to a clean HEAD: it
// aborts a merge a crash may have left in progress and drops any change. No
// one but Merge works there, so nothing of value is lost.
func (r *Repo) cleanIntegration(ctx context.Context, dir string) error {
	if _, err := r.git(ctx, dir, "rev-parse", "--quiet", "--verify", "MERGE_HEAD"); err == nil {
		if _, err := r.git(ctx, dir, "merge", "--abort"); err != nil {
			r.logger().Warn("merge --abort in integration worktree", "dir", dir, "err", err)
		}
	}
	if _, err := r.git(ctx, dir, "reset", "--quiet", "--hard"); err != nil {
		return fmt.Errorf("clean integration worktree %s: %w", dir, err)
	}
	if _, err := r.git(ctx, dir, "clean", "-ffdq"); err != nil {
		return fmt.Errorf("clean integration worktree %s: %w", dir, err)
	}
	return nil
}

// lockTarget takes the merge lock of one integration worktree; it gives up
// when ctx ends first.
func (r *Repo) lockTarget(ctx context.Context, name string) (unlock func(), err error) {
	r.mu.Lock()
	if r.targets == nil {
		r.targets = make(map[string]chan struct{})
	}
	sem := r.targets[name]
	if sem == nil {
		sem = make(chan struct{}, 1)
		r.targets[name] = sem
	}
	r.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for merges into %s: %w", name, ctx.Err())
	}
}
