package gitflow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Saving an agent's work.
//
// An agent works in its worktree with full rights and may leave it in any
// state: a stale .git/index.lock, the .git file deleted, HEAD detached or
// on another branch. A loop's result is what is on its branch, so before a
// loop may pass, SaveWork repairs what can be repaired and otherwise says
// why the work is not on the branch; it never reports success for work
// that is not on branch.

// StrayError means the worktree's HEAD was on commits that do not descend
// from the loop's branch: they were kept under Ref and the worktree was put
// back on Branch, but the work is not on Branch.
type StrayError struct {
	Branch string // the loop's branch
	Was    string // where HEAD was: a branch name or "a detached HEAD"
	Commit string // the commit HEAD was on, the agent's work included
	Ref    string // the ref that now keeps Commit
}

func (e *StrayError) Error() string {
	return fmt.Sprintf("the work was committed on %s (commit %s), which does not descend from %s; it is kept as %s and the worktree is back on %s: merge or cherry-pick what you need from %s onto %s",
		e.Was, loop.ShortCommit(e.Commit), e.Branch, e.Ref, e.Branch, loop.ShortCommit(e.Commit), e.Branch)
}

// SaveWork commits everything in the worktree dir onto branch (the loop's
// branch, checked out there by AddWorktree) and makes sure it landed there.
// It repairs:
//   - a missing .git file (the worktree is registered, so it is rewritten);
//   - a stale index.lock (no live git process works in dir);
//   - HEAD detached or on another branch, with commits that descend from
//     branch: branch is fast-forwarded to them and checked out again.
//
// A merge in progress (a refresh that conflicted: see Refresh) is
// concluded by the commit, as it was resolved, even when the resolution
// changes nothing.
//
// Anything else is an error, and the worktree is left for inspection. It
// reports whether loopr made a commit.
func (r *Repo) SaveWork(ctx context.Context, dir, branch, message string) (committed bool, err error) {
	if err := checkBranch(branch); err != nil {
		return false, err
	}
	if strings.TrimSpace(message) == "" {
		return false, errors.New("commit in " + dir + ": empty message")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return false, fmt.Errorf("worktree %s is gone: nothing of this iteration could be saved", dir)
	}
	if err := r.restoreGitFile(ctx, dir); err != nil {
		return false, err
	}
	if err := r.checkOwnWorktree(ctx, dir); err != nil {
		return false, err
	}
	if err := r.clearStaleLock(ctx, dir); err != nil {
		return false, err
	}
	ours := "refs/heads/" + branch
	head, err := r.git(ctx, dir, "symbolic-ref", "-q", "HEAD")
	if err != nil && exitCode(err) != 1 {
		return false, fmt.Errorf("read HEAD in %s: %w", dir, err)
	}
	head = strings.TrimSpace(head)
	moved := head != ours
	if moved {
		// Off our branch: detach where HEAD is (files and index stay) so the
		// commit below never lands on a branch that is not the loop's.
		if _, err := r.git(ctx, dir, "checkout", "--quiet", "--detach"); err != nil {
			return false, fmt.Errorf("HEAD in %s is on %s, not %s, and could not be detached: %w", dir, describe(head), branch, err)
		}
	}
	if _, err := r.git(ctx, dir, "add", "-A"); err != nil {
		return false, err
	}
	_, err = r.git(ctx, dir, "diff", "--cached", "--quiet")
	switch code := exitCode(err); {
	case err == nil && !r.merging(ctx, dir):
	case err != nil && code != 1:
		return false, err
	default:
		args := append(identityArgs(), "commit", "--no-verify", "--quiet", "-m", message)
		if _, err := r.gitEnv(ctx, dir, identityEnv, args...); err != nil {
			return false, err
		}
		committed = true
	}
	if moved {
		if err := r.bringOnto(ctx, dir, branch, describe(head)); err != nil {
			return committed, err
		}
	}
	out, err := r.git(ctx, dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return committed, err
	}
	if s := strings.TrimSpace(out); s != "" {
		return committed, fmt.Errorf("changes in %s remain uncommitted after the commit: %s", dir, clipLines(s, 5))
	}
	return committed, nil
}

// bringOnto puts the commit at the detached HEAD of dir onto branch when it
// descends from the branch's tip, and checks branch out again. Otherwise
// it keeps the commit under refs/loopr/stray/<worktree> and returns a
// *StrayError.
func (r *Repo) bringOnto(ctx context.Context, dir, branch, was string) error {
	out, err := r.git(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return fmt.Errorf("read HEAD in %s: %w", dir, err)
	}
	head := strings.TrimSpace(out)
	tip, err := r.resolve(ctx, "refs/heads/"+branch)
	if err != nil {
		return fmt.Errorf("branch %s is gone (HEAD was on %s at %s): %w", branch, was, loop.ShortCommit(head), err)
	}
	if _, err := r.git(ctx, dir, "merge-base", "--is-ancestor", tip, head); err == nil {
		if _, err := r.git(ctx, dir, "update-ref", "-m", "loopr: bring work onto "+branch, "refs/heads/"+branch, head, tip); err != nil {
			return err
		}
		if _, err := r.git(ctx, dir, "checkout", "--quiet", branch); err != nil {
			return err
		}
		r.logger().Warn("brought the agent's commits onto its branch", "dir", dir, "was", was, "branch", branch, "commit", loop.ShortCommit(head))
		return nil
	} else if exitCode(err) != 1 {
		return err
	}
	ref := "refs/loopr/stray/" + filepath.Base(dir)
	if _, err := r.git(ctx, dir, "update-ref", ref, head); err != nil {
		return err
	}
	if _, err := r.git(ctx, dir, "checkout", "--quiet", "--force", branch); err != nil {
		return err
	}
	return &StrayError{Branch: branch, Was: was, Commit: head, Ref: ref}
}

func describe(ref string) string {
	if ref == "" {
		return "a detached HEAD"
	}
	return "branch " + strings.TrimPrefix(ref, "refs/heads/")
}

func clipLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("… (%d more)", len(lines)-n))
	}
	return strings.Join(lines, "; ")
}

// restoreGitFile rewrites dir/.git when it was deleted and git still has
// the worktree registered: the file only points at the worktree's admin
// directory (<common dir>/worktrees/<name>), which holds the index and HEAD,
// so nothing else is lost.
func (r *Repo) restoreGitFile(ctx context.Context, dir string) error {
	dotgit := filepath.Join(dir, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case err == nil && fi.Mode().IsRegular():
		return nil
	case err == nil:
		return fmt.Errorf("%s is not the worktree's .git file (a %s): the agent replaced it; the worktree is kept as it is", dotgit, fi.Mode().Type())
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	common, err := r.git(ctx, r.Root, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return err
	}
	admins, err := filepath.Glob(filepath.Join(strings.TrimSpace(common), "worktrees", "*", "gitdir"))
	if err != nil {
		return err
	}
	for _, g := range admins {
		b, err := os.ReadFile(g)
		if err != nil || canon(filepath.Dir(strings.TrimSpace(string(b)))) != canon(dir) {
			continue
		}
		if err := os.WriteFile(dotgit, []byte("gitdir: "+filepath.Dir(g)+"\n"), 0o644); err != nil {
			return fmt.Errorf("restore %s: %w", dotgit, err)
		}
		r.logger().Warn("restored the worktree's deleted .git file", "dir", dir)
		return nil
	}
	return fmt.Errorf("%s was deleted and git no longer knows the worktree: the work in %s could not be committed", dotgit, dir)
}

// staleAfter is how old an index.lock must be to be taken for stale where
// the processes working in the worktree cannot be listed (no /proc).
const staleAfter = 10 * time.Minute

// clearStaleLock removes the worktree's index.lock when no git process
// works in dir: git removes its lock when it ends, so a lock without a git
// is debris (of an agent killed mid-command, or left on purpose), and it
// would make every commit fail.
func (r *Repo) clearStaleLock(ctx context.Context, dir string) error {
	p, err := r.git(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", "index.lock")
	if err != nil {
		return err
	}
	lock := strings.TrimSpace(p)
	fi, err := os.Lstat(lock)
	if err != nil {
		return nil // no lock
	}
	if pid, ok := gitIn(dir); ok {
		return fmt.Errorf("%s is held by git (pid %d) still running in the worktree", lock, pid)
	}
	if _, err := os.Stat("/proc/self"); err != nil && time.Since(fi.ModTime()) < staleAfter {
		return fmt.Errorf("%s exists and its age (%s) does not show it stale", lock, time.Since(fi.ModTime()).Round(time.Second))
	}
	if err := os.Remove(lock); err != nil {
		return fmt.Errorf("remove stale %s: %w", lock, err)
	}
	r.logger().Warn("removed a stale index.lock", "lock", lock)
	return nil
}

// gitIn finds a live git process whose working directory is in dir (from
// /proc; false where there is none).
func gitIn(dir string) (int, bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	want := canon(dir)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(comm)), "git") {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		if c := canon(cwd); c == want || strings.HasPrefix(c, want+string(filepath.Separator)) {
			return pid, true
		}
	}
	return 0, false
}

// Ahead counts the commits on branch that base does not have: the work of
// a loop whose branch was made from base (its plan's branch, or HEAD).
// Zero means the loop has changed nothing yet, in any iteration. With
// Remote, a branch base is the remote's as last fetched.
func (r *Repo) Ahead(ctx context.Context, branch, base string) (int, error) {
	if err := checkBranch(branch); err != nil {
		return 0, err
	}
	if base == "" || base[0] == '-' {
		return 0, fmt.Errorf("%w: revision %q", ErrInvalidID, base)
	}
	from, err := r.baseCommit(ctx, base)
	if err != nil {
		return 0, fmt.Errorf("count the commits of %s past %s: %w", branch, base, err)
	}
	out, err := r.git(ctx, r.Root, "rev-list", "--count", from+"..refs/heads/"+branch)
	if err != nil {
		return 0, fmt.Errorf("count the commits of %s past %s: %w", branch, base, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("count the commits of %s past %s: %q", branch, base, out)
	}
	return n, nil
}
