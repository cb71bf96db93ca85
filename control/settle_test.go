package control_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// tree stores a plan P → spec S → phase F → tasks with the given statuses
// (T1, T2, …); plan, spec and phase are complete, none marked done.
func tree(t *testing.T, svc *control.Service, tasks ...loop.Status) {
	t.Helper()
	ls := []loop.Loop{rec("P", "", loop.Complete, time.Hour), rec("S", "P", loop.Complete, time.Hour), rec("F", "S", loop.Complete, time.Hour)}
	ls[0].Type, ls[1].Type, ls[2].Type = loop.Plan, loop.Spec, loop.Phase
	for i, st := range tasks {
		ls = append(ls, rec("T"+string(rune('1'+i)), "F", st, time.Minute))
	}
	if err := svc.Store.Update(func(tx *store.Tx) error {
		for _, l := range ls {
			if err := tx.Create(l); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// treeEvents returns the messages of P's tree_complete events.
func treeEvents(t *testing.T, svc *control.Service) []string {
	t.Helper()
	var out []string
	err := svc.Store.View(func(tx *store.Tx) error {
		evs, err := tx.Events("P")
		for _, ev := range evs {
			if ev.Kind == loop.EventTreeComplete {
				out = append(out, ev.Message)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// complete moves task id to complete and settles it, as a pass does.
func complete(t *testing.T, svc *control.Service, id string, git bool) {
	t.Helper()
	err := svc.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		if err := control.Move(tx, l, loop.Complete, now, "passed", nil); err != nil {
			return err
		}
		return control.Settle(tx, id, now, git)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func doneAt(t *testing.T, svc *control.Service, ids ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, id := range ids {
		l, err := svc.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = !l.SubtreeDoneAt.IsZero()
	}
	return out
}

// TestSettleMarksSubtreesAndFiresTreeCompleteOnce: the last task to
// complete marks its phase, spec and plan done and fires tree_complete,
// with the branch; the first marks only itself; settling again fires
// nothing.
func TestSettleMarksSubtreesAndFiresTreeCompleteOnce(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	tree(t, svc, loop.Running, loop.Running)
	complete(t, svc, "T1", true)
	if diff := cmp.Diff(map[string]bool{"P": false, "S": false, "F": false, "T1": true, "T2": false}, doneAt(t, svc, "P", "S", "F", "T1", "T2")); diff != "" {
		t.Errorf("after T1: subtree done (-want +got):\n%s", diff)
	}
	if evs := treeEvents(t, svc); len(evs) != 0 {
		t.Fatalf("tree_complete after the first task: %q", evs)
	}
	complete(t, svc, "T2", true)
	if diff := cmp.Diff(map[string]bool{"P": true, "S": true, "F": true, "T1": true, "T2": true}, doneAt(t, svc, "P", "S", "F", "T1", "T2")); diff != "" {
		t.Errorf("after T2: subtree done (-want +got):\n%s", diff)
	}
	want := []string{"plan P done: all 5 loops of its tree are complete; branch loopr/p-P is ready to land: loopr land P"}
	if diff := cmp.Diff(want, treeEvents(t, svc)); diff != "" {
		t.Errorf("tree_complete (-want +got):\n%s", diff)
	}
	if err := svc.Store.Update(func(tx *store.Tx) error { return control.Settle(tx, "T2", now, true) }); err != nil {
		t.Fatal(err)
	}
	if n := len(treeEvents(t, svc)); n != 1 {
		t.Errorf("%d tree_complete events after settling again, want 1", n)
	}
}

// TestCancelFinishesTree: cancelling the last live loop of a tree fires
// tree_complete naming it (issue 21: "tree 9/11 done" forever before); a
// sibling completed before subtree_done_at existed (no mark) is looked
// into. Cancelling the plan itself fires nothing: a given-up tree is not
// done.
func TestCancelFinishesTree(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	tree(t, svc, loop.Complete, loop.Running, loop.Failed)
	if _, err := svc.Act("T2", api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	if evs := treeEvents(t, svc); len(evs) != 0 {
		t.Fatalf("tree_complete while T3 is failed: %q", evs)
	}
	if _, err := svc.Act("T3", api.ActionCancel, api.ActionRequest{Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	want := []string{`plan P done: all 6 loops of its tree are complete or cancelled (2 cancelled: T2 "T2", T3 "T3"); branch loopr/p-P is ready to land: loopr land P`}
	if diff := cmp.Diff(want, treeEvents(t, svc)); diff != "" {
		t.Errorf("tree_complete (-want +got):\n%s", diff)
	}
	if got := doneAt(t, svc, "T1", "F", "P"); !got["T1"] || !got["F"] || !got["P"] {
		t.Errorf("subtree done after the cancel: %v, want all", got)
	}

	svc = newService(t, 30)
	tree(t, svc, loop.Running)
	if err := svc.Store.Update(func(tx *store.Tx) error {
		p, err := tx.Get("P")
		if err != nil {
			return err
		}
		p.Status = loop.Running // a plan still at work
		return tx.Put(p)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Act("P", api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	if evs := treeEvents(t, svc); len(evs) != 0 {
		t.Errorf("tree_complete for a cancelled plan: %q", evs)
	}
}

// TestSpawnChildrenOrder: children depend on the siblings their section
// names; without a **Depends on:** line, on the one before them when the
// parent type's children setting is sequential (spec), on none when it is
// parallel (phase).
func TestSpawnChildrenOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, typ, text string
		want            [][]int // each child's dependencies, by section number
	}{
		{"spec: sequential", loop.Spec, "# Spec: s\n## Phases\n### Phase 1: a\n### Phase 2: b\n### Phase 3: c\n", [][]int{nil, {1}, {2}}},
		{"spec: a line decides", loop.Spec, "# Spec: s\n## Phases\n### Phase 1: a\n### Phase 2: b\n**Depends on:** none\n### Phase 3: c\n**Depends on:** 1, b\n", [][]int{nil, nil, {1, 2}}},
		{"phase: parallel", loop.Phase, "# Phase: f\n## Tasks\n### Task 1: a\n### Task 2: b\n### Task 3: c\n**Depends on:** 2\n", [][]int{nil, nil, {2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, 30)
			doc, err := artifact.Parse(tc.typ, []byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			parent := rec("X", "", loop.Complete, time.Hour)
			parent.Type = tc.typ
			var kids []string
			if err := svc.Store.Update(func(tx *store.Tx) error {
				if err := tx.Create(parent); err != nil {
					return err
				}
				kids, err = svc.SpawnChildren(tx, parent, doc, "/a.md", now)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var got [][]int
			for _, id := range kids {
				l, err := svc.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				var nums []int
				for _, d := range l.DependsOn {
					for i, k := range kids {
						if k == d {
							nums = append(nums, i+1)
						}
					}
				}
				got = append(got, nums)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("children's depends_on (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreateAfter: depends_on names existing loops (an unknown id is the
// user's error, naming --after); a loop added below a done subtree makes
// it not done again.
func TestCreateAfter(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	tree(t, svc, loop.Running)
	_, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", DependsOn: []string{"T1", "NOPE"}})
	var ie *control.InputError
	if !errors.As(err, &ie) || ie.Field != "--after" || !strings.Contains(err.Error(), "no loop NOPE") || !control.IsUsage(err) {
		t.Errorf("Create(after NOPE) error = %v, want an --after input error naming it", err)
	}
	l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", DependsOn: []string{"T1", "T1"}})
	if err != nil || !cmp.Equal(l.DependsOn, []string{"T1"}) {
		t.Fatalf("Create(after T1) = %v, %v; want depends_on [T1]", l.DependsOn, err)
	}
	complete(t, svc, "T1", false)
	if got := doneAt(t, svc, "F", "P"); !got["F"] || !got["P"] {
		t.Fatalf("done before the add: %v", got)
	}
	if _, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "one more", Parent: "F"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"T1": true, "F": false, "S": false, "P": false}, doneAt(t, svc, "T1", "F", "S", "P")); diff != "" {
		t.Errorf("after adding below F (-want +got):\n%s", diff)
	}
}

// TestWhyDependsOn: why names the dependencies with their titles, and
// says when a cancelled one counts as done.
func TestWhyDependsOn(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	tree(t, svc, loop.Running, loop.Complete)
	l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "after", DependsOn: []string{"T1", "T2"}})
	if err != nil {
		t.Fatal(err)
	}
	gate := func() api.Gate {
		t.Helper()
		w, err := svc.Why(l.ID, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range w.Gates {
			if g.Code == "depends_on" {
				return g
			}
		}
		t.Fatalf("why has no depends_on gate: %+v", w.Gates)
		return api.Gate{}
	}
	// T2 completed before subtree_done_at existed: Create looked into it.
	if g, want := gate(), (api.Gate{Code: "depends_on", Text: `waits for T1 "T1" (running), T2 "T2" (done)`}); g != want {
		t.Errorf("why gate = %+v, want %+v", g, want)
	}
	if _, err := svc.Act("T1", api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	if g, want := gate(), (api.Gate{Code: "depends_on", OK: true, Text: `after T1 "T1" (cancelled: counts as done), T2 "T2" (done)`}); g != want {
		t.Errorf("why gate = %+v, want %+v", g, want)
	}
}

// TestCreateAfterAncestorRefused: a loop that would wait for its parent or
// a loop above it waits forever (an ancestor is done only once its subtree,
// the new loop included, is): refused as an --after input error. A
// sibling is fine.
func TestCreateAfterAncestorRefused(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	tree(t, svc, loop.Running)
	for _, anc := range []string{"F", "S", "P"} {
		_, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", Parent: "F", DependsOn: []string{anc}})
		var ie *control.InputError
		if !errors.As(err, &ie) || ie.Field != "--after" || !strings.Contains(err.Error(), anc+" is above the new loop") {
			t.Errorf("Create(under F, after %s) error = %v, want an --after input error", anc, err)
		}
	}
	if _, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", Parent: "F", DependsOn: []string{"T1"}}); err != nil {
		t.Errorf("Create(under F, after its sibling T1): %v", err)
	}
}
