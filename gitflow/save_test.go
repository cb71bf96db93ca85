package gitflow

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// saveSetup makes a ralph worktree on loopr/<id> and returns it with the
// branch's first commit.
func saveSetup(t *testing.T) (*Repo, string, string) {
	t.Helper()
	r := newRepo(t)
	dir, err := r.AddWorktree(t.Context(), "R1", LegacyBranch("R1"), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, gitT(t, dir, "rev-parse", "HEAD")
}

// onBranch asserts that the file name with content is committed on loopr/R1
// and that the worktree is back on that branch, clean.
func onBranch(t *testing.T, dir, name, content string) {
	t.Helper()
	if got, err := gitOut(dir, "show", LegacyBranch("R1")+":"+name); err != nil || got != strings.TrimSpace(content) {
		t.Errorf("%s on %s = %q, %v; want %q", name, LegacyBranch("R1"), got, err, content)
	}
	if got := gitT(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/"+LegacyBranch("R1") {
		t.Errorf("HEAD = %s, want refs/heads/%s", got, LegacyBranch("R1"))
	}
	if got := gitT(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("status = %q, want clean", got)
	}
}

func TestSaveWorkPlain(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	write(t, dir, "work.txt", "done\n")
	if ok, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "loopr: ralph R1 iteration 1"); err != nil || !ok {
		t.Fatalf("SaveWork() = %v, %v; want true, nil", ok, err)
	}
	onBranch(t, dir, "work.txt", "done")
	if ok, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "again"); err != nil || ok {
		t.Errorf("SaveWork() with nothing new = %v, %v; want false, nil", ok, err)
	}
}

// A stale index.lock (no git running in the worktree) made every commit
// fail, and the loop completed without its work.
func TestSaveWorkStaleIndexLock(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	write(t, dir, "work.txt", "done\n")
	lock := gitT(t, dir, "rev-parse", "--path-format=absolute", "--git-path", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err != nil {
		t.Fatalf("SaveWork() with a stale index.lock = %v, want nil", err)
	}
	onBranch(t, dir, "work.txt", "done")
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("index.lock still there: %v", err)
	}
}

func TestSaveWorkDeletedDotGit(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	write(t, dir, "work.txt", "done\n")
	if err := os.Remove(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err != nil {
		t.Fatalf("SaveWork() after .git was deleted = %v, want nil", err)
	}
	onBranch(t, dir, "work.txt", "done")
}

func TestSaveWorkDotGitReplaced(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	write(t, dir, "work.txt", "done\n")
	if err := os.Remove(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q") // the agent's own repository
	_, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m")
	if err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("SaveWork() with .git a directory = %v, want an error saying it was replaced", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "work.txt")); err != nil {
		t.Errorf("the work was touched: %v", err)
	}
}

func TestSaveWorkDetachedHead(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	gitT(t, dir, "checkout", "-q", "--detach")
	write(t, dir, "a.txt", "agent commit\n")
	gitT(t, dir, "add", "a.txt")
	gitT(t, dir, "commit", "-q", "-m", "agent on a detached HEAD")
	write(t, dir, "b.txt", "left uncommitted\n")
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err != nil {
		t.Fatalf("SaveWork() on a detached HEAD = %v, want nil", err)
	}
	onBranch(t, dir, "a.txt", "agent commit")
	onBranch(t, dir, "b.txt", "left uncommitted")
}

func TestSaveWorkOtherBranch(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	gitT(t, dir, "checkout", "-q", "-b", "feature")
	write(t, dir, "a.txt", "on feature\n")
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err != nil {
		t.Fatalf("SaveWork() on another branch = %v, want nil", err)
	}
	onBranch(t, dir, "a.txt", "on feature")
	// loopr's commit never lands on a branch that is not the loop's.
	if got := gitT(t, dir, "rev-parse", "feature"); got == gitT(t, dir, "rev-parse", LegacyBranch("R1")) {
		t.Errorf("feature moved to the loop's commit %s", got)
	}
}

func TestSaveWorkStray(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	// The loop has work of its own, then the agent moves its worktree to a
	// branch that does not descend from it and works there.
	write(t, dir, "first.txt", "iteration 1\n")
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m1"); err != nil {
		t.Fatal(err)
	}
	write(t, r.Root, "other.txt", "x\n")
	gitT(t, r.Root, "checkout", "-q", "-b", "elsewhere")
	gitT(t, r.Root, "add", "other.txt")
	gitT(t, r.Root, "commit", "-q", "-m", "unrelated")
	gitT(t, r.Root, "checkout", "-q", "main")
	gitT(t, dir, "checkout", "-q", "--detach", "elsewhere")
	write(t, dir, "work.txt", "stray work\n")
	tip := gitT(t, dir, "rev-parse", LegacyBranch("R1"))
	_, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m")
	var se *StrayError
	if !errors.As(err, &se) {
		t.Fatalf("SaveWork() = %v, want a *StrayError", err)
	}
	if got := gitT(t, dir, "show", se.Ref+":work.txt"); got != "stray work" {
		t.Errorf("work.txt under %s = %q, want it kept", se.Ref, got)
	}
	if got := gitT(t, dir, "rev-parse", LegacyBranch("R1")); got != tip {
		t.Errorf("%s moved to %s", LegacyBranch("R1"), got)
	}
	if !strings.Contains(err.Error(), loop.ShortCommit(se.Commit)) || !strings.Contains(err.Error(), "does not descend from") {
		t.Errorf("error %q does not name the commit", err)
	}
}

func TestSaveWorkGone(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err == nil {
		t.Fatal("SaveWork() on a deleted worktree = nil, want an error")
	}
}

// The user's hooks never run for loopr's commits and merges: a slow
// post-commit or post-merge hook once held shutdown for 87 s.
func TestHooksDisabled(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	hooks := gitT(t, r.Root, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
	mark := filepath.Join(t.TempDir(), "ran")
	for _, h := range []string{"pre-commit", "post-commit", "post-merge", "post-checkout", "commit-msg"} {
		write(t, hooks, h, "#!/bin/sh\necho "+h+" >> "+mark+"\nexit 1\n")
		if err := os.Chmod(filepath.Join(hooks, h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.EnsurePlanBranch(t.Context(), LegacyBranch("P1")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "work.txt", "done\n")
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err != nil {
		t.Fatal(err)
	}
	if err := r.Merge(t.Context(), LegacyBranch("R1"), LegacyBranch("P1")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Errorf("hooks ran: %s", b)
	}
}

// Every git command has a deadline even when the caller gave none.
func TestGitTimeout(t *testing.T) {
	r := newRepo(t)
	r.Timeout = 300 * time.Millisecond
	bin := t.TempDir()
	// A git that hangs: the deadline must end it.
	write(t, bin, "git", "#!/bin/sh\nexec sleep 30\n")
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	_, err := r.git(context.Background(), r.Root, "status")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("git with a hung binary = %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s; the deadline is 300ms (+5s wait delay)", took)
	}
}

func TestSaveWorkOrphan(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	write(t, dir, "work.txt", "orphan work\n")
	gitT(t, dir, "checkout", "-q", "--orphan", "mine")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "orphan")
	_, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m")
	var se *StrayError
	if !errors.As(err, &se) {
		t.Fatalf("SaveWork() on an orphan branch = %v, want a *StrayError", err)
	}
}

// A prune while the agent has the .git file deleted (another loop's
// worktree add prunes) must not make the worktree unrecoverable.
func TestSaveWorkDeletedDotGitSurvivesPrune(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	write(t, dir, "work.txt", "done\n")
	if err := os.Remove(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddWorktree(t.Context(), "R2", LegacyBranch("R2"), "HEAD"); err != nil {
		t.Fatal(err)
	}
	gitT(t, r.Root, "worktree", "prune")
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "m"); err != nil {
		t.Fatalf("SaveWork() after .git was deleted and worktrees pruned = %v, want nil", err)
	}
	onBranch(t, dir, "work.txt", "done")
}

// Ahead counts the loop's own commits: none until an iteration leaves work,
// however many iterations ran; the base moving on does not count.
func TestAhead(t *testing.T) {
	t.Parallel()
	r, dir, _ := saveSetup(t)
	ahead := func() int {
		t.Helper()
		n, err := r.Ahead(t.Context(), LegacyBranch("R1"), "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "nothing"); err != nil {
		t.Fatal(err)
	}
	if n := ahead(); n != 0 {
		t.Errorf("Ahead() with no work = %d; want 0", n)
	}
	write(t, r.Root, "user.txt", "the user's own commit\n")
	gitT(t, r.Root, "add", "user.txt")
	gitT(t, r.Root, "commit", "-q", "-m", "user")
	write(t, dir, "work.txt", "done\n")
	if _, err := r.SaveWork(t.Context(), dir, LegacyBranch("R1"), "work"); err != nil {
		t.Fatal(err)
	}
	if n := ahead(); n != 1 {
		t.Errorf("Ahead() after one saved iteration = %d; want 1", n)
	}
	if _, err := r.Ahead(t.Context(), LegacyBranch("R1"), "--exec=x"); err == nil {
		t.Errorf("Ahead() with an option as base: no error")
	}
}
