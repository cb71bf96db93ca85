package gitflow

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestWorktreesFromSeveralHomes: two Repos on one repository (two workers'
// homes; in production two processes) add and remove worktrees at once.
// git reads every worktree's admin directory while it adds one, and
// failed on one the other was creating until the administration took a
// file lock in the common git directory.
func TestWorktreesFromSeveralHomes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := newRepo(t)
	b, err := Open(a.Root, filepath.Join(t.TempDir(), "home-b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const per = 12
	var wg sync.WaitGroup
	errs := make([]error, 2*per)
	for i := range 2 * per {
		r := []*Repo{a, b}[i%2]
		wg.Go(func() {
			id := fmt.Sprintf("w%02d", i)
			if _, err := r.AddWorktree(ctx, id, "loopr/"+id, "HEAD"); err != nil {
				errs[i] = fmt.Errorf("add %s: %w", id, err)
				return
			}
			if _, err := r.AddDetachedWorktree(ctx, id+"-d", "HEAD"); err != nil {
				errs[i] = fmt.Errorf("add %s-d: %w", id, err)
				return
			}
			if err := r.RemoveWorktree(ctx, id+"-d", ""); err != nil {
				errs[i] = fmt.Errorf("remove %s-d: %w", id, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	wts, err := a.worktrees(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(wts), 1+2*per; got != want {
		t.Errorf("%d worktrees registered, want %d (the checkout and one per loop)", got, want)
	}
}
