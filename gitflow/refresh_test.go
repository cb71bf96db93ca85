package gitflow

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// refreshSetup makes a plan branch loopr/P, a task B branched from it, and
// then a task A merged into it: B's branch is stale. A appends aLine to
// shared.txt; B's worktree is returned with B's files committed.
func refreshSetup(t *testing.T, aLine string, bFiles map[string]string) (r *Repo, dir, planTip string) {
	t.Helper()
	r = newRepo(t)
	ctx := t.Context()
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("P")); err != nil {
		t.Fatal(err)
	}
	dir = ralph(t, r, "P", "B", bFiles)
	ralph(t, r, "P", "A", map[string]string{"shared.txt": "line one\nline two\n" + aLine})
	if err := r.Merge(ctx, LegacyBranch("A"), LegacyBranch("P")); err != nil {
		t.Fatalf("Merge(A) = %v", err)
	}
	return r, dir, gitT(t, r.Root, "rev-parse", LegacyBranch("P"))
}

// parents returns the parents of rev in dir.
func parents(t *testing.T, dir, rev string) []string {
	t.Helper()
	return strings.Fields(gitT(t, dir, "rev-list", "--parents", "-n1", rev))[1:]
}

func TestRefreshMerge(t *testing.T) {
	t.Parallel()
	r, dir, tip := refreshSetup(t, "from A\n", map[string]string{"b.txt": "B\n"})
	got, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), RefreshMerge)
	if err != nil {
		t.Fatalf("Refresh() = %v", err)
	}
	if diff := cmp.Diff(Refreshed{Base: tip, How: RefreshMerge}, got); diff != "" {
		t.Errorf("Refresh() mismatch (-want +got):\n%s", diff)
	}
	if ps := parents(t, dir, "HEAD"); len(ps) != 2 || ps[1] != tip {
		t.Errorf("HEAD's parents = %v, want the old tip and %s", ps, tip)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shared.txt")); !strings.Contains(string(b), "from A") {
		t.Errorf("shared.txt = %q, want A's line", b)
	}
	onBranchOf(t, dir, "B")
	again, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), RefreshMerge)
	if err != nil || again.Base != "" {
		t.Errorf("Refresh() when up to date = %+v, %v; want nothing done", again, err)
	}
}

func TestRefreshRebase(t *testing.T) {
	t.Parallel()
	r, dir, tip := refreshSetup(t, "from A\n", map[string]string{"b.txt": "B\n"})
	got, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), RefreshRebase)
	if err != nil {
		t.Fatalf("Refresh() = %v", err)
	}
	if diff := cmp.Diff(Refreshed{Base: tip, How: RefreshRebase}, got); diff != "" {
		t.Errorf("Refresh() mismatch (-want +got):\n%s", diff)
	}
	if ps := parents(t, dir, "HEAD"); len(ps) != 1 || ps[0] != tip {
		t.Errorf("HEAD's parents = %v, want only %s (B's commit replayed on the plan's tip)", ps, tip)
	}
	if got := gitT(t, dir, "show", "HEAD:b.txt"); got != "B" {
		t.Errorf("b.txt at HEAD = %q, want B", got)
	}
	onBranchOf(t, dir, "B")
}

// Two tasks appending to one file: the refresh conflicts. The conflict is
// left in the worktree for the agent (with rebase: the rebase is aborted
// and a merge made instead), and loopr's next commit concludes the merge.
func TestRefreshConflict(t *testing.T) {
	t.Parallel()
	for _, how := range []string{RefreshMerge, RefreshRebase} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			r, dir, tip := refreshSetup(t, "from A\n", map[string]string{"shared.txt": "line one\nline two\nfrom B\n"})
			before := gitT(t, dir, "rev-parse", "HEAD")
			got, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), how)
			if err != nil {
				t.Fatalf("Refresh() = %v, want the conflict left, not an error", err)
			}
			want := Refreshed{Base: tip, How: RefreshMerge, FellBack: how == RefreshRebase, Conflicts: []string{"shared.txt"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Refresh() mismatch (-want +got):\n%s", diff)
			}
			if mh := gitT(t, dir, "rev-parse", "MERGE_HEAD"); mh != tip {
				t.Errorf("MERGE_HEAD = %s, want %s", mh, tip)
			}
			if h := gitT(t, dir, "symbolic-ref", "HEAD"); h != "refs/heads/"+LegacyBranch("B") {
				t.Errorf("HEAD = %s, want on the branch (never half-rebased)", h)
			}
			if h := gitT(t, dir, "rev-parse", "HEAD"); h != before {
				t.Errorf("HEAD moved to %s, want %s until the merge is concluded", h, before)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "shared.txt"))
			if !strings.Contains(string(b), "<<<<<<<") || !strings.Contains(string(b), "from A") {
				t.Errorf("shared.txt = %q, want conflict markers with A's line", b)
			}
			// Until someone commits, another refresh leaves it as it is.
			pending, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), how)
			if err != nil || !pending.Pending || !cmp.Equal(pending.Conflicts, []string{"shared.txt"}) {
				t.Errorf("Refresh() with the merge pending = %+v, %v; want Pending with shared.txt", pending, err)
			}
			// The agent resolves; loopr's commit concludes the merge.
			write(t, dir, "shared.txt", "line one\nline two\nfrom A\nfrom B\n")
			if ok, err := r.SaveWork(t.Context(), dir, LegacyBranch("B"), "loopr: ralph B iteration 2"); err != nil || !ok {
				t.Fatalf("SaveWork() = %v, %v; want a commit", ok, err)
			}
			if ps := parents(t, dir, "HEAD"); len(ps) != 2 || ps[0] != before || ps[1] != tip {
				t.Errorf("HEAD's parents = %v, want [%s %s]", ps, before, tip)
			}
			if _, err := gitOut(dir, "rev-parse", "--verify", "--quiet", "MERGE_HEAD"); err == nil {
				t.Error("MERGE_HEAD still there after the commit")
			}
			onBranchOf(t, dir, "B")
		})
	}
}

// A resolution that keeps the branch's side exactly stages nothing new:
// the commit must conclude the merge all the same.
func TestRefreshConflictResolvedAsOurs(t *testing.T) {
	t.Parallel()
	r, dir, tip := refreshSetup(t, "from A\n", map[string]string{"shared.txt": "line one\nline two\nfrom B\n"})
	if _, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), RefreshMerge); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "checkout", "--ours", "shared.txt")
	if ok, err := r.SaveWork(t.Context(), dir, LegacyBranch("B"), "m"); err != nil || !ok {
		t.Fatalf("SaveWork() = %v, %v; want a merge commit", ok, err)
	}
	if ps := parents(t, dir, "HEAD"); len(ps) != 2 || ps[1] != tip {
		t.Errorf("HEAD's parents = %v, want a merge of %s", ps, tip)
	}
}

// What the agent left uncommitted, behind a stale index.lock, is committed
// before the refresh: nothing is lost, and the base is brought in.
func TestRefreshKeepsUncommittedWork(t *testing.T) {
	t.Parallel()
	for _, how := range []string{RefreshMerge, RefreshRebase} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			r, dir, tip := refreshSetup(t, "from A\n", map[string]string{"b.txt": "B\n"})
			write(t, dir, "b.txt", "B, edited\n")
			write(t, dir, "new.txt", "untracked\n")
			lock := gitT(t, dir, "rev-parse", "--path-format=absolute", "--git-path", "index.lock")
			if err := os.WriteFile(lock, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), how)
			if err != nil {
				t.Fatalf("Refresh() = %v", err)
			}
			if !got.Saved || got.Base != tip {
				t.Errorf("Refresh() = %+v; want Saved and Base %s", got, tip)
			}
			for name, want := range map[string]string{"b.txt": "B, edited", "new.txt": "untracked", "shared.txt": "line one\nline two\nfrom A"} {
				if got, err := gitOut(dir, "show", LegacyBranch("B")+":"+name); err != nil || got != want {
					t.Errorf("%s on the branch = %q, %v; want %q", name, got, err, want)
				}
			}
			if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("index.lock still there: %v", err)
			}
			onBranchOf(t, dir, "B")
		})
	}
}

// A rebase a crash left in the middle is aborted, never kept.
func TestRefreshAbortsRebaseInProgress(t *testing.T) {
	t.Parallel()
	r, dir, tip := refreshSetup(t, "from A\n", map[string]string{"shared.txt": "line one\nline two\nfrom B\n"})
	before := gitT(t, dir, "rev-parse", "HEAD")
	if _, err := gitOut(dir, "rebase", tip); err == nil {
		t.Fatal("rebase did not conflict")
	}
	got, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), RefreshMerge)
	if err != nil || !cmp.Equal(got.Conflicts, []string{"shared.txt"}) {
		t.Fatalf("Refresh() = %+v, %v; want the merge's conflict", got, err)
	}
	if h := gitT(t, dir, "rev-parse", "HEAD"); h != before {
		t.Errorf("HEAD = %s, want %s (the rebase aborted)", h, before)
	}
	if h := gitT(t, dir, "symbolic-ref", "HEAD"); h != "refs/heads/"+LegacyBranch("B") {
		t.Errorf("HEAD = %s, want back on the branch", h)
	}
}

func TestRefreshInvalid(t *testing.T) {
	t.Parallel()
	r, dir, _ := refreshSetup(t, "from A\n", map[string]string{"b.txt": "B\n"})
	if _, err := r.Refresh(t.Context(), dir, LegacyBranch("B"), LegacyBranch("P"), "squash"); err == nil {
		t.Error("Refresh() with an unknown way = nil, want an error")
	}
	if _, err := r.Refresh(t.Context(), r.Root, LegacyBranch("B"), LegacyBranch("P"), RefreshMerge); err == nil {
		t.Error("Refresh() in the user's checkout = nil, want an error")
	}
}

// onBranchOf asserts that dir is on loopr/<id> with nothing uncommitted.
func onBranchOf(t *testing.T, dir, id string) {
	t.Helper()
	if got := gitT(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/"+LegacyBranch(id) {
		t.Errorf("HEAD = %s, want refs/heads/%s", got, LegacyBranch(id))
	}
	if got := gitT(t, dir, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("status = %q, want clean", got)
	}
}

// With Remote, the refresh brings in the remote's plan branch (fetched as
// EnsurePlanBranch does before an iteration), merged there by another
// machine, and the push after the iteration accepts the refreshed branch,
// rebased or not.
func TestRefreshRemote(t *testing.T) {
	t.Parallel()
	for _, how := range []string{RefreshMerge, RefreshRebase} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c := newCluster(t, 2)
			a, b := c.clones[0], c.clones[1]
			const plan = "loopr/plan"
			for _, r := range c.clones {
				if err := r.EnsurePlanBranch(ctx, plan); err != nil {
					t.Fatal(err)
				}
			}
			dirA, _, err := iterate(t, a, "r1", "loopr/r1", plan, map[string]string{"one.txt": "from A\n"})
			if err != nil {
				t.Fatalf("iteration 1 of r1 on A: %v", err)
			}
			if _, _, err := iterate(t, b, "r2", "loopr/r2", plan, map[string]string{"two.txt": "from B\n"}); err != nil {
				t.Fatalf("r2 on B: %v", err)
			}
			if err := b.Merge(ctx, "loopr/r2", plan); err != nil {
				t.Fatalf("Merge(r2) on B = %v", err)
			}
			merged := c.remoteTip(t, plan)
			// r1's next iteration on A starts as the manager starts it.
			if err := a.EnsurePlanBranch(ctx, plan); err != nil {
				t.Fatal(err)
			}
			expect, err := a.SyncBranch(ctx, "loopr/r1", plan)
			if err != nil {
				t.Fatal(err)
			}
			got, err := a.Refresh(ctx, dirA, "loopr/r1", plan, how)
			if err != nil || got.Base != merged || len(got.Conflicts) > 0 {
				t.Fatalf("Refresh() = %+v, %v; want Base %s (the remote's plan branch), no conflict", got, err, merged)
			}
			if b, err := os.ReadFile(filepath.Join(dirA, "two.txt")); err != nil || string(b) != "from B\n" {
				t.Errorf("two.txt in A's worktree = %q, %v; want B's merged work", b, err)
			}
			write(t, dirA, "three.txt", "iteration 2\n")
			if _, err := a.SaveWork(ctx, dirA, "loopr/r1", "loopr: ralph r1 iteration 2"); err != nil {
				t.Fatal(err)
			}
			if err := a.PushBranch(ctx, "loopr/r1", expect); err != nil {
				t.Fatalf("PushBranch() after a refresh by %s = %v", how, err)
			}
			if err := a.Merge(ctx, "loopr/r1", plan); err != nil {
				t.Fatalf("Merge(r1) = %v", err)
			}
			want := "README.md\none.txt\nshared.txt\nthree.txt\ntwo.txt"
			if got := gitT(t, c.bare, "ls-tree", "--name-only", "refs/heads/"+plan); got != want {
				t.Errorf("remote %s holds %q, want %q", plan, got, want)
			}
		})
	}
}
