package gitflow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// Landing a plan branch on its base branch (`loopr land`).
//
// PrepareLand works out, without touching a ref, an index or a worktree,
// what landing would do: a fast forward when the base branch is an
// ancestor of the plan branch, else a merge commit made from `git
// merge-tree --write-tree` (refused when it conflicts), the files the base
// branch would change, and where the base branch is checked out with
// which uncommitted changes. MoveBase then moves the base branch, never
// touching uncommitted work: in the worktree that has it checked out with
// `git merge --ff-only` (git itself refuses to overwrite a local change),
// else with `git update-ref` guarded by the old value.

// Landing is what landing Branch on Into does, or would do.
type Landing struct {
	Branch string // the plan branch
	Into   string // the base branch
	From   string // Branch's tip
	Onto   string // Into's tip
	// Mode is loop.LandFastForward, loop.LandMerge or loop.LandUpToDate
	// (Into already holds From): the strings of package loop.
	Mode string
	// Result is the commit Into moves to: From for a fast forward, the
	// merge commit (made by PrepareLand unless dry) for a merge, Onto when
	// up to date; "" on a dry-run merge.
	Result string
	Tree   string // the merge's tree, for a merge
	// Commits are the commits Into lacks, newest first ("<short> <subject>"),
	// at most MaxLandCommits; CommitCount counts them all.
	Commits     []string
	CommitCount int
	Files       []string // the files Into's tree changes, sorted
	Conflicts   []string // the files that conflict, for a merge that cannot be made
	// Checkout is the worktree that has Into checked out ("" when none),
	// Dirty its uncommitted changes (tracked and untracked paths), Touched
	// those among Files.
	Checkout string
	Dirty    []string
	Touched  []string
	// Busy says, when Into is checked out nowhere, that a worktree is in
	// the middle of a rebase of it ("a rebase of main is in progress in
	// DIR"): moving Into then would leave the rebase unable to finish.
	Busy string
}

// MaxLandCommits bounds Landing.Commits.
const MaxLandCommits = 50

// Modes of a landing (the values of loop.LandFastForward and friends).
const (
	landFF       = "fast-forward"
	landMerge    = "merge"
	landUpToDate = "up-to-date"
)

// ErrLandMoved means the base branch moved while a landing was validated:
// nothing moved; run it again.
var ErrLandMoved = errors.New("the base branch moved meanwhile")

// PrepareLand works out landing branch (its tip as fromRef resolves, a ref
// or a commit) on into. Unless dry, a merge's commit is made (an object
// only: no ref moves) with message. Conflicts come back in Landing, not as
// an error.
func (r *Repo) PrepareLand(ctx context.Context, branch, fromRef, into, message string, dry bool) (Landing, error) {
	if err := checkBranch(into); err != nil {
		return Landing{}, err
	}
	l := Landing{Branch: branch, Into: into}
	var ok bool
	var err error
	if l.From, ok, err = r.tip(ctx, fromRef); err != nil || !ok {
		return l, cmpErr(err, fmt.Errorf("branch %s does not exist (%s)", branch, fromRef))
	}
	if l.Onto, ok, err = r.tip(ctx, "refs/heads/"+into); err != nil || !ok {
		return l, cmpErr(err, fmt.Errorf("base branch %s does not exist", into))
	}
	if err := r.landCheckout(ctx, &l); err != nil {
		return l, err
	}
	if in, err := r.isAncestor(ctx, l.From, l.Onto); err != nil || in {
		l.Mode, l.Result = landUpToDate, l.Onto
		return l, err
	}
	if ff, err := r.isAncestor(ctx, l.Onto, l.From); err != nil {
		return l, err
	} else if ff {
		l.Mode, l.Result = landFF, l.From
	} else {
		l.Mode = landMerge
		if l.Tree, l.Conflicts, err = r.mergeTreeWrite(ctx, l.Onto, l.From); err != nil || len(l.Conflicts) > 0 {
			return l, err
		}
	}
	if err := r.landContent(ctx, &l); err != nil {
		return l, err
	}
	if l.Mode == landMerge && !dry {
		if l.Result, err = r.commitTree(ctx, l.Tree, message, l.Onto, l.From); err != nil {
			return l, err
		}
	}
	return l, nil
}

// cmpErr is err when there is one, else otherwise.
func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// landContent fills the commits and files of l.
func (r *Repo) landContent(ctx context.Context, l *Landing) error {
	out, err := r.git(ctx, r.Root, "rev-list", "--count", l.Onto+".."+l.From)
	if err != nil {
		return err
	}
	fmt.Sscan(strings.TrimSpace(out), &l.CommitCount)
	out, err = r.git(ctx, r.Root, "log", "--no-color", fmt.Sprintf("--max-count=%d", MaxLandCommits), "--format=%h %s", l.Onto+".."+l.From)
	if err != nil {
		return err
	}
	l.Commits = lines(out)
	to := l.From
	if l.Mode == landMerge {
		to = l.Tree
	}
	out, err = r.git(ctx, r.Root, "diff", "--no-renames", "--name-only", "-z", l.Onto, to)
	if err != nil {
		return err
	}
	l.Files = nulList(out)
	l.Touched = nil
	for _, f := range l.Dirty {
		if _, found := slices.BinarySearch(l.Files, f); found {
			l.Touched = append(l.Touched, f)
		}
	}
	return nil
}

// landCheckout finds the worktree that has l.Into checked out and its
// uncommitted changes.
func (r *Repo) landCheckout(ctx context.Context, l *Landing) error {
	list, err := r.worktrees(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(list, func(wt worktree) bool { return wt.branch == l.Into })
	if i < 0 {
		l.Busy = r.busyWith(ctx, list, l.Into)
		return nil
	}
	l.Checkout = list[i].path
	l.Dirty, err = r.Uncommitted(ctx, l.Checkout)
	return err
}

// busyWith says which detached worktree of list is rebasing branch (git
// records the branch's name while HEAD is detached), "" when none is. A worktree git cannot read (removed by hand) is skipped.
func (r *Repo) busyWith(ctx context.Context, list []worktree, branch string) string {
	for _, wt := range list {
		if wt.branch != "" {
			continue
		}
		out, err := r.git(ctx, wt.path, "rev-parse", "--path-format=absolute",
			"--git-path", "rebase-merge/head-name", "--git-path", "rebase-apply/head-name")
		if err != nil {
			continue
		}
		for _, p := range lines(out) {
			b, err := os.ReadFile(p)
			if err == nil && strings.TrimPrefix(strings.TrimSpace(string(b)), "refs/heads/") == branch {
				return fmt.Sprintf("a rebase of %s is in progress in %s", branch, wt.path)
			}
		}
	}
	return ""
}

// Uncommitted lists the paths with uncommitted changes in the worktree
// dir — staged, unstaged, untracked (not ignored) — sorted, each once;
// both names of a rename.
func (r *Repo) Uncommitted(ctx context.Context, dir string) ([]string, error) {
	out, err := r.git(ctx, dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, rec := range nulList(out) {
		if len(rec) > 3 {
			files = append(files, rec[3:])
		}
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// mergeTreeWrite merges commits a and b with `git merge-tree --write-tree`
// (no ref, index or worktree touched): the tree of the result, or the
// conflicting files.
func (r *Repo) mergeTreeWrite(ctx context.Context, a, b string) (tree string, conflicts []string, err error) {
	out, err := r.git(ctx, r.Root, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", a, b)
	switch exitCode(err) {
	case 0:
		return strings.TrimRight(out, "\x00\n"), nil, nil
	case 1:
		parts := nulList(out)
		if len(parts) > 1 {
			conflicts = parts[1:]
		}
		slices.Sort(conflicts)
		return "", slices.Compact(conflicts), nil
	case 129:
		return "", nil, fmt.Errorf("%w (%s)", ErrOldGit, r.version(ctx))
	}
	return "", nil, fmt.Errorf("dry-run merge of %s and %s: %w", loop.ShortCommit(a), loop.ShortCommit(b), err)
}

// commitTree makes a commit of tree with parents: with the user's git
// identity when one is configured, else loopr's.
func (r *Repo) commitTree(ctx context.Context, tree, message string, parents ...string) (string, error) {
	args := []string{"-c", "commit.gpgsign=false", "commit-tree", tree, "-m", message}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	out, err := r.git(ctx, r.Root, args...)
	if err != nil {
		// No identity configured: loopr's own.
		out, err = r.gitEnv(ctx, r.Root, identityEnv, append(identityArgs(), args...)...)
	}
	if err != nil {
		return "", fmt.Errorf("make the merge commit: %w", err)
	}
	return strings.TrimSpace(out), nil
}

// MoveBase moves l.Into from l.Onto to l.Result. In the worktree that has
// it checked out, by `git merge --ff-only` there, after checking that its
// HEAD is still l.Onto (git refuses to overwrite an uncommitted change
// itself); elsewhere by `git update-ref` with l.Onto as the old value. A
// base branch that moved since PrepareLand gives ErrLandMoved.
func (r *Repo) MoveBase(ctx context.Context, l Landing) error {
	if err := checkBranch(l.Into); err != nil {
		return err
	}
	if err := checkObject(l.Result); err != nil {
		return err
	}
	unlock, err := r.lockAdmin(ctx) // nobody checks it out or in meanwhile
	if err != nil {
		return err
	}
	defer unlock()
	now := l
	if err := r.landCheckout(ctx, &now); err != nil {
		return err
	}
	tip, ok, err := r.tip(ctx, "refs/heads/"+l.Into)
	if err != nil {
		return err
	}
	if !ok || tip != l.Onto || now.Checkout != l.Checkout {
		return fmt.Errorf("%w: %s", ErrLandMoved, l.Into)
	}
	if now.Checkout == "" {
		if _, err := r.git(ctx, r.Root, "update-ref", "-m", "loopr land "+l.Branch, "refs/heads/"+l.Into, l.Result, l.Onto); err != nil {
			return fmt.Errorf("move %s to %s: %w", l.Into, loop.ShortCommit(l.Result), err)
		}
		return nil
	}
	if out, err := r.git(ctx, now.Checkout, "rev-parse", "--verify", "--quiet", "HEAD"); err != nil || strings.TrimSpace(out) != l.Onto {
		return fmt.Errorf("%w: %s in %s", ErrLandMoved, l.Into, filepath.Clean(now.Checkout))
	}
	if _, err := r.git(ctx, now.Checkout, "merge", "--ff-only", "--quiet", "--no-stat", l.Result); err != nil {
		return fmt.Errorf("fast-forward %s in %s: %w", l.Into, now.Checkout, err)
	}
	return nil
}

// lines splits git's output into its non-empty lines.
func lines(out string) []string {
	var s []string
	for l := range strings.SplitSeq(out, "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			s = append(s, l)
		}
	}
	return s
}

// nulList splits -z output into its non-empty entries.
func nulList(out string) []string {
	var s []string
	for f := range strings.SplitSeq(out, "\x00") {
		if f != "" {
			s = append(s, f)
		}
	}
	return s
}

// LandFrom is the ref of branch to land: the local branch, or with Remote
// the remote's copy, fetched now, when there is one (the merge queue
// pushes there).
func (r *Repo) LandFrom(ctx context.Context, branch string) (string, error) {
	if err := checkBranch(branch); err != nil {
		return "", err
	}
	if r.Remote == "" {
		return "refs/heads/" + branch, nil
	}
	if err := r.Fetch(ctx); err != nil {
		return "", err
	}
	if _, ok, err := r.tip(ctx, r.tracking(branch)); err != nil || ok {
		return r.tracking(branch), err
	}
	return "refs/heads/" + branch, nil
}
