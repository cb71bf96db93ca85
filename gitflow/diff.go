package gitflow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Reading what loops changed (package changes, `loopr diff`). Nothing here
// writes a ref, the index or a worktree.

// Ref returns the commit a branch points at: with Remote, the remote's
// copy as last fetched (Fetch) when there is one — a loop that ran on
// another worker has only that — else the local branch. ok is false when
// neither exists.
func (r *Repo) Ref(ctx context.Context, branch string) (commit string, ok bool, err error) {
	if err := checkBranch(branch); err != nil {
		return "", false, err
	}
	if r.Remote != "" {
		if c, ok, err := r.tip(ctx, r.tracking(branch)); err != nil || ok {
			return c, ok, err
		}
	}
	return r.tip(ctx, "refs/heads/"+branch)
}

// Resolve returns the full id of the commit rev names (a commit id or a
// prefix of one); ok is false when the repository has no such commit.
func (r *Repo) Resolve(ctx context.Context, rev string) (commit string, ok bool, err error) {
	if err := checkObject(rev); err != nil {
		return "", false, err
	}
	return r.tip(ctx, rev)
}

// MergeBase returns the best common ancestor of commits a and b.
func (r *Repo) MergeBase(ctx context.Context, a, b string) (string, error) {
	if err := checkObject(a); err != nil {
		return "", err
	}
	if err := checkObject(b); err != nil {
		return "", err
	}
	out, err := r.git(ctx, r.Root, "merge-base", a, b)
	if err != nil {
		return "", fmt.Errorf("merge base of %s and %s: %w", loop.ShortCommit(a), loop.ShortCommit(b), err)
	}
	return strings.TrimSpace(out), nil
}

// MergedAt finds where commit landed on the first-parent line of tip (a
// plan branch's tip): the oldest commit of that line that holds commit
// (the merge queue's merge) and its first parent, the line just before.
// ok is false when tip does not hold commit.
func (r *Repo) MergedAt(ctx context.Context, commit, tip string) (merge, before string, ok bool, err error) {
	if err := checkObject(commit); err != nil {
		return "", "", false, err
	}
	if err := checkObject(tip); err != nil {
		return "", "", false, err
	}
	out, err := r.git(ctx, r.Root, "rev-list", "--first-parent", "--ancestry-path", commit+".."+tip)
	if err != nil {
		return "", "", false, fmt.Errorf("find where %s landed: %w", loop.ShortCommit(commit), err)
	}
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return "", "", false, nil
	}
	merge = lines[len(lines)-1]
	before, err = r.resolve(ctx, merge+"^1")
	if err != nil {
		return "", "", false, err
	}
	// The line before the merge must not hold commit already: else commit
	// is on the first-parent line itself (tip was made from it).
	if held, err := r.isAncestor(ctx, commit, before); err != nil || held {
		return "", "", false, err
	}
	return merge, before, true, nil
}

// Diff returns the patch (`git diff`) from commit from to commit to, with
// renames found, in a format the parser can rely on whatever the user's
// git configuration says: no colour, no external diff or textconv, a/ and
// b/ prefixes, names with unusual bytes quoted. A patch over lim is cut
// at the last hunk or file that fits whole, git is stopped, and cut is
// true. maxLines or maxBytes 0: no bound of that kind.
func (r *Repo) Diff(ctx context.Context, from, to string, maxLines, maxBytes int) (patch string, cut bool, err error) {
	if err := checkObject(from); err != nil {
		return "", false, err
	}
	if err := checkObject(to); err != nil {
		return "", false, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout())
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	args := []string{"-C", r.Root, "-c", "core.quotePath=true", "diff", "--no-color", "--no-ext-diff", "--no-textconv",
		"--find-renames", "--src-prefix=a/", "--dst-prefix=b/", "--submodule=short", "--no-relative", from, to, "--"}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = baseEnv()
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", false, err
	}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrNoGit, err)
		}
		return "", false, err
	}
	patch, cut, readErr := readPatch(out, maxLines, maxBytes)
	if cut {
		stop() // the rest is not wanted
	}
	waitErr := cmd.Wait()
	switch {
	case readErr != nil:
		return "", false, fmt.Errorf("git diff %s %s: %w", loop.ShortCommit(from), loop.ShortCommit(to), readErr)
	case waitErr != nil && !cut:
		return "", false, &gitError{args: args[2:], stderr: stderr.String(), err: waitErr}
	}
	return patch, cut, nil
}

// readPatch reads a patch up to the bounds; past it, the patch is cut before the
// last hunk or file header ("@@ ", "diff --git ") that began whole
// entries, so the parser sees only complete ones.
func readPatch(r io.Reader, maxLines, maxBytes int) (string, bool, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf bytes.Buffer
	lines, boundary, atStart := 0, 0, true
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if atStart {
				lines++
				if bytes.HasPrefix(chunk, []byte("diff --git ")) || bytes.HasPrefix(chunk, []byte("@@ ")) {
					boundary = buf.Len()
				}
			}
			if maxLines > 0 && lines > maxLines || maxBytes > 0 && buf.Len()+len(chunk) > maxBytes {
				buf.Truncate(boundary)
				return buf.String(), true, nil
			}
			buf.Write(chunk)
			atStart = chunk[len(chunk)-1] == '\n'
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // a long line: the rest of it comes next
		case errors.Is(err, io.EOF):
			return buf.String(), false, nil
		case err != nil:
			return "", false, err
		}
	}
}
