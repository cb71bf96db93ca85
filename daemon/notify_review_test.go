package daemon

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestNoteForReview: a task that starts awaiting review is a note for
// notify.command, with loopr approve as its action.
func TestNoteForReview(t *testing.T) {
	t.Parallel()
	st, err := store.Open(filepath.Join(t.TempDir(), "loopr.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Unix(1e9, 0).UTC()
	l := loop.Loop{ID: "T1", Type: loop.Ralph, Status: loop.AwaitingReview, Title: "Add it", Iteration: 1, MaxIterations: 3, CreatedAt: now, UpdatedAt: now}
	var n note
	var ok bool
	err = st.Update(func(tx *store.Tx) error {
		if err := tx.Create(l); err != nil {
			return err
		}
		n, ok = noteFor(tx, loop.Event{Kind: loop.EventTransition, Loop: l.ID, From: loop.Running, To: loop.AwaitingReview, Message: "iteration 1 passed"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ok || n.Event != "awaiting_review" || n.Action != "loopr approve T1" || n.Title != "Add it" {
		t.Errorf("noteFor(→ awaiting_review) = %+v, %v; want an awaiting_review note with action loopr approve T1", n, ok)
	}
}
