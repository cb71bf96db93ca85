package loopmgr

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestSweepLosersAtStart: a crash after a best-of-N decision committed but
// before the losers' branches went leaves those branches; the next start
// removes them, and only them: the winner's and a cancelled loop's of its
// own stay.
func TestSweepLosersAtStart(t *testing.T) {
	h := newHarness(t, nil, nil)
	ws := h.home
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	g, err := gitflow.Open(ws, filepath.Join(ws, ".loopr"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.mgr.o.Git = g
	winner := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", Title: "task [1/2]"})
	loser := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", Title: "task [2/2]"})
	own := h.create(api.CreateRequest{Type: loop.Ralph, Task: "x", Title: "cancelled by hand"})
	err = h.st.Update(func(tx *store.Tx) error {
		for _, l := range []loop.Loop{winner, loser, own} {
			cur, err := tx.Get(l.ID)
			if err != nil {
				return err
			}
			if l.ID != own.ID {
				cur.Fanout = &loop.Fanout{Group: winner.ID, Index: 1, Of: 2, Winner: winner.ID}
			}
			if l.ID != winner.ID {
				cur.Status = loop.Cancelled
			}
			if err := tx.Put(cur); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	branches := map[string]string{}
	for _, l := range []loop.Loop{winner, loser, own} {
		b := gitflow.BranchName(l.ID, l.Title)
		branches[l.ID] = b
		if out, err := exec.Command("git", "-C", ws, "branch", b).CombinedOutput(); err != nil {
			t.Fatalf("git branch %s: %v\n%s", b, err, out)
		}
	}
	h.mgr.sweepLosers(context.Background())
	ours, err := g.OurBranches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ours[branches[loser.ID]] {
		t.Errorf("the losing candidate's branch %s survived the sweep", branches[loser.ID])
	}
	for _, id := range []string{winner.ID, own.ID} {
		if !ours[branches[id]] {
			t.Errorf("the sweep removed %s, which is not a loser's", branches[id])
		}
	}
}
