package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
)

// TestFollowSeesEveryCommitInOrder: concurrent Updates and Batches (some
// rolled back, some batched fns failing and re-run alone) each bump one
// shared counter record and write a record of their own; the follower must
// see the counter strictly increase by one per commit, never a rolled-back
// write, and end with exactly the store's records.
func TestFollowSeesEveryCommitInOrder(t *testing.T) {
	t.Parallel()
	followEveryCommitInOrder(t, openTest(t))
}

// followEveryCommitInOrder is TestFollowSeesEveryCommitInOrder on any
// backend (etcd_test.go runs it on etcd).
func followEveryCommitInOrder(t *testing.T, s *Store) {
	mustUpdate(t, s, func(tx *Tx) error { return tx.Create(newLoop("counter", loop.Pending, "")) })

	var mu sync.Mutex
	model := map[string]loop.Loop{}
	last := 0
	var problems []string
	err := s.Follow(func(tx *Tx) error {
		return tx.ForEach(func(l loop.Loop) bool { model[l.ID] = l; last = l.Iteration; return true })
	}, func(c Commit) {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range c.Changes {
			if ch.Deleted {
				delete(model, ch.ID)
				continue
			}
			if ch.ID == "counter" {
				if ch.Loop.Iteration != last+1 {
					problems = append(problems, fmt.Sprintf("counter %d after %d", ch.Loop.Iteration, last))
				}
				last = ch.Loop.Iteration
			}
			model[ch.ID] = ch.Loop
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	bump := func(tx *Tx, own string) error {
		c, err := tx.Get("counter")
		if err != nil {
			return err
		}
		c.Iteration++
		if err := tx.Put(c); err != nil {
			return err
		}
		if own == "" {
			return nil
		}
		if tx.Exists(own) {
			return tx.Delete(own)
		}
		return tx.Create(newLoop(own, loop.Pending, ""))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				own := fmt.Sprintf("g%d-%d", g, i%5)
				var err error
				switch i % 4 {
				case 0: // a rollback: nothing may reach the follower
					err = s.Update(func(tx *Tx) error {
						if err := bump(tx, own); err != nil {
							return err
						}
						return errors.New("roll back")
					})
					if err == nil || err.Error() != "roll back" {
						t.Errorf("rolled-back Update() error = %v", err)
					}
					continue
				case 1:
					err = s.Update(func(tx *Tx) error { return bump(tx, own) })
				case 2: // a batched fn that fails once it wrote: re-run alone
					err = s.Batch(func(tx *Tx) error {
						if err := bump(tx, ""); err != nil {
							return err
						}
						return fmt.Errorf("no")
					})
					if err == nil || err.Error() != "no" {
						t.Errorf("failing Batch() error = %v", err)
					}
					continue
				default:
					err = s.Batch(func(tx *Tx) error { return bump(tx, own) })
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()

	want := map[string]loop.Loop{}
	s.View(func(tx *Tx) error {
		return tx.ForEach(func(l loop.Loop) bool { want[l.ID] = l; return true })
	})
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if diff := cmp.Diff(want, model); diff != "" {
		t.Errorf("follower's records differ from the store's (-store +follower):\n%s", diff)
	}
	if want := 1 + 8*20; last != want {
		t.Errorf("counter = %d, want %d (one per committed write)", last, want)
	}
}
