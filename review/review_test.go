package review_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/review"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeGit is a repository whose branches hold one file, x.go, of ten
// lines; writer says which loop wrote each line ("" for the base).
type fakeGit struct {
	tips   map[string]string // branch → tip
	writer map[int]string
}

func (g *fakeGit) Branch(_ context.Context, id, title string) (string, error) {
	return gitflow.BranchName(id, title), nil
}
func (g *fakeGit) BranchTip(_ context.Context, b string) (string, bool, error) {
	t, ok := g.tips[b]
	return t, ok, nil
}
func (g *fakeGit) FileAt(_ context.Context, _, p string) ([]byte, error) {
	if p == "logo.png" {
		return []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\n"), nil
	}
	if p != "x.go" {
		return nil, fmt.Errorf("%w: %s is not a file", gitflow.ErrNoLine, p)
	}
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return []byte(b.String()), nil
}
func (g *fakeGit) BlameLine(_ context.Context, _, _ string, line int) (string, error) {
	return fmt.Sprintf("%040d", line), nil
}
func (g *fakeGit) LoopOfLine(_ context.Context, commit, _ string) (string, error) {
	var n int
	fmt.Sscanf(commit, "%d", &n)
	return g.writer[n], nil
}

// tree stores a done plan → phase → tasks a, b, c, every subtree marked
// done, and returns the service and the ids.
func tree(t *testing.T) (*control.Service, map[string]loop.Loop) {
	t.Helper()
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	st, err := store.Open(paths.DB(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Default()
	svc := control.New(st, paths, func() *config.Config { return cfg }, func() time.Time { return now })
	mk := func(id, typ, parent string, depth int) loop.Loop {
		return loop.Loop{ID: id, Type: typ, Parent: parent, Depth: depth, Status: loop.Complete, Title: id, Iteration: 1, MaxIterations: 1,
			CreatedAt: now, UpdatedAt: now, FinishedAt: now, SubtreeDoneAt: now}
	}
	ls := map[string]loop.Loop{
		"P": mk("P", loop.Plan, "", 0), "H": mk("H", loop.Phase, "P", 1),
		"A": mk("A", loop.Ralph, "H", 2), "B": mk("B", loop.Ralph, "H", 2), "C": mk("C", loop.Ralph, "H", 2),
	}
	err = st.Update(func(tx *store.Tx) error {
		for _, id := range []string{"P", "H", "A", "B", "C"} {
			if err := tx.Create(ls[id]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc, ls
}

func TestAddRoutesByBlame(t *testing.T) {
	t.Parallel()
	svc, ls := tree(t)
	g := &fakeGit{tips: map[string]string{gitflow.BranchName("P", "P"): strings.Repeat("a", 40)}, writer: map[int]string{3: "A", 5: "B", 7: "C"}}
	c, err := review.Add(context.Background(), svc, g, "P", api.CommentRequest{Path: "x.go", Line: 5, Text: "  use a constant  "})
	if err != nil {
		t.Fatalf("Add(P, x.go:5) = %v", err)
	}
	if c.Loop != "B" || c.On != "P" || c.Seq != 1 || c.Text != "use a constant" || c.State != "sent" || c.Status != loop.Pending {
		t.Errorf("Add(P, x.go:5) = %+v; want loop B, on P, seq 1, sent, pending", c)
	}
	if !strings.Contains(c.Context, "> 5 | line 5") || !strings.Contains(c.Context, "  2 | line 2") || strings.Contains(c.Context, "line 9") {
		t.Errorf("context = %q; want lines 2-8 with 5 marked", c.Context)
	}
	for id, want := range map[string]loop.Status{"A": loop.Complete, "B": loop.Pending, "C": loop.Complete, "P": loop.Complete, "H": loop.Complete} {
		got, err := svc.Get(id)
		if err != nil || got.Status != want {
			t.Errorf("loop %s = %s, %v; want %s", id, got.Status, err, want)
		}
		if done := !got.SubtreeDoneAt.IsZero(); done != (id == "A" || id == "C") {
			t.Errorf("loop %s subtree_done_at = %v; want set only on A and C (B re-opened, its ancestors not done)", id, got.SubtreeDoneAt)
		}
	}
	b, _ := svc.Get("B")
	if b.Iteration != ls["B"].Iteration+1 || len(b.PendingComments()) != 1 || b.MaxIterations < b.Iteration {
		t.Errorf("B = iteration %d of %d, %d comments waiting; want iteration 2 with room and 1 comment", b.Iteration, b.MaxIterations, len(b.PendingComments()))
	}
	list, err := review.List(svc, "P")
	if err != nil || len(list) != 1 || list[0].Loop != "B" || list[0].Path != "x.go" || list[0].Line != 5 {
		t.Errorf("List(P) = %+v, %v; want the one comment on B", list, err)
	}
}

func TestAddRefuses(t *testing.T) {
	t.Parallel()
	svc, _ := tree(t)
	g := &fakeGit{tips: map[string]string{gitflow.BranchName("P", "P"): strings.Repeat("a", 40)}, writer: map[int]string{3: "A", 4: "ZZ"}}
	if err := svc.Store.Update(func(tx *store.Tx) error {
		c, err := tx.Get("C")
		if err != nil {
			return err
		}
		c.Status = loop.Cancelled
		return tx.Put(c)
	}); err != nil {
		t.Fatal(err)
	}
	g.writer[6] = "C"
	for _, tt := range []struct {
		name string
		id   string
		req  api.CommentRequest
		want string
	}{
		{"past the end", "P", api.CommentRequest{Path: "x.go", Line: 11, Text: "t"}, "x.go has 10 lines"},
		{"no such file", "P", api.CommentRequest{Path: "y.go", Line: 1, Text: "t"}, "y.go is not a file"},
		{"the base's line", "P", api.CommentRequest{Path: "x.go", Line: 1, Text: "t"}, "commit 000000000000, which no loop made"},
		{"a loop of no tree", "P", api.CommentRequest{Path: "x.go", Line: 4, Text: "t"}, "of loop ZZ"},
		{"empty text", "P", api.CommentRequest{Path: "x.go", Line: 3, Text: " "}, "text: required"},
		{"line 0", "P", api.CommentRequest{Path: "x.go", Line: 0, Text: "t"}, "lines count from 1"},
		{"a binary file", "P", api.CommentRequest{Path: "logo.png", Line: 1, Text: "t"}, "logo.png is a binary file"},
	} {
		_, err := review.Add(context.Background(), svc, g, tt.id, tt.req)
		if err == nil || !control.IsUsage(err) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Add() = %v; want a usage error containing %q", tt.name, err, tt.want)
		}
	}
	// A cancelled loop cannot be re-opened: a conflict, not a usage error.
	_, err := review.Add(context.Background(), svc, g, "P", api.CommentRequest{Path: "x.go", Line: 6, Text: "t"})
	var te *loop.TransitionError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "cannot re-open") {
		t.Errorf("Add(on a cancelled loop's line) = %v; want a *loop.TransitionError saying it cannot re-open", err)
	}
	if _, err := review.Add(context.Background(), svc, nil, "P", api.CommentRequest{Path: "x.go", Line: 3, Text: "t"}); !control.IsUsage(err) {
		t.Errorf("Add(no git) = %v; want a usage error", err)
	}
}

// TestAddWaitsOrSendsBack: a comment on a task goes to that task; a
// running one keeps running with the comment waiting, one awaiting review
// goes back to pending at its next iteration.
func TestAddWaitsOrSendsBack(t *testing.T) {
	t.Parallel()
	svc, _ := tree(t)
	g := &fakeGit{tips: map[string]string{gitflow.BranchName("A", "A"): strings.Repeat("b", 40)}}
	for _, tt := range []struct {
		from, want loop.Status
		iteration  int
	}{{loop.Running, loop.Running, 1}, {loop.AwaitingReview, loop.Pending, 2}} {
		if err := svc.Store.Update(func(tx *store.Tx) error {
			a, err := tx.Get("A")
			if err != nil {
				return err
			}
			a.Status, a.Iteration, a.Comments = tt.from, 1, nil
			return tx.Put(a)
		}); err != nil {
			t.Fatal(err)
		}
		c, err := review.Add(context.Background(), svc, g, "A", api.CommentRequest{Path: "x.go", Line: 2, Text: "t"})
		if err != nil || c.Loop != "A" || c.On != "" || c.Status != tt.want {
			t.Fatalf("Add(A %s) = %+v, %v; want loop A %s", tt.from, c, err, tt.want)
		}
		a, _ := svc.Get("A")
		if a.Iteration != tt.iteration || len(a.PendingComments()) != 1 {
			t.Errorf("A from %s: iteration %d, %d comments waiting; want %d and 1", tt.from, a.Iteration, len(a.PendingComments()), tt.iteration)
		}
	}
}

// TestAddBranchGone: a loop whose recorded branch was deleted (a plan
// after land and git branch -D) is refused saying the branch is gone, not
// that it has none yet.
func TestAddBranchGone(t *testing.T) {
	t.Parallel()
	svc, _ := tree(t)
	if err := svc.Store.Update(func(tx *store.Tx) error {
		p, err := tx.Get("P")
		if err != nil {
			return err
		}
		p.Branch = "loopr/p-deleted"
		return tx.Put(p)
	}); err != nil {
		t.Fatal(err)
	}
	_, err := review.Add(context.Background(), svc, &fakeGit{}, "P", api.CommentRequest{Path: "x.go", Line: 3, Text: "t"})
	if !control.IsUsage(err) || !strings.Contains(fmt.Sprint(err), "loopr/p-deleted is gone") || strings.Contains(fmt.Sprint(err), "yet") {
		t.Errorf("Add(plan whose branch was deleted) = %v; want a usage error saying loopr/p-deleted is gone", err)
	}
}
