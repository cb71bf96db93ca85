package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fsyncrate"

	"github.com/loopr-dev/loopr/loop"
)

// orderedSyncRate is this disk's rate of what one bbolt commit must do at
// least: write a page and fsync, then write another page (the meta) and
// fsync, in that order. It is the ceiling of one durable transaction per
// commit: about half the raw rate.
func orderedSyncRate(b *testing.B, dir string, n int) float64 {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "ordered.fsync"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	began := time.Now()
	for i := range n {
		for _, at := range []int64{int64(2+i%62) * 4096, int64(i%2) * 4096} { // data, then meta
			page[0] = byte(i)
			if _, err := f.WriteAt(page, at); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return float64(n) / time.Since(began).Seconds()
}

// seedLoops creates n pending ralph loops and returns their ids.
func seedLoops(b *testing.B, s *Store, n int) []string {
	b.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	ids := make([]string, n)
	err := s.Update(func(tx *Tx) error {
		for i := range ids {
			ids[i] = fmt.Sprintf("L%08d", i)
			l := loop.Loop{ID: ids[i], Type: loop.Ralph, Status: loop.Pending, Title: "t", Iteration: 1,
				MaxIterations: 100, CreatedAt: now, UpdatedAt: now}
			if err := tx.Create(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ids
}

// transition moves a loop pending ⇄ running with its event, as loopmgr does.
func transition(tx *Tx, id string) error {
	l, err := tx.Get(id)
	if err != nil {
		return err
	}
	to := loop.Running
	if l.Status == loop.Running {
		to = loop.Pending
	}
	n, err := loop.Transition(l, to, time.Now().UTC().Truncate(time.Millisecond))
	if err != nil {
		return err
	}
	if err := tx.Put(n); err != nil {
		return err
	}
	_, err = tx.AppendEvent(loop.TransitionEvent(l, n, "bench"))
	return err
}

// BenchmarkDurableTransition: one state transition (record, indexes and
// event) per fsynced bbolt transaction, against the raw fsync rate of the
// same disk measured in the same run. Target: ≥ 80% of raw. Also against
// the two ordered syncs every bbolt commit needs (data, then meta): the
// ceiling of any transaction-per-commit store on bbolt.
func BenchmarkDurableTransition(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "loopr.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := seedLoops(b, s, 1000)
	raw := rawFsyncRate(b, dir, max(b.N, 50))
	ordered := orderedSyncRate(b, dir, max(b.N/2, 25))
	b.ResetTimer()
	began := time.Now()
	for i := range b.N {
		if err := s.Update(func(tx *Tx) error { return transition(tx, ids[i%len(ids)]) }); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(b.N) / time.Since(began).Seconds()
	b.StopTimer()
	b.ReportMetric(rate, "tx/s")
	b.ReportMetric(raw, "fsync/s")
	b.ReportMetric(rate/raw, "x-raw-fsync")
	b.ReportMetric(ordered, "ordered-2sync/s")
	b.ReportMetric(rate/ordered, "x-ordered-2sync")
}

// BenchmarkGroupCommitTransitions: many transitions at once through bbolt's
// Batch (group commit), 64 concurrent writers, against the same raw fsync
// rate. Target: ≥ 10× raw.
func BenchmarkGroupCommitTransitions(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(filepath.Join(dir, "loopr.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := seedLoops(b, s, 4096)
	raw := rawFsyncRate(b, dir, 200)
	const writers = 256
	var next atomic.Int64
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				// Each writer owns the ids ≡ w (mod writers), so no two
				// concurrent transactions in a batch touch the same loop.
				id := ids[(int(i)%(len(ids)/writers))*writers+w]
				if err := s.Batch(func(tx *Tx) error { return transition(tx, id) }); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	rate := float64(b.N) / time.Since(began).Seconds()
	b.StopTimer()
	b.ReportMetric(rate, "tx/s")
	b.ReportMetric(raw, "fsync/s")
	b.ReportMetric(rate/raw, "x-raw-fsync")
}

// rawFsyncRate is this disk's raw write+fsync rate in dir, the same-run baseline.
func rawFsyncRate(b *testing.B, dir string, n int) float64 {
	b.Helper()
	rate, err := fsyncrate.Measure(dir, n)
	if err != nil {
		b.Fatal(err)
	}
	return rate
}

// BenchmarkWriteJSON: `loopr list --json`'s work in the daemon — 20,000
// records (ralphs with ~330-byte tasks, as in internal/daemonbench) from
// the store to JSON, decoded from their binary encoding and encoded from
// loop.Loop's tags by github.com/go-json-experiment/json — per record.
func BenchmarkWriteJSON(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "loopr.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	const n = 20_000
	err = s.Update(func(tx *Tx) error {
		for i := range n {
			l := loop.Loop{ID: fmt.Sprintf("01JRA%021d", i), Type: loop.Ralph, Status: loop.Pending,
				Parent: "01JPH000000000000000000000", Depth: 3, Title: fmt.Sprintf("work item %06d", i),
				Task:      fmt.Sprintf("%0330d", i),
				Iteration: 1, MaxIterations: 10, CreatedAt: now, UpdatedAt: now, Artifact: "specs/phase-0001.md"}
			if err := tx.Put(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	var out countingDiscard
	for b.Loop() {
		out = 0
		if got, err := s.WriteJSON(&out, Filter{}); err != nil || got != n {
			b.Fatalf("WriteJSON() = %d, %v; want %d", got, err, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/loop")
	b.ReportMetric(float64(out)/n, "bytes/loop")
}

// countingDiscard counts what is written to it.
type countingDiscard int

func (c *countingDiscard) Write(p []byte) (int, error) {
	*c += countingDiscard(len(p))
	return len(p), nil
}

// BenchmarkReadyToLandScan: what `loopr status` pays to find the plans
// ready to land among 10 000 complete tasks and 10 complete plans —
// RootsByStatus (peeks each record's parent, decodes the plans) against
// ByStatus (decodes every complete record).
func BenchmarkReadyToLandScan(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "loopr.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	err = s.Update(func(tx *Tx) error {
		for i := range 10_010 {
			l := loop.Loop{ID: fmt.Sprintf("L%08d", i), Type: loop.Ralph, Status: loop.Complete, Title: "a task", Task: "do the thing well",
				Iteration: 2, MaxIterations: 5, CreatedAt: now, UpdatedAt: now, Parent: "L00000000", Branch: "loopr/a-task-x",
				Evidence: []loop.Evidence{{Command: "go test ./...", Where: loop.WhereWorktree}, {Command: "make check", Where: loop.WhereMerge}}}
			if i%1001 == 0 {
				l.Type, l.Parent = loop.Plan, ""
			}
			if err := tx.Create(l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		scan func(*Tx, loop.Status, func(loop.Loop) bool) error
	}{{"RootsByStatus", (*Tx).RootsByStatus}, {"ByStatus", (*Tx).ByStatus}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				n := 0
				s.View(func(tx *Tx) error {
					return bc.scan(tx, loop.Complete, func(l loop.Loop) bool {
						if l.Parent == "" {
							n++
						}
						return true
					})
				})
				if n != 10 {
					b.Fatalf("found %d plans, want 10", n)
				}
			}
		})
	}
}
