package cli

import (
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// TestDemoSettlesBehindAStuckDependency: the demo's run is over when the
// loops left pending all wait on a dependency that is not done while its
// tasks wait for a person (it would otherwise wait for ever); a loop whose
// dependency is done is not settled.
func TestDemoSettlesBehindAStuckDependency(t *testing.T) {
	t.Parallel()
	w := demoWatch{status: map[string]loop.Status{}, deps: map[string][]string{}, met: map[string]bool{}}
	for _, l := range []loop.Loop{
		{ID: "p1", Status: loop.Complete},
		{ID: "t1", Status: loop.NeedsHuman, Parent: "p1"},
		{ID: "p2", Status: loop.Pending, DependsOn: []string{"p1"}},
	} {
		w.see(&l)
	}
	if !w.settled() {
		t.Error("settled() = false with p2 held behind p1, whose task needs you")
	}
	w.see(&loop.Loop{ID: "p1", Status: loop.Complete, SubtreeDoneAt: time.Now()})
	if w.settled() {
		t.Error("settled() = true with p2 free to start")
	}
}
