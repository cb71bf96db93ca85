package gitflow

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestSeveralHomesOneRepository: workers of one etcd store without
// git.remote share one repository from several homes (Repo.Lock set).
// Their merges into one plan branch, from their own integration
// worktrees, all land, while worktrees are added from both homes (under
// the shared worktree lock: a prune from one home must not drop the
// registration the other is adding); a branch still checked out in the worktree of a
// worker that lost its loop is taken over by another home's worktree.
func TestSeveralHomesOneRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := newRepo(t)
	locker := &memLocker{}
	a.Lock = locker
	b, err := Open(a.Root, filepath.Join(t.TempDir(), "home-b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Lock = locker
	if err := a.EnsurePlanBranch(ctx, "loopr/plan"); err != nil {
		t.Fatal(err)
	}
	// Ten loops per home, each with its own branch and file, merged at once.
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		r := a
		if i%2 == 1 {
			r = b
		}
		id := fmt.Sprintf("L%02d", i)
		branch := "loopr/task-" + strings.ToLower(id)
		dir, err := r.AddWorktree(ctx, id, branch, "loopr/plan")
		if err != nil {
			t.Fatal(err)
		}
		write(t, dir, id+".txt", id+"\n")
		if _, err := r.SaveWork(ctx, dir, branch, "loopr: "+id); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { errs <- r.Merge(ctx, branch, "loopr/plan") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Merge: %v", err)
		}
	}
	files := gitT(t, a.Root, "ls-tree", "--name-only", "loopr/plan")
	for i := range 20 {
		if id := fmt.Sprintf("L%02d", i); !strings.Contains(files, id+".txt") {
			t.Errorf("%s.txt is not on loopr/plan:\n%s", id, files)
		}
	}
	if locker.taken["loopr/plan"] != 20 {
		t.Errorf("the shared lock was taken %d times for 20 merges", locker.taken["loopr/plan"])
	}
	if locker.taken[adminLock] < 20 {
		t.Errorf("the shared worktree lock was taken %d times for 20 worktrees added", locker.taken[adminLock])
	}
	// Home a "died" with a loop's branch checked out; home b continues it.
	dirA, err := a.AddWorktree(ctx, "moved", "loopr/moved", "loopr/plan")
	if err != nil {
		t.Fatal(err)
	}
	write(t, dirA, "first.txt", "by a\n")
	if _, err := a.SaveWork(ctx, dirA, "loopr/moved", "loopr: first"); err != nil {
		t.Fatal(err)
	}
	dirB, err := b.AddWorktree(ctx, "moved", "loopr/moved", "loopr/plan")
	if err != nil {
		t.Fatalf("AddWorktree of a branch checked out in another home's worktree: %v", err)
	}
	if got := gitT(t, dirB, "show", "HEAD:first.txt"); got != "by a" {
		t.Errorf("home b's worktree does not continue the branch: first.txt = %q", got)
	}
}
