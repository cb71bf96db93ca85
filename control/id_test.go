package control

import (
	"slices"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

func TestNewIDSortsByCreation(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 1000 {
		ids = append(ids, NewID(t0.Add(time.Duration(i/10)*time.Millisecond)))
	}
	if !slices.IsSorted(ids) {
		t.Error("NewID values do not sort by creation")
	}
	for _, id := range ids {
		if !loop.ValidID(id) {
			t.Fatalf("ValidID(%q) = false", id)
		}
	}
}

// TestNewIDIncreasesWhenTheClockGoesBack: two clocks interleaving (two
// daemons in one test process, a fake clock beside the real one) never
// make a later id sort before an earlier one.
func TestNewIDIncreasesWhenTheClockGoesBack(t *testing.T) {
	t0 := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 200 {
		at := t0
		if i%2 == 1 {
			at = t0.Add(time.Hour) // the other clock
		}
		ids = append(ids, NewID(at))
	}
	if !slices.IsSorted(ids) {
		t.Error("NewID values do not sort in the order they were made")
	}
}
