package gitflow

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) {
	// Hermetic git: no user or system config, and no guessing an identity
	// from the host, so commits succeed only through loopr's own identity.
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Setenv("GIT_CONFIG_COUNT", "1")
	os.Setenv("GIT_CONFIG_KEY_0", "user.useConfigOnly")
	os.Setenv("GIT_CONFIG_VALUE_0", "true")
	os.Exit(m.Run())
}

// gitT runs git in dir as a test user and returns its trimmed stdout.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitOut(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func gitOut(dir string, args ...string) (string, error) {
	argv := append([]string{"-C", dir, "-c", "user.name=Test User", "-c", "user.email=test@example.com"}, args...)
	cmd := exec.Command("git", argv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newRepo makes a repository on branch main with one commit, opened with the
// default home <root>/.loopr.
func newRepo(t *testing.T) *Repo {
	t.Helper()
	root := t.TempDir()
	gitT(t, root, "init", "-q")
	gitT(t, root, "symbolic-ref", "HEAD", "refs/heads/main")
	write(t, root, "README.md", "hello\n")
	write(t, root, "shared.txt", "line one\nline two\n")
	gitT(t, root, "add", "-A")
	gitT(t, root, "commit", "-q", "-m", "initial")
	r, err := Open(root, "", nil)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	return r
}

// userState is everything about the user's checkout loopr must not change.
type userState struct {
	Head, Branch, Status, Unstaged, Staged string
}

func snapshot(t *testing.T, root string) userState {
	t.Helper()
	return userState{
		Head:     gitT(t, root, "rev-parse", "HEAD"),
		Branch:   gitT(t, root, "symbolic-ref", "HEAD"),
		Status:   gitT(t, root, "status", "--porcelain", "--untracked-files=all"),
		Unstaged: gitT(t, root, "diff"),
		Staged:   gitT(t, root, "diff", "--cached"),
	}
}

// dirty gives the user's checkout an unstaged change, a staged file and an
// untracked file, so that any touch would show.
func dirty(t *testing.T, root string) {
	t.Helper()
	write(t, root, "README.md", "hello, edited by the user\n")
	write(t, root, "staged.txt", "staged\n")
	gitT(t, root, "add", "staged.txt")
	write(t, root, "notes.txt", "untracked\n")
}

// ralph makes a ralph worktree on loopr/<id> from the plan branch, writes
// files and commits them.
func ralph(t *testing.T, r *Repo, plan, id string, files map[string]string) string {
	t.Helper()
	ctx := t.Context()
	dir, err := r.AddWorktree(ctx, id, LegacyBranch(id), LegacyBranch(plan))
	if err != nil {
		t.Fatalf("AddWorktree(%s) = %v", id, err)
	}
	for name, content := range files {
		write(t, dir, name, content)
	}
	if ok, err := r.CommitAll(ctx, dir, "loopr: ralph "+id+" iteration 1"); err != nil || !ok {
		t.Fatalf("CommitAll(%s) = %v, %v; want true, nil", id, ok, err)
	}
	return dir
}

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("not a repository", func(t *testing.T) {
		t.Parallel()
		_, err := Open(t.TempDir(), "", nil)
		if !errors.Is(err, ErrNotRepo) {
			t.Fatalf("Open() = %v, want ErrNotRepo", err)
		}
	})

	t.Run("subdirectory finds the root and excludes the home once", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		sub := filepath.Join(r.Root, "sub", "dir")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		r2, err := Open(sub, "", nil)
		if err != nil {
			t.Fatalf("Open(sub) = %v", err)
		}
		if diff := cmp.Diff(r.Root, r2.Root); diff != "" {
			t.Errorf("Root mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(filepath.Join(r.Root, ".loopr"), r2.Home); diff != "" {
			t.Errorf("Home mismatch (-want +got):\n%s", diff)
		}
		exclude, err := os.ReadFile(filepath.Join(r.Root, ".git", "info", "exclude"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(exclude), "\n/.loopr/\n"); n != 1 {
			t.Errorf("exclude file has %d /.loopr/ lines, want 1:\n%s", n, exclude)
		}
		write(t, r.Root, ".loopr/loopr.db", "db")
		if _, err := r.AddWorktree(t.Context(), "x", "loopr/x", "HEAD"); err != nil {
			t.Fatal(err)
		}
		if got := gitT(t, r.Root, "status", "--porcelain", "--untracked-files=all"); got != "" {
			t.Errorf("git status shows loopr's home:\n%s", got)
		}
	})

	t.Run("home outside the repository leaves exclude alone", func(t *testing.T) {
		t.Parallel()
		root := t.TempDir()
		gitT(t, root, "init", "-q")
		path := filepath.Join(root, ".git", "info", "exclude")
		before, _ := os.ReadFile(path)
		if _, err := Open(root, t.TempDir(), nil); err != nil {
			t.Fatalf("Open() = %v", err)
		}
		after, _ := os.ReadFile(path)
		if diff := cmp.Diff(string(before), string(after)); diff != "" {
			t.Errorf("exclude file changed (-want +got):\n%s", diff)
		}
	})
}

// TestOpenNoGit cannot run in parallel: it empties PATH.
func TestOpenNoGit(t *testing.T) {
	t.Setenv("PATH", "")
	if _, err := Open(t.TempDir(), "", nil); !errors.Is(err, ErrNoGit) {
		t.Fatalf("Open() = %v, want ErrNoGit", err)
	}
}

func TestEnsurePlanBranch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	dirty(t, r.Root)
	before := snapshot(t, r.Root)

	for range 2 { // the second call finds the branch
		if err := r.EnsurePlanBranch(ctx, LegacyBranch("P1")); err != nil {
			t.Fatalf("EnsurePlanBranch() = %v", err)
		}
	}
	if got := gitT(t, r.Root, "rev-parse", "loopr/P1"); got != before.Head {
		t.Errorf("loopr/P1 at %s, want HEAD %s", got, before.Head)
	}
	if diff := cmp.Diff(before, snapshot(t, r.Root)); diff != "" {
		t.Errorf("user's checkout changed (-want +got):\n%s", diff)
	}
}

func TestEnsurePlanBranchNoCommits(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	gitT(t, root, "init", "-q")
	r, err := Open(root, "", nil)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if err := r.EnsurePlanBranch(t.Context(), LegacyBranch("P1")); !errors.Is(err, ErrNoCommits) {
		t.Fatalf("EnsurePlanBranch() = %v, want ErrNoCommits", err)
	}
}

func TestAddWorktree(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	plan := gitT(t, r.Root, "rev-parse", "loopr/P")

	dir, err := r.AddWorktree(ctx, "R1", LegacyBranch("R1"), LegacyBranch("P"))
	if err != nil {
		t.Fatalf("AddWorktree() = %v", err)
	}
	if diff := cmp.Diff(filepath.Join(r.Home, "worktrees", "R1"), dir); diff != "" {
		t.Errorf("dir mismatch (-want +got):\n%s", diff)
	}
	got := []string{gitT(t, dir, "symbolic-ref", "HEAD"), gitT(t, dir, "rev-parse", "HEAD"), gitT(t, r.Root, "rev-parse", "loopr/R1")}
	if diff := cmp.Diff([]string{"refs/heads/loopr/R1", plan, plan}, got); diff != "" {
		t.Errorf("worktree branch, HEAD, branch tip mismatch (-want +got):\n%s", diff)
	}

	// Adding again reuses the worktree, uncommitted work and all.
	write(t, dir, "wip.txt", "work in progress\n")
	if again, err := r.AddWorktree(ctx, "R1", LegacyBranch("R1"), LegacyBranch("P")); err != nil || again != dir {
		t.Fatalf("AddWorktree() again = %q, %v; want %q, nil", again, err, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "wip.txt")); err != nil {
		t.Errorf("reused worktree lost uncommitted work: %v", err)
	}

	// Deleted behind git's back: pruned and added again on the same
	// branch, whose commits survive.
	if _, err := r.CommitAll(ctx, dir, "wip"); err != nil {
		t.Fatal(err)
	}
	tip := gitT(t, dir, "rev-parse", "HEAD")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if again, err := r.AddWorktree(ctx, "R1", LegacyBranch("R1"), LegacyBranch("P")); err != nil || again != dir {
		t.Fatalf("AddWorktree() after deletion = %q, %v; want %q, nil", again, err, dir)
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != tip {
		t.Errorf("re-added worktree at %s, want the branch tip %s", got, tip)
	}

	if _, err := r.AddWorktree(ctx, "R1", "loopr/other", LegacyBranch("P")); err == nil {
		t.Error("AddWorktree() on another branch than the existing worktree's = nil, want error")
	}
	if _, err := r.AddWorktree(ctx, "R2", LegacyBranch("R2"), ""); err == nil {
		t.Error("AddWorktree() of a new branch without base = nil, want error")
	}
}

func TestAddDetachedWorktree(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	plan := gitT(t, r.Root, "rev-parse", "loopr/P")

	dir, err := r.AddDetachedWorktree(ctx, "S1", LegacyBranch("P"))
	if err != nil {
		t.Fatalf("AddDetachedWorktree() = %v", err)
	}
	if _, err := gitOut(dir, "symbolic-ref", "-q", "HEAD"); err == nil {
		t.Error("detached worktree has a branch checked out")
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != plan {
		t.Errorf("HEAD = %s, want plan %s", got, plan)
	}

	// The plan moves on and the loop leaves a mess: adding again gives a
	// clean tree at the new plan tip.
	ralph(t, r, "P", "R1", map[string]string{"feature.txt": "feature\n"})
	if err := r.Merge(ctx, LegacyBranch("R1"), LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "README.md", "scribbled\n")
	write(t, dir, "scratch.txt", "scratch\n")
	if again, err := r.AddDetachedWorktree(ctx, "S1", LegacyBranch("P")); err != nil || again != dir {
		t.Fatalf("AddDetachedWorktree() again = %q, %v; want %q, nil", again, err, dir)
	}
	got := []string{gitT(t, dir, "rev-parse", "HEAD"), gitT(t, dir, "status", "--porcelain")}
	if diff := cmp.Diff([]string{gitT(t, r.Root, "rev-parse", "loopr/P"), ""}, got); diff != "" {
		t.Errorf("HEAD, status mismatch (-want +got):\n%s", diff)
	}
}

func TestCommitAll(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	dir, err := r.AddWorktree(ctx, "R1", LegacyBranch("R1"), "HEAD")
	if err != nil {
		t.Fatal(err)
	}

	write(t, dir, "new/file.go", "package file\n")
	write(t, dir, "README.md", "changed\n")
	if ok, err := r.CommitAll(ctx, dir, "loopr: ralph R1 iteration 1"); err != nil || !ok {
		t.Fatalf("CommitAll() = %v, %v; want true, nil", ok, err)
	}
	got := strings.Split(gitT(t, dir, "show", "--name-status", "--format=%an <%ae>|%cn <%ce>|%s"), "\n")
	want := []string{"loopr <loopr@localhost>|loopr <loopr@localhost>|loopr: ralph R1 iteration 1", "", "M\tREADME.md", "A\tnew/file.go"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commit mismatch (-want +got):\n%s", diff)
	}

	if ok, err := r.CommitAll(ctx, dir, "loopr: ralph R1 iteration 2"); err != nil || ok {
		t.Errorf("CommitAll() with nothing to commit = %v, %v; want false, nil", ok, err)
	}

	// The user's checkout is off limits.
	dirty(t, r.Root)
	before := snapshot(t, r.Root)
	if ok, err := r.CommitAll(ctx, r.Root, "sneaky"); err == nil || ok {
		t.Errorf("CommitAll(root) = %v, %v; want false, error", ok, err)
	}
	if diff := cmp.Diff(before, snapshot(t, r.Root)); diff != "" {
		t.Errorf("user's checkout changed (-want +got):\n%s", diff)
	}
	if _, err := r.CommitAll(ctx, dir, " "); err == nil {
		t.Error("CommitAll() with an empty message = nil, want error")
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	dirty(t, r.Root)
	before := snapshot(t, r.Root)

	ralph(t, r, "P", "R1", map[string]string{"a.txt": "from R1\n"})
	ralph(t, r, "P", "R2", map[string]string{"shared.txt": "line one\nline two, by R2\n"})
	for _, id := range []string{"R1", "R2"} {
		if err := r.Merge(ctx, LegacyBranch(id), LegacyBranch("P")); err != nil {
			t.Fatalf("Merge(%s) = %v", id, err)
		}
	}

	got := map[string]string{
		"a.txt":      gitT(t, r.Root, "show", "loopr/P:a.txt"),
		"shared.txt": gitT(t, r.Root, "show", "loopr/P:shared.txt"),
		"merges":     gitT(t, r.Root, "rev-list", "--merges", "--count", "loopr/P"),
		"subject":    gitT(t, r.Root, "log", "-1", "--format=%s", "loopr/P"),
	}
	want := map[string]string{
		"a.txt":      "from R1",
		"shared.txt": "line one\nline two, by R2",
		"merges":     "2",
		"subject":    "loopr: merge loopr/R2 into loopr/P",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan branch mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, r.Root)); diff != "" {
		t.Errorf("user's checkout changed (-want +got):\n%s", diff)
	}
	// Between merges the plan branch is checked out nowhere, so the user
	// can check it out.
	if list := gitT(t, r.Root, "worktree", "list", "--porcelain"); strings.Contains(list, "refs/heads/loopr/P\n") {
		t.Errorf("plan branch still checked out:\n%s", list)
	}
}

func TestMergeConflict(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	ralph(t, r, "P", "R1", map[string]string{"shared.txt": "line one by R1\nline two\n"})
	ralph(t, r, "P", "R2", map[string]string{"shared.txt": "line one by R2\nline two\n", "b.txt": "b\n"})
	if err := r.Merge(ctx, LegacyBranch("R1"), LegacyBranch("P")); err != nil {
		t.Fatalf("Merge(R1) = %v", err)
	}
	plan := gitT(t, r.Root, "rev-parse", "loopr/P")

	err := r.Merge(ctx, LegacyBranch("R2"), LegacyBranch("P"))
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Merge(R2) = %v, want *ConflictError", err)
	}
	if !strings.Contains(ce.Output, "CONFLICT") {
		t.Errorf("ConflictError.Output lacks git's CONFLICT line:\n%s", ce.Output)
	}
	ce.Output = ""
	want := &ConflictError{Branch: "loopr/R2", Into: "loopr/P", Files: []string{"shared.txt"}}
	if diff := cmp.Diff(want, ce); diff != "" {
		t.Errorf("ConflictError mismatch (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), "merge of loopr/R2 into loopr/P conflicts in shared.txt"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	integration := filepath.Join(r.Home, "worktrees", "_merge-loopr-P")
	if got := gitT(t, r.Root, "rev-parse", "loopr/P"); got != plan {
		t.Errorf("plan branch moved to %s on conflict, want %s", got, plan)
	}
	if got := gitT(t, integration, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("integration worktree not clean:\n%s", got)
	}
	if _, err := gitOut(integration, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
		t.Error("merge still in progress in the integration worktree")
	}

	// The integration worktree still works.
	ralph(t, r, "P", "R3", map[string]string{"c.txt": "c\n"})
	if err := r.Merge(ctx, LegacyBranch("R3"), LegacyBranch("P")); err != nil {
		t.Fatalf("Merge(R3) after a conflict = %v", err)
	}
}

func TestMergeConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	const n = 4
	for i := range n {
		id := fmt.Sprintf("R%d", i)
		ralph(t, r, "P", id, map[string]string{id + ".txt": id + "\n"})
	}

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = r.Merge(ctx, LegacyBranch(fmt.Sprintf("R%d", i)), LegacyBranch("P")) })
	}
	wg.Wait()
	if diff := cmp.Diff(make([]error, n), errs, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Fatalf("Merge() errors mismatch (-want +got):\n%s", diff)
	}
	got := gitT(t, r.Root, "ls-tree", "--name-only", "loopr/P")
	if diff := cmp.Diff("R0.txt\nR1.txt\nR2.txt\nR3.txt\nREADME.md\nshared.txt", got); diff != "" {
		t.Errorf("plan branch files mismatch (-want +got):\n%s", diff)
	}
	if got := gitT(t, r.Root, "rev-list", "--merges", "--count", "loopr/P"); got != "4" {
		t.Errorf("plan branch has %s merges, want 4", got)
	}
}

func TestMergeRefusesUserCheckout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	dirty(t, r.Root)
	before := snapshot(t, r.Root)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	ralph(t, r, "P", "R1", map[string]string{"x.txt": "x\n"})
	if err := r.Merge(ctx, LegacyBranch("R1"), "main"); err == nil {
		t.Error("Merge() into the user's current branch = nil, want error")
	}
	if diff := cmp.Diff(before, snapshot(t, r.Root)); diff != "" {
		t.Errorf("user's checkout changed (-want +got):\n%s", diff)
	}
	if err := r.Merge(ctx, "loopr/missing", "main"); err == nil {
		t.Error("Merge() of a missing branch = nil, want error")
	}
}

func TestRemoveWorktree(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		deleteBranch bool
	}{
		{"keep branch", false},
		{"delete branch", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			r := newRepo(t)
			if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
				t.Fatal(err)
			}
			dir := ralph(t, r, "P", "R1", map[string]string{"x.txt": "x\n"})
			write(t, dir, "uncommitted.txt", "dirty\n")

			for range 2 { // removing what is gone is fine
				branch := ""
				if tt.deleteBranch {
					branch = LegacyBranch("R1")
				}
				if err := r.RemoveWorktree(ctx, "R1", branch); err != nil {
					t.Fatalf("RemoveWorktree() = %v", err)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("worktree dir still there: %v", err)
			}
			if list := gitT(t, r.Root, "worktree", "list", "--porcelain"); strings.Contains(list, "R1") {
				t.Errorf("worktree still registered:\n%s", list)
			}
			_, err := gitOut(r.Root, "rev-parse", "--verify", "-q", "refs/heads/loopr/R1")
			if exists := err == nil; exists == tt.deleteBranch {
				t.Errorf("branch exists = %v, want %v", exists, !tt.deleteBranch)
			}
		})
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "gone"} {
		ralph(t, r, "P", id, map[string]string{id + ".txt": id})
	}
	if err := r.Merge(ctx, LegacyBranch("a"), LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(r.Home, "worktrees")
	write(t, root, "d/debris.txt", "half-made worktree\n") // not registered
	write(t, root, "not.an.id/keep.txt", "not ours\n")
	if err := os.RemoveAll(filepath.Join(root, "gone")); err != nil { // stale registration
		t.Fatal(err)
	}

	removed, err := r.Sweep(ctx, func(id string) bool { return id == "a" })
	if err != nil {
		t.Fatalf("Sweep() = %v", err)
	}
	if diff := cmp.Diff([]string{"_merge-loopr-P", "b", "c", "d"}, removed); diff != "" {
		t.Errorf("Sweep() removed mismatch (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if diff := cmp.Diff([]string{"a", "not.an.id"}, left); diff != "" {
		t.Errorf("worktrees left mismatch (-want +got):\n%s", diff)
	}
	var registered []string
	for line := range strings.Lines(gitT(t, r.Root, "worktree", "list", "--porcelain")) {
		if path, ok := strings.CutPrefix(strings.TrimSpace(line), "worktree "); ok {
			registered = append(registered, filepath.Base(path))
		}
	}
	if diff := cmp.Diff([]string{filepath.Base(r.Root), "a"}, registered); diff != "" {
		t.Errorf("registered worktrees mismatch (-want +got):\n%s", diff)
	}
	// Branches stay; merges recreate the integration worktree.
	if got := gitT(t, r.Root, "branch", "--list", "loopr/*", "--format=%(refname:short)"); got != "loopr/P\nloopr/a\nloopr/b\nloopr/c\nloopr/gone" {
		t.Errorf("branches after Sweep:\n%s", got)
	}
	if err := r.Merge(ctx, LegacyBranch("b"), LegacyBranch("P")); err != nil {
		t.Errorf("Merge() after Sweep = %v", err)
	}
}

func TestInvalidNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	ids := []string{"", ".", "..", "../escape", "a/b", "/abs", "a b", "-x", "_merge-x", "x\x00y", "ü", strings.Repeat("a", 65)}
	for _, id := range ids {
		t.Run(fmt.Sprintf("id %q", id), func(t *testing.T) {
			t.Parallel()
			calls := map[string]error{
				"EnsurePlanBranch":    r.EnsurePlanBranch(ctx, id),
				"RemoveWorktree":      r.RemoveWorktree(ctx, id, "loopr/ok"),
				"AddWorktree":         second(r.AddWorktree(ctx, id, "loopr/ok", "HEAD")),
				"AddDetachedWorktree": second(r.AddDetachedWorktree(ctx, id, "HEAD")),
			}
			for name, err := range calls {
				if !errors.Is(err, ErrInvalidID) {
					t.Errorf("%s() = %v, want ErrInvalidID", name, err)
				}
			}
		})
	}
	branches := []string{"", "-x", "a..b", "a//b", "a/", "/a", "x.lock", "a/.b", "a b", "a:b", "a~1", "HEAD@{1}", "a.", "../../x"}
	for _, b := range branches {
		t.Run(fmt.Sprintf("branch %q", b), func(t *testing.T) {
			t.Parallel()
			calls := map[string]error{
				"AddWorktree":  second(r.AddWorktree(ctx, "ok", b, "HEAD")),
				"Merge branch": r.Merge(ctx, b, "loopr/ok"),
				"Merge into":   r.Merge(ctx, "loopr/ok", b),
			}
			for name, err := range calls {
				if !errors.Is(err, ErrInvalidID) {
					t.Errorf("%s() = %v, want ErrInvalidID", name, err)
				}
			}
		})
	}
	t.Cleanup(func() {
		// Nothing was made anywhere but the worktrees dir, and nothing in it.
		entries, _ := os.ReadDir(filepath.Join(r.Home, "worktrees"))
		if len(entries) != 0 {
			t.Errorf("worktrees dir has %d entries after invalid calls", len(entries))
		}
		if got := gitT(t, r.Root, "branch", "--list", "loopr/*"); got != "" {
			t.Errorf("branches made by invalid calls:\n%s", got)
		}
	})
}

func second(_ string, err error) error { return err }

func TestConflictErrorMessage(t *testing.T) {
	t.Parallel()
	err := &ConflictError{Branch: "loopr/R1", Into: "loopr/P", Files: []string{"a.go", "b.go"}}
	if got, want := err.Error(), "merge of loopr/R1 into loopr/P conflicts in a.go, b.go"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
