package gitflow

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// Merging a batch of passed branches (the merge queue, package
// mergequeue).
//
// Integrate holds the merge locks of one plan branch — this process's,
// then Repo.Lock, which every worker shares — for as long as the queue
// works on it. Within, Integration.Merge merges candidates onto the plan
// branch's tip at a detached HEAD in the integration worktree and leaves
// the result checked out there, where the queue validates it; only
// Integration.Land moves the plan branch, to that very commit, if the
// branch is still where the merge found it. A batch lands as one commit
// whose first parent is the old tip and whose other parents are the
// candidates merged, so every commit on the plan branch's first-parent
// line is one the queue validated.

// Candidate is one branch to merge: its name (for messages) and the
// commit to merge, its tip when its loop passed, never a later one.
type Candidate struct {
	Branch string
	Commit string
}

// Trial is what Merge made of a list of candidates.
type Trial struct {
	Onto string // the plan branch's tip the candidates were merged onto
	// Head is the commit made: Onto and every merged candidate, checked
	// out in the integration worktree; "" when nothing was merged.
	Head    string
	Merged  []int         // candidates in Head, in order
	Already []int         // candidates Onto already holds (landed before)
	Failed  map[int]error // candidates left out: a *ConflictError, or why they could not be merged
}

// Integration is the merge lock of one plan branch, held (Integrate).
type Integration struct {
	r    *Repo
	into string
	name string
	dir  string
}

// Integrate takes the merge locks of the plan branch into — this
// process's, then Lock — and calls fn with them held; waiting gives up
// when ctx ends.
func (r *Repo) Integrate(ctx context.Context, into string, fn func(*Integration) error) error {
	if err := checkBranch(into); err != nil {
		return err
	}
	name := integrationName(into)
	unlock, err := r.lockTarget(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	if r.Lock != nil {
		unlockShared, err := r.Lock.Lock(ctx, into)
		if err != nil {
			return fmt.Errorf("merge into %s: take the lock shared by the workers: %w", into, err)
		}
		defer unlockShared()
	}
	return fn(&Integration{r: r, into: into, name: name})
}

// Dir is the integration worktree, where Merge leaves its Head checked
// out; "" before the first Merge.
func (ig *Integration) Dir() string { return ig.dir }

// Merge merges cands, in order, onto the plan branch's tip (with Remote,
// the remote's, fetched now) at a detached HEAD in the integration
// worktree. A candidate the tip already holds is reported Already; one
// that conflicts with the tip and the candidates merged before it is left
// out, its merge aborted, and the others go on. The plan branch does not
// move (Land).
func (ig *Integration) Merge(ctx context.Context, cands []Candidate) (Trial, error) {
	r := ig.r
	for _, c := range cands {
		if err := checkBranch(c.Branch); err != nil {
			return Trial{}, err
		}
		if err := checkCommit(c.Commit); err != nil {
			return Trial{}, fmt.Errorf("merge %s: %w", c.Branch, err)
		}
	}
	ref := "refs/heads/" + ig.into
	if r.Remote != "" {
		if err := r.Fetch(ctx); err != nil {
			return Trial{}, fmt.Errorf("merge into %s: %w", ig.into, err)
		}
		ref = r.tracking(ig.into)
	}
	onto, ok, err := r.tip(ctx, ref)
	if err != nil {
		return Trial{}, err
	}
	if !ok {
		return Trial{}, fmt.Errorf("merge into %s: the branch does not exist (%s)", ig.into, ref)
	}
	if ig.dir == "" {
		if ig.dir, _, err = r.ensureWorktree(ctx, ig.name, "", onto); err != nil {
			return Trial{}, err
		}
	}
	if err := r.cleanIntegration(ctx, ig.dir); err != nil {
		return Trial{}, err
	}
	if _, err := r.git(ctx, ig.dir, "checkout", "--quiet", "--detach", onto); err != nil {
		return Trial{}, fmt.Errorf("merge into %s: check out %s in %s: %w", ig.into, loop.ShortCommit(onto), ig.dir, err)
	}
	t := Trial{Onto: onto, Failed: map[int]error{}}
	for i, c := range cands {
		if err := ig.mergeOne(ctx, c, onto, &t, i); err != nil {
			return t, err
		}
	}
	if len(t.Merged) == 0 {
		return t, nil
	}
	if t.Head, err = ig.commitBatch(ctx, cands, t); err != nil {
		return t, err
	}
	return t, nil
}

// mergeOne merges candidate i onto what the integration worktree holds,
// recording it in t; the error is for a worktree left unusable.
func (ig *Integration) mergeOne(ctx context.Context, c Candidate, onto string, t *Trial, i int) error {
	r := ig.r
	in, err := r.isAncestor(ctx, c.Commit, onto)
	if err != nil {
		t.Failed[i] = fmt.Errorf("merge of %s into %s: commit %s: %w", c.Branch, ig.into, loop.ShortCommit(c.Commit), err)
		return nil
	}
	if in {
		t.Already = append(t.Already, i)
		return nil
	}
	message := fmt.Sprintf("loopr: merge %s into %s", c.Branch, ig.into)
	args := append(identityArgs(), "merge", "--no-ff", "--no-edit", "--no-verify", "-m", message, c.Commit)
	if _, err := r.gitEnv(ctx, ig.dir, identityEnv, args...); err != nil {
		var output string
		var ge *gitError
		if errors.As(err, &ge) {
			output = strings.TrimSpace(ge.stdout + "\n" + ge.stderr)
		}
		files, filesErr := r.unmerged(ctx, ig.dir)
		if cerr := r.cleanIntegration(context.WithoutCancel(ctx), ig.dir); cerr != nil {
			return errors.Join(err, cerr)
		}
		if filesErr == nil && len(files) > 0 {
			t.Failed[i] = &ConflictError{Branch: c.Branch, Into: ig.into, Files: files, Output: output}
		} else {
			t.Failed[i] = fmt.Errorf("merge of %s into %s: %w", c.Branch, ig.into, err)
		}
		return nil
	}
	t.Merged = append(t.Merged, i)
	return nil
}

// commitBatch returns the commit the merges of t made: the merge commit
// itself for one candidate; for several, one commit of the same tree whose
// parents are t.Onto and each merged candidate, checked out in place of
// the chain of merges.
func (ig *Integration) commitBatch(ctx context.Context, cands []Candidate, t Trial) (string, error) {
	r := ig.r
	out, err := r.git(ctx, ig.dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil || len(t.Merged) == 1 {
		return strings.TrimSpace(out), err
	}
	if out, err = r.git(ctx, ig.dir, "rev-parse", "--verify", "HEAD^{tree}"); err != nil {
		return "", err
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "loopr: merge %d branches into %s\n\n", len(t.Merged), ig.into)
	args := append(identityArgs(), "commit-tree", strings.TrimSpace(out), "-p", t.Onto)
	for _, i := range t.Merged {
		args = append(args, "-p", cands[i].Commit)
		fmt.Fprintf(&msg, "- %s (%s)\n", cands[i].Branch, loop.ShortCommit(cands[i].Commit))
	}
	args = append(args, "-m", msg.String())
	out, err = r.gitEnv(ctx, ig.dir, identityEnv, args...)
	if err != nil {
		return "", fmt.Errorf("merge into %s: make the batch's commit: %w", ig.into, err)
	}
	head := strings.TrimSpace(out)
	if _, err := r.git(ctx, ig.dir, "checkout", "--quiet", "--detach", head); err != nil {
		return "", fmt.Errorf("merge into %s: check out the batch's commit: %w", ig.into, err)
	}
	return head, nil
}

// Land moves the plan branch from t.Onto to t.Head once fence (if set)
// allows it: with Remote, a push with --force-with-lease on t.Onto (the
// local branch follows when it can); else an update of the branch that
// succeeds only if it is still at t.Onto. A branch that moved meanwhile
// is an error wrapping ErrPushRejected: nothing moved, merge again. A
// branch the user has checked out in a worktree of their own is never
// moved.
func (ig *Integration) Land(ctx context.Context, t Trial, fence func(context.Context) error) error {
	if t.Head == "" {
		return nil
	}
	r := ig.r
	if fence != nil {
		if err := fence(ctx); err != nil {
			return fmt.Errorf("merge into %s: not moved: %w", ig.into, err)
		}
	}
	if r.Remote != "" {
		if err := r.push(ctx, ig.into, t.Head, t.Onto); err != nil {
			return fmt.Errorf("merge into %s: %w", ig.into, err)
		}
		r.fastForward(ctx, ig.into, t.Head)
		r.logger().Info("merged", "into", ig.into, "remote", r.Remote, "commit", loop.ShortCommit(t.Head), "branches", len(t.Merged))
		return nil
	}
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if dir, on, err := r.checkedOut(ctx, ig.into); err != nil {
		return err
	} else if on && !strings.HasPrefix(filepath.Base(dir), integrationPrefix) {
		return fmt.Errorf("merge into %s: the branch is checked out in %s; loopr moves no branch you have checked out: check out another branch there", ig.into, dir)
	}
	_, err = r.git(ctx, r.Root, "update-ref", "-m", "loopr: merge queue", "refs/heads/"+ig.into, t.Head, t.Onto)
	if err != nil {
		if cur, ok, terr := r.tip(ctx, "refs/heads/"+ig.into); terr == nil && ok && cur != t.Onto {
			return fmt.Errorf("merge into %s: %w: it is at %s, not %s", ig.into, ErrPushRejected, loop.ShortCommit(cur), loop.ShortCommit(t.Onto))
		}
		return fmt.Errorf("merge into %s: move the branch: %w", ig.into, err)
	}
	r.logger().Info("merged", "into", ig.into, "commit", loop.ShortCommit(t.Head), "branches", len(t.Merged))
	return nil
}

// checkCommit accepts a full hexadecimal object name (SHA-1 or SHA-256).
func checkCommit(c string) error {
	if (len(c) != 40 && len(c) != 64) || strings.Trim(c, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: commit %q: want a full hexadecimal object name", ErrInvalidID, c)
	}
	return nil
}

// Tip returns the commit branch points at.
func (r *Repo) Tip(ctx context.Context, branch string) (string, error) {
	c, ok, err := r.BranchTip(ctx, branch)
	if err == nil && !ok {
		err = fmt.Errorf("branch %s does not exist", branch)
	}
	return c, err
}
