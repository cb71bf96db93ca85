package mergequeue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// world is a fake plan branch for Drain: the items on it, and which items
// break merge.validate alone, in pairs, or conflict in git.
type world struct {
	tip       []string
	breakers  map[string]bool
	pairs     [][2]string // each passes alone; together they fail
	conflicts [][2]string // a merge of one onto the other conflicts
	tries     [][]string  // the ids of each try, in order
	fail      int         // the try that errors (1-based), 0: none
}

func (w *world) breaks(set []string) bool {
	for _, id := range set {
		if w.breakers[id] {
			return true
		}
	}
	for _, p := range w.pairs {
		if slices.Contains(set, p[0]) && slices.Contains(set, p[1]) {
			return true
		}
	}
	return false
}

func (w *world) conflicts2(a string, with []string) bool {
	for _, c := range w.conflicts {
		if c[0] == a && slices.Contains(with, c[1]) || c[1] == a && slices.Contains(with, c[0]) {
			return true
		}
	}
	return false
}

// try is the fake Try: merge in order (conflicting ones left out),
// validate the tip plus the merged ones, land them when they pass.
func (w *world) try(batch []Item) (Attempt, error) {
	ids := make([]string, len(batch))
	for i, it := range batch {
		ids[i] = it.ID
	}
	w.tries = append(w.tries, ids)
	if w.fail == len(w.tries) {
		return Attempt{}, errors.New("git failed")
	}
	a := Attempt{Failed: map[int]error{}}
	cur := slices.Clone(w.tip)
	for i, id := range ids {
		switch {
		case slices.Contains(w.tip, id):
			a.Already = append(a.Already, i)
		case w.conflicts2(id, cur):
			a.Failed[i] = fmt.Errorf("%s conflicts", id)
		default:
			a.Merged = append(a.Merged, i)
			cur = append(cur, id)
		}
	}
	if len(a.Merged) == 0 {
		return a, nil
	}
	a.Validated = true
	if w.breaks(cur) {
		a.Reason = "validate exited 1"
		return a, nil
	}
	a.Passed, w.tip = true, cur
	return a, nil
}

// record is a Sink that keeps what was settled.
type record struct {
	landed   []string
	rejected map[string]string // id → "conflict" or "breaks"
	order    []string          // every settlement, in order
}

func (r *record) Landed(items []Item, _ Attempt) {
	for _, it := range items {
		r.landed = append(r.landed, it.ID)
		r.order = append(r.order, "+"+it.ID)
	}
}

func (r *record) Rejected(it Item, conflict error, failed *Attempt) {
	if r.rejected == nil {
		r.rejected = map[string]string{}
	}
	why := "breaks"
	if conflict != nil {
		why = "conflict"
	}
	if failed != nil && conflict != nil || failed == nil && conflict == nil {
		why = "bad call"
	}
	r.rejected[it.ID] = why
	r.order = append(r.order, "-"+it.ID)
}

func items(n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{ID: fmt.Sprintf("t%02d", i), Iteration: 1}
	}
	return out
}

func ids(its []Item) []string {
	out := make([]string, len(its))
	for i, it := range its {
		out[i] = it.ID
	}
	return out
}

// TestDrainClean: 20 branches that break nothing land in 3 validation
// runs with batches of 8, in order.
func TestDrainClean(t *testing.T) {
	t.Parallel()
	w, rec := &world{}, &record{}
	st, err := Drain(items(20), 8, w.try, rec)
	if err != nil {
		t.Fatal(err)
	}
	if st.Validations != 3 || st.Landed != 20 || st.Rejected != 0 || st.IsolatedAt != 0 {
		t.Errorf("Drain() = %+v; want 3 validations, 20 landed", st)
	}
	if diff := cmp.Diff(ids(items(20)), rec.landed); diff != "" {
		t.Errorf("landing order mismatch (-want +got):\n%s", diff)
	}
}

// TestDrainOneBreaker: wherever the one breaker is among 20 (batches of
// 8), it is found within 6 validation runs, only it is sent back, and all
// 20 are settled within 7 runs.
func TestDrainOneBreaker(t *testing.T) {
	t.Parallel()
	worst, worstTotal := 0, 0
	for b := range 20 {
		bad := fmt.Sprintf("t%02d", b)
		w, rec := &world{breakers: map[string]bool{bad: true}}, &record{}
		st, err := Drain(items(20), 8, w.try, rec)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{bad: "breaks"}, rec.rejected); diff != "" {
			t.Errorf("breaker %s: rejected mismatch (-want +got):\n%s", bad, diff)
		}
		if len(rec.landed) != 19 || slices.Contains(w.tip, bad) {
			t.Errorf("breaker %s: %d landed, tip holds it: %v", bad, len(rec.landed), slices.Contains(w.tip, bad))
		}
		worst, worstTotal = max(worst, st.IsolatedAt), max(worstTotal, st.Validations)
	}
	if worst > 6 || worstTotal > 7 {
		t.Errorf("a breaker was isolated after %d validation runs at worst (want ≤ 6), all settled after %d (want ≤ 7)", worst, worstTotal)
	}
	t.Logf("one breaker among 20, batch 8: isolated after ≤ %d validation runs, all settled after ≤ %d", worst, worstTotal)
}

// TestDrainTwoBreakersInOneBatch: both are found and sent back; the rest
// of the batch lands.
func TestDrainTwoBreakersInOneBatch(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]int{{0, 1}, {0, 7}, {2, 5}, {6, 7}, {3, 4}} {
		a, b := fmt.Sprintf("t%02d", pair[0]), fmt.Sprintf("t%02d", pair[1])
		w, rec := &world{breakers: map[string]bool{a: true, b: true}}, &record{}
		st, err := Drain(items(8), 8, w.try, rec)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{a: "breaks", b: "breaks"}, rec.rejected); diff != "" {
			t.Errorf("breakers %v: rejected mismatch (-want +got):\n%s", pair, diff)
		}
		if len(rec.landed) != 6 || w.breaks(w.tip) {
			t.Errorf("breakers %v: %d landed (want 6), the tip breaks: %v", pair, len(rec.landed), w.breaks(w.tip))
		}
		if st.Validations > 10 {
			t.Errorf("breakers %v: %d validation runs for 8 branches", pair, st.Validations)
		}
	}
}

// TestDrainSemanticConflict: two branches that pass alone and fail
// together: the later one is sent back, in one batch or in two.
func TestDrainSemanticConflict(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 8} {
		w, rec := &world{pairs: [][2]string{{"t01", "t03"}}}, &record{}
		if _, err := Drain(items(5), n, w.try, rec); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"t03": "breaks"}, rec.rejected); diff != "" {
			t.Errorf("batch %d: rejected mismatch (-want +got):\n%s", n, diff)
		}
		if diff := cmp.Diff([]string{"t00", "t01", "t02", "t04"}, w.tip); diff != "" {
			t.Errorf("batch %d: tip mismatch (-want +got):\n%s", n, diff)
		}
	}
}

// TestDrainConflicts: a branch that conflicts with the tip is sent back at
// once; one that conflicts only with a batch mate waits and is judged
// against the tip that results.
func TestDrainConflicts(t *testing.T) {
	t.Parallel()
	w := &world{tip: []string{"base"}, conflicts: [][2]string{{"base", "t00"}, {"t01", "t02"}}}
	rec := &record{}
	st, err := Drain(items(4), 4, w.try, rec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"t00": "conflict", "t02": "conflict"}, rec.rejected); diff != "" {
		t.Errorf("rejected mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"t00", "t01", "t02", "t03"}, {"t02"}}, w.tries); diff != "" {
		t.Errorf("tries mismatch (-want +got):\n%s", diff)
	}
	if st.Validations != 1 {
		t.Errorf("%d validation runs, want 1 (a conflict costs none)", st.Validations)
	}

	// The batch mate it conflicted with breaks validation: then it lands.
	w = &world{breakers: map[string]bool{"t01": true}, conflicts: [][2]string{{"t01", "t02"}}}
	rec = &record{}
	if _, err := Drain(items(3), 3, w.try, rec); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"t01": "breaks"}, rec.rejected); diff != "" {
		t.Errorf("rejected mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t00", "t02"}, w.tip); diff != "" {
		t.Errorf("tip mismatch (-want +got):\n%s", diff)
	}
}

// TestDrainAlreadyLanded: items the tip holds (a crashed drain landed them
// before recording it) are reported landed without a validation.
func TestDrainAlreadyLanded(t *testing.T) {
	t.Parallel()
	w, rec := &world{tip: []string{"t00", "t01"}}, &record{}
	st, err := Drain(items(2), 8, w.try, rec)
	if err != nil || st.Validations != 0 || len(rec.landed) != 2 {
		t.Errorf("Drain() = %+v, %v, landed %v; want both landed, no validation", st, err, rec.landed)
	}
}

// TestDrainStopsAtAnError: nothing after the failing try is settled.
func TestDrainStopsAtAnError(t *testing.T) {
	t.Parallel()
	w, rec := &world{breakers: map[string]bool{"t00": true}, fail: 2}, &record{}
	_, err := Drain(items(4), 4, w.try, rec)
	if err == nil {
		t.Fatal("Drain() error = nil, want the try's")
	}
	if len(rec.order) != 0 || len(w.tries) != 2 {
		t.Errorf("settled %v in %d tries; want nothing after the failing second try", rec.order, len(w.tries))
	}
}

// TestDrainProperty: random breakers, pairs and conflicts: every item is
// settled exactly once, every landing passed (the tip never breaks), and
// an item is sent back only when it breaks, completes a breaking pair, or
// conflicts.
func TestDrainProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 8))
	for run := range 500 {
		n := 1 + r.IntN(30)
		w := &world{breakers: map[string]bool{}}
		its := items(n)
		for _, it := range its {
			if r.IntN(10) == 0 {
				w.breakers[it.ID] = true
			}
		}
		for range r.IntN(3) {
			a, b := its[r.IntN(n)].ID, its[r.IntN(n)].ID
			if a != b {
				w.pairs = append(w.pairs, [2]string{a, b})
			}
			c, d := its[r.IntN(n)].ID, its[r.IntN(n)].ID
			if c != d {
				w.conflicts = append(w.conflicts, [2]string{c, d})
			}
		}
		rec := &record{}
		batch := 1 + r.IntN(10)
		if _, err := Drain(its, batch, w.try, rec); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, o := range rec.order {
			seen[o[1:]]++
		}
		for _, it := range its {
			if seen[it.ID] != 1 {
				t.Fatalf("run %d (batch %d): %s settled %d times: %v", run, batch, it.ID, seen[it.ID], rec.order)
			}
		}
		if w.breaks(w.tip) {
			t.Fatalf("run %d: the tip breaks: %v", run, w.tip)
		}
		for id, why := range rec.rejected {
			switch {
			case why == "bad call":
				t.Fatalf("run %d: %s rejected with both or neither of conflict and attempt", run, id)
			case why == "breaks" && !w.breakers[id] && !w.breaks(append(slices.Clone(w.tip), id)):
				t.Fatalf("run %d: %s sent back as a breaker, but the final tip takes it", run, id)
			}
		}
	}
}
