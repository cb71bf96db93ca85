package tui

import (
	"testing"

	"github.com/loopr-dev/loopr/api"
)

// BenchmarkViewSmall renders one frame of a small workspace (the first
// plan's tree, 1,005 loops, opened the same way) at the same 200×50: the
// baseline BenchmarkView's 10,050 loops are set against in one run. A
// frame draws only what fits on the screen, so the two should cost about
// the same.
func BenchmarkViewSmall(b *testing.B) {
	fc := newFake()
	st := fixtureStatus()
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Loops: bigTree()[:1005], Status: &st}
	m := loaded(b, fc, 200, 50)
	m.cursor = len(m.rows) / 2
	m.syncSelection()
	b.ReportAllocs()
	for b.Loop() {
		_ = m.View()
	}
}
