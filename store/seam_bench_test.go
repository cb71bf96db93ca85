package store

import (
	"path/filepath"
	"testing"

	"github.com/loopr-dev/loopr/loop"
)

// BenchmarkTransitionCPU: one transition (record, indexes, event) per
// Update without fsync: the store's own CPU cost per transition, which the
// key-value backend seam (kv.go) must not raise beyond noise.
func BenchmarkTransitionCPU(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "loopr.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ids := seedLoops(b, s, 1000)
	b.ResetTimer()
	for i := range b.N {
		if err := s.Update(func(tx *Tx) error { return transition(tx, ids[i%len(ids)]) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForEachHeadCPU: the daemon's index load, 10k records, through
// the seam's cursor.
func BenchmarkForEachHeadCPU(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "loopr.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	seedLoops(b, s, 10000)
	b.ResetTimer()
	for range b.N {
		n := 0
		if err := s.View(func(tx *Tx) error {
			return tx.ForEachHead(nil, func(*loop.Loop) bool { n++; return true })
		}); err != nil {
			b.Fatal(err)
		}
		if n != 10000 {
			b.Fatalf("saw %d loops, want 10000", n)
		}
	}
}
