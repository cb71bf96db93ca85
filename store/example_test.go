package store_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// A status change is one Update: the record and the event that explains it
// commit together or not at all.
func ExampleStore_Update() {
	dir, err := os.MkdirTemp("", "loopr-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(filepath.Join(dir, "loopr.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	err = s.Update(func(tx *store.Tx) error {
		return tx.Create(loop.Loop{
			ID: "01PLAN", Type: loop.Plan, Status: loop.Pending, Title: "add dark mode",
			Iteration: 1, MaxIterations: 3, CreatedAt: now, UpdatedAt: now,
		})
	})
	if err != nil {
		log.Fatal(err)
	}

	err = s.Update(func(tx *store.Tx) error {
		before, err := tx.Get("01PLAN")
		if err != nil {
			return err
		}
		after, err := loop.Transition(before, loop.Running, now.Add(time.Second))
		if err != nil {
			return err
		}
		if err := tx.Put(after); err != nil {
			return err
		}
		_, err = tx.AppendEvent(loop.TransitionEvent(before, after, "picked by the scheduler"))
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	s.View(func(tx *store.Tx) error {
		tx.ByStatus(loop.Running, func(l loop.Loop) bool {
			fmt.Println("running:", l.ID, l.Title)
			return true
		})
		events, err := tx.Events("01PLAN")
		for _, ev := range events {
			fmt.Printf("event %d: %s to %s", ev.Seq, ev.Kind, ev.To)
			if ev.Message != "" {
				fmt.Printf(" (%s)", ev.Message)
			}
			fmt.Println()
		}
		return err
	})
	counts, _ := s.Counts()
	fmt.Println(counts)
	// Output:
	// running: 01PLAN add dark mode
	// event 1: created to pending
	// event 2: transition to running (picked by the scheduler)
	// map[running:1]
}

// Export and ReadJSONL + Import move records between stores as JSON Lines.
func ExampleReadJSONL() {
	in := `{"id":"a","type":"ralph","status":"pending","depth":0,"iteration":1,"max_iterations":3,"created_at":"2025-06-01T12:00:00Z","updated_at":"2025-06-01T12:00:00Z"}

{"id":"b","type":"ralph","status":"bogus","depth":0,"iteration":1,"max_iterations":3,"created_at":"2025-06-01T12:00:00Z","updated_at":"2025-06-01T12:00:00Z"}
`
	_, err := store.ReadJSONL(strings.NewReader(in))
	fmt.Println(err)
	// Output:
	// line 3: status "bogus": unknown status
}
