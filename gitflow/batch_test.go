package gitflow

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// candidates makes a ralph branch per id from the plan branch P with the
// files given, and returns them as merge candidates at their tips.
func candidates(t *testing.T, r *Repo, files map[string]map[string]string, ids ...string) []Candidate {
	t.Helper()
	var out []Candidate
	for _, id := range ids {
		ralph(t, r, "P", id, files[id])
		out = append(out, Candidate{Branch: LegacyBranch(id), Commit: gitT(t, r.Root, "rev-parse", LegacyBranch(id))})
	}
	return out
}

// planRepo is newRepo with the plan branch loopr/P.
func planRepo(t *testing.T) (*Repo, string) {
	t.Helper()
	r := newRepo(t)
	plan := LegacyBranch("P")
	if err := r.EnsurePlanBranch(t.Context(), plan); err != nil {
		t.Fatal(err)
	}
	return r, plan
}

// TestIntegrateBatch: a batch merges onto the tip at a detached HEAD,
// leaves out the candidate that conflicts, and lands as one commit whose
// first parent is the old tip; the plan branch moves only on Land.
func TestIntegrateBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r, plan := planRepo(t)
	dirty(t, r.Root)
	before := snapshot(t, r.Root)
	files := map[string]map[string]string{
		"A": {"a.txt": "a\n"},
		"B": {"shared.txt": "line one\nB's line two\n"},
		"C": {"shared.txt": "line one\nC's line two\n"}, // conflicts with B
		"D": {"d.txt": "d\n"},
	}
	cands := candidates(t, r, files, "A", "B", "C", "D")
	tip := gitT(t, r.Root, "rev-parse", plan)
	var tr Trial
	err := r.Integrate(ctx, plan, func(ig *Integration) error {
		var err error
		if tr, err = ig.Merge(ctx, cands); err != nil {
			return err
		}
		if got := gitT(t, r.Root, "rev-parse", plan); got != tip {
			t.Errorf("the plan branch moved before Land: %s, was %s", got, tip)
		}
		if got := gitT(t, ig.Dir(), "rev-parse", "HEAD"); got != tr.Head {
			t.Errorf("integration worktree at %s, want the trial's head %s", got, tr.Head)
		}
		return ig.Land(ctx, tr, nil)
	})
	if err != nil {
		t.Fatalf("Integrate() = %v", err)
	}
	if diff := cmp.Diff([]int{0, 1, 3}, tr.Merged); diff != "" {
		t.Errorf("merged mismatch (-want +got):\n%s", diff)
	}
	var ce *ConflictError
	if len(tr.Failed) != 1 || !errors.As(tr.Failed[2], &ce) || ce.Files[0] != "shared.txt" {
		t.Errorf("failed = %v; want C conflicting in shared.txt", tr.Failed)
	}
	if got := gitT(t, r.Root, "rev-parse", plan); got != tr.Head {
		t.Errorf("plan branch at %s after Land, want %s", got, tr.Head)
	}
	parents := strings.Fields(gitT(t, r.Root, "rev-list", "--parents", "-n", "1", plan))[1:]
	want := []string{tip, cands[0].Commit, cands[1].Commit, cands[3].Commit}
	if diff := cmp.Diff(want, parents); diff != "" {
		t.Errorf("the batch's commit parents mismatch (-want +got):\n%s", diff)
	}
	if got := gitT(t, r.Root, "rev-list", "--first-parent", "--count", tip+".."+plan); got != "1" {
		t.Errorf("%s commits on the first-parent line for the batch, want 1", got)
	}
	for name, want := range map[string]string{"a.txt": "a", "d.txt": "d", "shared.txt": "line one\nB's line two"} {
		if got := gitT(t, r.Root, "show", plan+":"+name); got != want {
			t.Errorf("%s on the plan branch = %q, want %q", name, got, want)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, r.Root)); diff != "" {
		t.Errorf("user's checkout changed (-want +got):\n%s", diff)
	}

	// Merged again: everything is already there, nothing to land.
	err = r.Integrate(ctx, plan, func(ig *Integration) error {
		tr, err = ig.Merge(ctx, cands[:2])
		return err
	})
	if err != nil || tr.Head != "" || len(tr.Already) != 2 {
		t.Errorf("second Merge() = %+v, %v; want both already there, no head", tr, err)
	}
}

// TestIntegrateSingleIsAPlainMerge: one candidate lands as the --no-ff
// merge Merge makes, with its subject.
func TestIntegrateSingleIsAPlainMerge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r, plan := planRepo(t)
	cands := candidates(t, r, map[string]map[string]string{"A": {"a.txt": "a\n"}}, "A")
	err := r.Integrate(ctx, plan, func(ig *Integration) error {
		tr, err := ig.Merge(ctx, cands)
		if err != nil {
			return err
		}
		return ig.Land(ctx, tr, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, r.Root, "log", "-1", "--format=%s|%p", plan); !strings.HasPrefix(got, "loopr: merge loopr/A into loopr/P|") || len(strings.Fields(strings.Split(got, "|")[1])) != 2 {
		t.Errorf("plan tip = %q; want the merge of loopr/A with 2 parents", got)
	}
}

// TestLandRefusesAMovedBranch: the plan branch moved between Merge and
// Land: nothing moves, and the error says so (ErrPushRejected); a fence
// that refuses moves nothing either.
func TestLandRefusesAMovedBranch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r, plan := planRepo(t)
	cands := candidates(t, r, map[string]map[string]string{"A": {"a.txt": "a\n"}, "B": {"b.txt": "b\n"}}, "A", "B")
	err := r.Integrate(ctx, plan, func(ig *Integration) error {
		tr, err := ig.Merge(ctx, cands[:1])
		if err != nil {
			return err
		}
		fenced := errors.New("lease lost")
		if err := ig.Land(ctx, tr, func(context.Context) error { return fenced }); !errors.Is(err, fenced) {
			t.Errorf("Land(fenced) = %v, want the fence's error", err)
		}
		userWT := filepath.Join(t.TempDir(), "user")
		gitT(t, r.Root, "worktree", "add", "-q", userWT, plan) // the user checks it out
		if err := ig.Land(ctx, tr, nil); err == nil || !strings.Contains(err.Error(), "checked out in") {
			t.Errorf("Land(checked out by the user) = %v, want a refusal naming the worktree", err)
		}
		gitT(t, r.Root, "worktree", "remove", userWT)
		gitT(t, r.Root, "branch", "-f", plan, cands[1].Commit) // someone moved it
		if err := ig.Land(ctx, tr, nil); !errors.Is(err, ErrPushRejected) {
			t.Errorf("Land(moved) = %v, want ErrPushRejected", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, r.Root, "rev-parse", plan); got != cands[1].Commit {
		t.Errorf("plan branch at %s, want where the user put it (%s)", got, cands[1].Commit)
	}
}

// TestCleanCheckout: the checkout holds the commit and nothing the
// worktree had besides; a leftover one is reset; remove removes it.
func TestCleanCheckout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r, _ := planRepo(t)
	wt := ralph(t, r, "P", "A", map[string]string{"a.txt": "committed\n"})
	write(t, wt, "untracked.txt", "left by the agent\n")
	commit := gitT(t, r.Root, "rev-parse", LegacyBranch("A"))
	dir, remove, err := r.CleanCheckout(ctx, "A", commit)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "junk.txt", "from a crash\n")
	dir2, remove2, err := r.CleanCheckout(ctx, "A", commit) // reused, reset
	if err != nil || dir2 != dir {
		t.Fatalf("CleanCheckout(again) = %s, %v; want %s", dir2, err, dir)
	}
	if got := gitT(t, dir, "status", "--porcelain", "--untracked-files=all", "--ignored"); got != "" {
		t.Errorf("clean checkout status = %q, want nothing", got)
	}
	if got := gitT(t, dir, "show", "HEAD:a.txt"); got != "committed" {
		t.Errorf("a.txt = %q", got)
	}
	remove2()
	remove()
	if list := gitT(t, r.Root, "worktree", "list"); strings.Contains(list, "_clean-A") {
		t.Errorf("clean checkout still registered:\n%s", list)
	}
	if _, _, err := r.CleanCheckout(ctx, "A", "HEAD"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("CleanCheckout(HEAD) = %v, want ErrInvalidID (a full commit name only)", err)
	}
}

// TestRemoteIntegrateOnAnotherClone: a branch passed and pushed on one
// machine is merged by another (as a worker finishes the merge of a loop
// whose own worker died), under the shared lock, and lands on the remote.
func TestRemoteIntegrateOnAnotherClone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	locker := &memLocker{}
	const plan = "loopr/plan"
	for _, r := range c.clones {
		r.Lock = locker
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	a, b := c.clones[0], c.clones[1]
	if _, _, err := iterate(t, a, "r1", "loopr/r1", plan, map[string]string{"r1.txt": "by a\n"}); err != nil {
		t.Fatal(err)
	}
	commit := gitT(t, a.Root, "rev-parse", "loopr/r1")
	var tr Trial
	err := b.Integrate(ctx, plan, func(ig *Integration) error {
		var err error
		if tr, err = ig.Merge(ctx, []Candidate{{Branch: "loopr/r1", Commit: commit}}); err != nil {
			return err
		}
		return ig.Land(ctx, tr, nil)
	})
	if err != nil {
		t.Fatalf("Integrate on the other clone = %v", err)
	}
	if got := c.remoteTip(t, plan); got != tr.Head || tr.Head == "" {
		t.Errorf("remote %s at %s, want the trial's head %q", plan, got, tr.Head)
	}
	if got := locker.taken[plan]; got != 1 {
		t.Errorf("shared lock taken %d times, want 1", got)
	}
	if got := gitT(t, b.Root, "show", plan+":r1.txt"); got != "by a" {
		t.Errorf("r1.txt on b's plan branch = %q", got)
	}
}
