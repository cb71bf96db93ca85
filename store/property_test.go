package store

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
)

// TestIndexesMatchRecords applies random sequences of Create, Put and Delete
// — several per transaction — and checks after each transaction that every
// index query answers what a plain map of the records says, and that Check
// finds nothing.
func TestIndexesMatchRecords(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 0x100b))
			s := openTest(t)
			pool := make([]string, 16)
			for i := range pool {
				pool[i] = fmt.Sprintf("L%02d", i)
			}
			model := make(map[string]loop.Loop)
			events := make(map[string]int) // events per loop in the store

			for step := range 150 {
				next := maps.Clone(model)
				nextEvents := maps.Clone(events)
				err := s.Update(func(tx *Tx) error {
					for range 1 + rng.IntN(4) {
						id := pool[rng.IntN(len(pool))]
						_, exists := next[id]
						switch op := rng.IntN(10); {
						case op < 2: // delete
							err := tx.Delete(id)
							if !exists {
								if !errors.Is(err, ErrNotFound) {
									return fmt.Errorf("Delete(%s) of a missing loop: error = %v, want ErrNotFound", id, err)
								}
								continue
							}
							if err != nil {
								return err
							}
							delete(next, id)
							delete(nextEvents, id)
						default: // create or put, with a random status and parent
							l := newLoop(id, loop.Statuses[rng.IntN(len(loop.Statuses))], "")
							if p := pool[rng.IntN(len(pool))]; p != id && rng.IntN(3) > 0 {
								l.Parent = p
							}
							l.Iteration = 1 + rng.IntN(3)
							if op < 5 {
								err := tx.Create(l)
								if exists {
									if !errors.Is(err, ErrExists) {
										return fmt.Errorf("Create(%s) of an existing loop: error = %v, want ErrExists", id, err)
									}
									continue
								}
								if err != nil {
									return err
								}
								nextEvents[id]++
							} else if err := tx.Put(l); err != nil {
								return err
							}
							next[id] = l
						}
					}
					// Roll back about one transaction in ten: the model must not move.
					if rng.IntN(10) == 0 {
						return errRollback
					}
					return nil
				})
				switch {
				case errors.Is(err, errRollback):
				case err != nil:
					t.Fatalf("step %d: %v", step, err)
				default:
					model, events = next, nextEvents
				}
				checkAgainstModel(t, s, model, events, pool)
			}
		})
	}
}

var errRollback = errors.New("rollback")

func checkAgainstModel(t *testing.T, s *Store, model map[string]loop.Loop, events map[string]int, pool []string) {
	t.Helper()
	wantCounts := make(map[loop.Status]int)
	wantStatus := make(map[loop.Status][]string)
	wantChildren := make(map[string][]string)
	for _, id := range slices.Sorted(maps.Keys(model)) {
		l := model[id]
		wantCounts[l.Status]++
		wantStatus[l.Status] = append(wantStatus[l.Status], id)
		if l.Parent != "" {
			wantChildren[l.Parent] = append(wantChildren[l.Parent], id)
		}
	}
	err := s.View(func(tx *Tx) error {
		var all []loop.Loop
		if err := tx.ForEach(func(l loop.Loop) bool { all = append(all, l); return true }); err != nil {
			return err
		}
		got := make(map[string]loop.Loop)
		for _, l := range all {
			got[l.ID] = l
		}
		if diff := cmp.Diff(model, got); diff != "" {
			t.Errorf("ForEach() mismatch (-want +got):\n%s", diff)
		}
		if !slices.IsSortedFunc(all, func(a, b loop.Loop) int { return strings.Compare(a.ID, b.ID) }) {
			t.Errorf("ForEach() not in id order: %v", ids(all))
		}
		counts, err := tx.Counts()
		if err != nil {
			return err
		}
		if diff := cmp.Diff(wantCounts, counts); diff != "" {
			t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
		}
		for _, st := range loop.Statuses {
			if diff := cmp.Diff(wantStatus[st], nilIfEmpty(byStatusIDs(t, tx, st))); diff != "" {
				t.Errorf("ByStatus(%s) mismatch (-want +got):\n%s", st, diff)
			}
			if n, _ := tx.Count(st); n != wantCounts[st] {
				t.Errorf("Count(%s) = %d, want %d", st, n, wantCounts[st])
			}
		}
		for _, id := range pool {
			kids, err := tx.Children(id)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(wantChildren[id], nilIfEmpty(ids(kids))); diff != "" {
				t.Errorf("Children(%s) mismatch (-want +got):\n%s", id, diff)
			}
			evs, err := tx.Events(id)
			if err != nil {
				return err
			}
			if len(evs) != events[id] {
				t.Errorf("Events(%s) has %d events, want %d", id, len(evs), events[id])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View() error: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
	mustCheck(t, s)
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
