package control_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// treeStore holds two trees: "big" (a complete plan, four pending tasks, a
// running one 2 minutes in and a merging one) and "small" (a complete
// plan, one pending task), both created an hour before now, small a
// minute after big.
func treeStore(t *testing.T, yml string) *control.Service {
	t.Helper()
	svc, _ := policyService(t, yml)
	mk := func(id, typ, parent string, st loop.Status, at time.Time) loop.Loop {
		depth := 0
		if parent != "" {
			depth = 1
		}
		return loop.Loop{ID: id, Type: typ, Status: st, Parent: parent, Depth: depth, Title: id, Iteration: 1,
			MaxIterations: 3, CreatedAt: at, UpdatedAt: at}
	}
	t0 := now.Add(-time.Hour)
	loops := []loop.Loop{
		mk("big", loop.Plan, "", loop.Complete, t0),
		mk("small", loop.Plan, "", loop.Complete, t0.Add(time.Minute)),
		mk("s1", loop.Ralph, "small", loop.Pending, t0.Add(2*time.Minute)),
		mk("b-run", loop.Ralph, "big", loop.Running, t0),
		mk("b-merge", loop.Ralph, "big", loop.Merging, t0),
	}
	loops[3].StartedAt = now.Add(-2 * time.Minute)
	for _, id := range []string{"b1", "b2", "b3", "b4"} {
		loops = append(loops, mk(id, loop.Ralph, "big", loop.Pending, t0.Add(time.Second)))
	}
	if _, err := svc.Store.Import(loops); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestSnapshotTrees: with the tree term on (the default) the snapshot
// carries each waiting tree's work left — every unfinished loop of it,
// estimated by the durations learned from finished iterations with
// fairness off — and the same from the store and from the daemon's index.
func TestSnapshotTrees(t *testing.T) {
	t.Parallel()
	svc := treeStore(t, "")
	// Learned: ralph iterations take 10 minutes (the first observation
	// is taken as it is).
	done := loop.Loop{ID: "gone", Type: loop.Ralph}
	if err := svc.Observe(done, 10*time.Minute, now); err != nil {
		t.Fatal(err)
	}
	var d scheduler.Durations
	if err := svc.Store.View(func(tx *store.Tx) error { _, err := tx.Meta(control.DurationsKey, &d); return err }); err != nil {
		t.Fatal(err)
	}
	if d[loop.Ralph] != 600 {
		t.Fatalf("learned durations %v with fairness off, want ralph 600", d)
	}
	t0 := now.Add(-time.Hour)
	want := map[string]scheduler.TreeWork{
		// 4 pending + merging 600 each, running 600 − 120.
		"big":   {Left: 5*600 + 480, Submitted: t0},
		"small": {Left: 600, Submitted: t0.Add(time.Minute)},
	}
	fromStore, _, err := svc.Plan(now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, fromStore.Trees); diff != "" {
		t.Errorf("store snapshot Trees mismatch (-want +got)\n%s", diff)
	}
	if err := svc.EnableIndex(); err != nil {
		t.Fatal(err)
	}
	fromIndex, dec, err := svc.Plan(now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, fromIndex.Trees, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("index snapshot Trees mismatch (-want +got)\n%s", diff)
	}
	// The small tree's task goes first: tree boost 20 against
	// round(20 × 600 ÷ 3480) = 3; tree ages 59 and 60 minutes.
	if len(dec.Rows) == 0 || dec.Rows[0].Loop.ID != "s1" {
		t.Fatalf("first row %v, want s1 (the smaller tree)", dec.Rows)
	}
	if s := dec.Rows[0].Score; s.TreeBoost != 20 || s.TreeAgeBoost != 59 {
		t.Errorf("s1 score %+v: want tree boost 20, tree age 59", s)
	}
	tick, err := svc.Decide(now)
	if err != nil || len(tick.Start) == 0 || tick.Start[0] != "s1" || !tick.Fast {
		t.Errorf("Decide = %+v, %v; want s1 first by the fast walk", tick, err)
	}
}

// TestWhyNamesTheTreeTerm: `loopr why` on a task of the big tree says the
// tree term put the small tree's task first, and spells out its terms.
func TestWhyNamesTheTreeTerm(t *testing.T) {
	t.Parallel()
	svc := treeStore(t, "")
	w, err := svc.Why("b1", now)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing learned yet: ralph's default cost, 60 s, for each of big's
	// five, and a tenth for the running one already past it.
	for _, want := range []string{"+ tree 4 (least left 1m ÷ this tree's 5m × 20)", "+ tree age 60 (60 min × 1, max 960)"} {
		if !strings.Contains(w.Formula, want) {
			t.Errorf("why formula %q lacks %q", w.Formula, want)
		}
	}
	if want := `the tree term put 1 loop of other trees first: s1 "s1" (tree small: 1m left, tree +20, tree age +59) (this tree big: 5m left, tree +4, tree age +60)`; w.Tree != want {
		t.Errorf("why tree = %q, want %q", w.Tree, want)
	}
	if w.Row.TreeBoost == 0 || w.Row.TreeLeft == 0 {
		t.Errorf("why row %+v: no tree term", w.Row)
	}
	off := treeStore(t, "scheduler: {priority: {tree_boost_max: 0, tree_age_boost_max: 0}}\n")
	if w, err := off.Why("b1", now); err != nil || w.Tree != "" || strings.Contains(w.Formula, "tree") {
		t.Errorf("tree term off: why %q / %q, %v; want no tree term", w.Formula, w.Tree, err)
	}
}
