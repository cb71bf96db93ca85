package store_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// A follower keeps an in-memory view in step with the store: it loads what
// is there, then hears of every committed change, in commit order, and of
// none that rolled back. The daemon's scheduling index is one.
func ExampleStore_Follow() {
	dir, err := os.MkdirTemp("", "loopr-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "loopr.db"), store.Options{NoSync: true})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	status := map[string]loop.Status{} // the view: every loop's status
	err = s.Follow(func(tx *store.Tx) error {
		return tx.ForEachHead(nil, func(l *loop.Loop) bool { status[l.ID] = l.Status; return true })
	}, func(c store.Commit) {
		for _, ch := range c.Changes {
			if ch.Deleted {
				delete(status, ch.ID)
			} else {
				status[ch.ID] = ch.Loop.Status
			}
		}
	})
	if err != nil {
		log.Fatal(err)
	}

	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	s.Update(func(tx *store.Tx) error {
		return tx.Create(loop.Loop{ID: "01TASK", Type: loop.Ralph, Status: loop.Pending, Title: "fix the build",
			Iteration: 1, MaxIterations: 3, CreatedAt: now, UpdatedAt: now})
	})
	s.Update(func(tx *store.Tx) error { // rolled back: the follower never hears of it
		l, _ := tx.Get("01TASK")
		l.Status = loop.Running
		tx.Put(l)
		return errors.New("changed my mind")
	})
	fmt.Println(status["01TASK"])
	// Output: pending
}
