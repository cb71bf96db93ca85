package gitflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrOldGit means the git on PATH cannot dry-run a merge: `git merge-tree
// --write-tree` needs git 2.38 or later.
var ErrOldGit = errors.New("git merge-tree --write-tree needs git 2.38 or later")

// BranchTip returns the commit the local branch points at; ok is false when
// there is no such branch.
func (r *Repo) BranchTip(ctx context.Context, branch string) (commit string, ok bool, err error) {
	if err := checkBranch(branch); err != nil {
		return "", false, err
	}
	return r.tip(ctx, "refs/heads/"+branch)
}

// IsAncestor reports whether commit a is an ancestor of (or equal to)
// commit b: a branch at a has nothing b lacks.
func (r *Repo) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	if err := checkObject(a); err != nil {
		return false, err
	}
	if err := checkObject(b); err != nil {
		return false, err
	}
	return r.isAncestor(ctx, a, b)
}

// MergeTree dry-runs merging commits a and b (`git merge-tree --write-tree`):
// it writes objects to the object store but touches no ref, index or
// worktree. It returns the paths that would conflict, sorted; none when the
// merge would be clean. A git older than 2.38 gives ErrOldGit.
func (r *Repo) MergeTree(ctx context.Context, a, b string) ([]string, error) {
	if err := checkObject(a); err != nil {
		return nil, err
	}
	if err := checkObject(b); err != nil {
		return nil, err
	}
	out, err := r.git(ctx, r.Root, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", a, b)
	switch exitCode(err) {
	case 0:
		return nil, nil
	case 1: // conflicts: <tree>\0<path>\0<path>\0…
	case 129:
		var ge *gitError
		if errors.As(err, &ge) && strings.Contains(ge.stderr, "write-tree") {
			return nil, fmt.Errorf("%w (%s); upgrade git to see predicted conflicts", ErrOldGit, r.version(ctx))
		}
		return nil, err
	default:
		return nil, fmt.Errorf("dry-run merge of %s and %s: %w", a, b, err)
	}
	parts := strings.Split(strings.TrimRight(out, "\x00"), "\x00")
	var files []string
	for _, p := range parts[1:] { // parts[0] is the tree written
		if p != "" && !slices.Contains(files, p) {
			files = append(files, p)
		}
	}
	slices.Sort(files)
	return files, nil
}

// version is `git --version`'s answer, for messages.
func (r *Repo) version(ctx context.Context) string {
	out, err := r.git(ctx, r.Root, "--version")
	if err != nil {
		return "git version unknown"
	}
	return strings.TrimSpace(out)
}

// checkObject accepts a full or abbreviated hexadecimal commit id only.
func checkObject(c string) error {
	if len(c) < 4 || len(c) > 64 || strings.Trim(c, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: commit %q", ErrInvalidID, c)
	}
	return nil
}
