package gitflow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// Keeping a loop's branch fresh.
//
// A loop's branch is made from its plan branch once, at its first
// iteration; other loops' work lands on the plan branch meanwhile. Before
// each iteration, Refresh brings the plan branch's current tip into the
// loop's branch, so a retry builds on what is merged now. A refresh that
// conflicts is the loop's to resolve: the merge is left in progress in its
// worktree (conflict markers, MERGE_HEAD), and the commit loopr makes after
// the iteration (SaveWork) concludes it. A worktree is never left
// half-rebased.

// How a branch is refreshed (config merge.refresh).
const (
	RefreshMerge  = "merge"  // merge the base into the branch
	RefreshRebase = "rebase" // rebase the branch onto the base; a conflict falls back to a merge
)

// Refreshed says what Refresh did.
type Refreshed struct {
	// Base is the commit of the base brought in; "" when the branch
	// already had it (nothing was done).
	Base string
	// How is RefreshMerge or RefreshRebase: how Base was brought in.
	How string
	// FellBack: the rebase conflicted; it was aborted and Base merged
	// instead.
	FellBack bool
	// Saved: work left uncommitted in the worktree was committed onto the
	// branch first.
	Saved bool
	// Pending: a merge was already in progress in the worktree (an
	// iteration that ended before loopr could commit); it was left as it
	// was, and nothing else was done.
	Pending bool
	// Conflicts are the files the merge in progress conflicts in, sorted:
	// left with conflict markers for the loop's agent to resolve.
	Conflicts []string
}

// Refresh brings the current tip of base (the plan branch; with Remote, the
// remote's as last fetched: fetch first, as EnsurePlanBranch does) into
// branch, checked out in the worktree dir, by a merge or (how is
// RefreshRebase) a rebase. Before that, it repairs what SaveWork repairs
// and commits any work left uncommitted, so none is lost. A merge that
// conflicts is left in progress in dir and reported in Conflicts, not as an
// error; a rebase that conflicts is aborted and a merge made instead. An
// error means the branch was not refreshed and the worktree is as it was
// (its uncommitted work perhaps committed).
func (r *Repo) Refresh(ctx context.Context, dir, branch, base, how string) (Refreshed, error) {
	var res Refreshed
	if err := checkBranch(branch); err != nil {
		return res, err
	}
	if how != RefreshMerge && how != RefreshRebase {
		return res, fmt.Errorf("refresh %s: unknown way %q (want %s or %s)", branch, how, RefreshMerge, RefreshRebase)
	}
	if base == "" || base[0] == '-' {
		return res, fmt.Errorf("%w: revision %q", ErrInvalidID, base)
	}
	if err := r.restoreGitFile(ctx, dir); err != nil {
		return res, err
	}
	if err := r.checkOwnWorktree(ctx, dir); err != nil {
		return res, err
	}
	if err := r.clearStaleLock(ctx, dir); err != nil {
		return res, err
	}
	if err := r.abortRebase(ctx, dir); err != nil {
		return res, err
	}
	if r.merging(ctx, dir) {
		files, err := r.unmerged(ctx, dir)
		return Refreshed{Pending: true, Conflicts: files}, err
	}
	saved, err := r.saveBefore(ctx, dir, branch, base)
	if err != nil {
		return res, err
	}
	res.Saved = saved
	commit, err := r.baseCommit(ctx, base)
	if err != nil {
		return res, fmt.Errorf("refresh %s from %s: %w", branch, base, err)
	}
	if ok, err := r.isAncestor(ctx, commit, "refs/heads/"+branch); err != nil || ok {
		return res, err // up to date
	}
	res.Base, res.How = commit, how
	if how == RefreshRebase {
		args := append(identityArgs(), "rebase", "--quiet", "--no-autostash", commit)
		_, err := r.gitEnv(ctx, dir, identityEnv, args...)
		if err == nil {
			r.logger().Info("refreshed by rebase", "branch", branch, "onto", base, "commit", loop.ShortCommit(commit))
			return res, nil
		}
		if aerr := r.abortRebase(context.WithoutCancel(ctx), dir); aerr != nil {
			return res, errors.Join(err, aerr)
		}
		r.logger().Info("rebase conflicts: aborted, merging instead", "branch", branch, "onto", base, "err", err)
		res.How, res.FellBack = RefreshMerge, true
	}
	message := fmt.Sprintf("loopr: refresh %s from %s", branch, base)
	args := append(identityArgs(), "merge", "--no-edit", "--no-verify", "-m", message, commit)
	if _, err := r.gitEnv(ctx, dir, identityEnv, args...); err != nil {
		files, ferr := r.unmerged(ctx, dir)
		if ferr == nil && len(files) > 0 && r.merging(ctx, dir) {
			res.Conflicts = files
			r.logger().Info("refresh conflicts: left for the loop", "branch", branch, "from", base, "files", files)
			return res, nil
		}
		if r.merging(ctx, dir) {
			if _, aerr := r.git(context.WithoutCancel(ctx), dir, "merge", "--abort"); aerr != nil {
				err = errors.Join(err, aerr)
			}
		}
		return Refreshed{Saved: saved}, fmt.Errorf("refresh %s from %s: %w", branch, base, err)
	}
	r.logger().Info("refreshed by merge", "branch", branch, "from", base, "commit", loop.ShortCommit(commit))
	return res, nil
}

// saveBefore commits what the worktree holds uncommitted, and puts HEAD
// back on branch, before a refresh moves it (SaveWork's repairs). It
// reports whether it committed.
func (r *Repo) saveBefore(ctx context.Context, dir, branch, base string) (bool, error) {
	head, err := r.git(ctx, dir, "symbolic-ref", "-q", "HEAD")
	if err != nil && exitCode(err) != 1 {
		return false, fmt.Errorf("read HEAD in %s: %w", dir, err)
	}
	out, err := r.git(ctx, dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return false, err
	}
	if strings.TrimSpace(head) == "refs/heads/"+branch && strings.TrimSpace(out) == "" {
		return false, nil
	}
	msg := "loopr: keep the work left uncommitted before refreshing from " + base
	committed, err := r.SaveWork(ctx, dir, branch, msg)
	if err != nil {
		return committed, fmt.Errorf("refresh %s: the worktree's work could not be saved first: %w", branch, err)
	}
	return committed, nil
}

// merging reports whether a merge is in progress in dir (MERGE_HEAD).
func (r *Repo) merging(ctx context.Context, dir string) bool {
	_, err := r.git(ctx, dir, "rev-parse", "--quiet", "--verify", "MERGE_HEAD")
	return err == nil
}

// abortRebase aborts a rebase in progress in dir, if any: one a crash or a
// conflict left, so the worktree is never left half-rebased.
func (r *Repo) abortRebase(ctx context.Context, dir string) error {
	for _, p := range []string{"rebase-merge", "rebase-apply"} {
		out, err := r.git(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", p)
		if err != nil {
			return err
		}
		if _, err := os.Lstat(strings.TrimSpace(out)); err != nil {
			continue
		}
		if _, err := r.git(ctx, dir, "rebase", "--abort"); err != nil {
			return fmt.Errorf("abort the rebase in progress in %s: %w", dir, err)
		}
		r.logger().Warn("aborted a rebase in progress", "dir", dir)
		return nil
	}
	return nil
}
