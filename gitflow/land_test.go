package gitflow

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// landRepo is newRepo with a branch loopr/p that changes README.md and
// adds new.txt on top of main.
func landRepo(t *testing.T) *Repo {
	t.Helper()
	r := newRepo(t)
	gitT(t, r.Root, "checkout", "-q", "-b", "loopr/p")
	write(t, r.Root, "README.md", "hello\nfrom the plan\n")
	write(t, r.Root, "new.txt", "new\n")
	gitT(t, r.Root, "add", "-A")
	gitT(t, r.Root, "commit", "-q", "-m", "plan work")
	gitT(t, r.Root, "checkout", "-q", "main")
	return r
}

// TestPrepareLand: a fast forward names the commits and files, the user's
// uncommitted changes and those among the files; main moved without
// conflict is a merge; with a conflict the files are named.
func TestPrepareLand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := landRepo(t)
	write(t, r.Root, "shared.txt", "mine\n")   // unrelated
	write(t, r.Root, "new.txt", "untracked\n") // in the way
	l, err := r.PrepareLand(ctx, "loopr/p", "refs/heads/loopr/p", "main", "m", true)
	if err != nil {
		t.Fatal(err)
	}
	want := Landing{Branch: "loopr/p", Into: "main", From: l.From, Onto: l.Onto, Mode: landFF, Result: l.From,
		Commits: l.Commits, CommitCount: 1, Files: []string{"README.md", "new.txt"}, Checkout: l.Checkout,
		Dirty: []string{"new.txt", "shared.txt"}, Touched: []string{"new.txt"}}
	if diff := cmp.Diff(want, l); diff != "" || len(l.Commits) != 1 || l.Checkout == "" {
		t.Errorf("PrepareLand(ff) mismatch (-want +got):\n%s", diff)
	}
	os.Remove(filepath.Join(r.Root, "new.txt"))
	gitT(t, r.Root, "checkout", "-q", "--", "shared.txt")

	write(t, r.Root, "other.txt", "main moved\n")
	gitT(t, r.Root, "add", "-A")
	gitT(t, r.Root, "commit", "-q", "-m", "main moved")
	l, err = r.PrepareLand(ctx, "loopr/p", "refs/heads/loopr/p", "main", "land it", false)
	if err != nil || l.Mode != landMerge || l.Result == "" || len(l.Conflicts) > 0 {
		t.Fatalf("PrepareLand(merge) = %+v, %v; want a merge commit", l, err)
	}
	if got := gitT(t, r.Root, "rev-list", "--parents", "-n", "1", l.Result); got != l.Result+" "+l.Onto+" "+l.From {
		t.Errorf("merge commit parents: %s; want %s then %s", got, l.Onto, l.From)
	}
	if diff := cmp.Diff([]string{"README.md", "new.txt"}, l.Files); diff != "" {
		t.Errorf("merge files mismatch (-want +got):\n%s", diff)
	}

	write(t, r.Root, "README.md", "rewritten on main\n")
	gitT(t, r.Root, "commit", "-q", "-am", "conflicting")
	l, err = r.PrepareLand(ctx, "loopr/p", "refs/heads/loopr/p", "main", "m", true)
	if err != nil || l.Mode != landMerge || !cmp.Equal(l.Conflicts, []string{"README.md"}) {
		t.Errorf("PrepareLand(conflict) = %+v, %v; want README.md in conflict", l, err)
	}
}

// TestMoveBaseGitRefusesOverwrite: should a change to a file the landing
// changes appear after PrepareLand, git itself refuses the fast forward
// in the checkout and the change is kept; the base branch elsewhere moves
// by update-ref, guarded by its old value.
func TestMoveBaseGitRefusesOverwrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := landRepo(t)
	l, err := r.PrepareLand(ctx, "loopr/p", "refs/heads/loopr/p", "main", "m", false)
	if err != nil || len(l.Touched) > 0 {
		t.Fatalf("PrepareLand() = %+v, %v", l, err)
	}
	write(t, r.Root, "README.md", "mine\n")
	if err := r.MoveBase(ctx, l); err == nil {
		t.Fatal("MoveBase() over an uncommitted change to README.md = nil, want git's refusal")
	}
	if got := gitT(t, r.Root, "rev-parse", "main"); got != l.Onto {
		t.Errorf("main = %s after a refused fast forward, want %s", got, l.Onto)
	}
	if b, _ := os.ReadFile(filepath.Join(r.Root, "README.md")); string(b) != "mine\n" {
		t.Errorf("README.md = %q, want the uncommitted change kept", b)
	}

	gitT(t, r.Root, "checkout", "-q", "--", "README.md")
	gitT(t, r.Root, "checkout", "-q", "--detach")
	l.Checkout = ""
	gitT(t, r.Root, "update-ref", "refs/heads/main", l.From) // someone moved main meanwhile
	if err := r.MoveBase(ctx, l); !errors.Is(err, ErrLandMoved) {
		t.Errorf("MoveBase(main moved) = %v, want ErrLandMoved", err)
	}
	gitT(t, r.Root, "update-ref", "refs/heads/main", l.Onto)
	if err := r.MoveBase(ctx, l); err != nil {
		t.Fatalf("MoveBase(not checked out) = %v", err)
	}
	if got := gitT(t, r.Root, "rev-parse", "main"); got != l.Result {
		t.Errorf("main = %s, want %s", got, l.Result)
	}
}

// TestPrepareLandRebasing: while the user rebases main (its HEAD detached,
// so main is "checked out nowhere"), moving main would leave the rebase
// unable to finish; PrepareLand says a rebase of main is in progress and
// where, in a linked worktree too.
func TestPrepareLandRebasing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := landRepo(t)
	other := filepath.Join(t.TempDir(), "other")
	gitT(t, r.Root, "checkout", "-q", "--detach")
	gitT(t, r.Root, "worktree", "add", "-q", other, "main")
	for _, f := range []string{"a.txt", "b.txt"} {
		write(t, other, f, f+"\n")
		gitT(t, other, "add", f)
		gitT(t, other, "commit", "-q", "-m", f)
	}
	l, err := r.PrepareLand(ctx, "loopr/p", "refs/heads/loopr/p", "main", "m", true)
	if err != nil || l.Busy != "" || l.Checkout != other {
		t.Fatalf("PrepareLand(main checked out in %s) = %+v, %v; want it there, not busy", other, l, err)
	}
	cmd := exec.Command("git", "-C", other, "-c", "user.name=T", "-c", "user.email=t@example.com", "rebase", "-q", "-i", "HEAD~2")
	cmd.Env = append(os.Environ(), "GIT_SEQUENCE_EDITOR=sed -i s/^pick/edit/")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git rebase -i: %v\n%s", err, out)
	}
	l, err = r.PrepareLand(ctx, "loopr/p", "refs/heads/loopr/p", "main", "m", true)
	if err != nil || !strings.Contains(l.Busy, "rebase") || !strings.Contains(l.Busy, other) {
		t.Errorf("PrepareLand(main being rebased in %s) = busy %q, %v; want a rebase there named", other, l.Busy, err)
	}
}
