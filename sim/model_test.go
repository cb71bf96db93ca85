package sim_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/sim"
)

// timeline returns the events as "T:event:id" strings.
func timeline(r sim.Result) []string {
	out := make([]string, len(r.Events))
	for i, e := range r.Events {
		out[i] = strings.Join([]string{strconv.Itoa(e.T), e.Event, e.ID}, ":")
	}
	return out
}

// TestTreesArriveAtCompletion: a child without at: is created when its
// parent completes, after the parent's approval; a spec's phases run one
// after another (each after the subtree of the one before); the metrics
// follow.
func TestTreesArriveAtCompletion(t *testing.T) {
	t.Parallel()
	r := sim.Run(parse(t, "tree.yaml", `loops:
  - {id: p, type: plan, duration: 5, approval: 3}
  - {id: s, type: spec, parent: p, duration: 2}
  - {id: f1, type: phase, parent: s, duration: 1}
  - {id: t1, type: ralph, parent: f1, duration: 4}
  - {id: f2, type: phase, parent: s, duration: 1}
`))
	want := []string{
		"0:arrive:p", "0:admit:p", "5:await:p", "8:done:p", "8:arrive:s", "8:admit:s",
		"10:done:s", "10:arrive:f1", "10:arrive:f2", "10:admit:f1", "11:done:f1", "11:arrive:t1", "11:admit:t1",
		"15:done:t1", "15:admit:f2", "16:done:f2",
	}
	if diff := cmp.Diff(want, timeline(r)); diff != "" {
		t.Errorf("timeline (-want +got)\n%s", diff)
	}
	m := r.Metrics
	tm := m.Trees[0]
	// Critical path: p 5 + approval 3, s 2, f1 1, t1 4, then f2 1 = 16.
	if len(m.Trees) != 1 || tm.Root != "p" || tm.Submit != 0 || tm.Complete != 16 || tm.Flow != 16 || tm.CriticalPath != 16 || tm.Slowdown != 1 || tm.FirstTaskDone != 15 {
		t.Errorf("tree metrics = %+v, want p submitted 0, first task 15, complete 16, critical path 16, slowdown 1", tm)
	}
	if m.Makespan != 16 || m.Work != 13 || m.LowerBound != 16 || m.MeanFlow != 16 || m.P95Flow != 16 {
		t.Errorf("metrics = %+v, want makespan 16, work 13, bound 16, flow 16", m)
	}
}

// TestIterationsRetry: a failed iteration goes back to waiting with the
// daemon's retry backoff (retry.backoff_base_secs 2, factor 2), its
// iteration + 1 (the retry penalty lowers it below a newer loop); at the
// last listed iteration failing the loop fails and its tree never completes.
func TestIterationsRetry(t *testing.T) {
	t.Parallel()
	r := sim.Run(parse(t, "retry.yaml", `config: {concurrency: {max_loops: 1}}
loops:
  - {id: a, type: ralph, iterations: [{duration: 3, pass: false}, {duration: 3, pass: false}, {duration: 2, pass: true}]}
  - {id: b, type: ralph, iterations: [{duration: 1, pass: false}], at: 1}
`))
	want := []string{
		"0:arrive:a", "0:admit:a", "1:arrive:b",
		"3:retry:a", "3:admit:b", // a waits 2 s (iteration 1 failed): b runs
		"4:fail:b", "5:admit:a", // then a: iteration 2
		"8:retry:a", "12:admit:a", // 4 s after iteration 2
		"14:done:a",
	}
	if diff := cmp.Diff(want, timeline(r)); diff != "" {
		t.Errorf("timeline (-want +got)\n%s", diff)
	}
	if tb := r.Metrics.Trees[1]; tb.Complete != -1 || tb.Flow != -1 {
		t.Errorf("failed tree b: %+v, want no completion", tb)
	}
	if ta := r.Metrics.Trees[0]; ta.CriticalPath != 3+2+3+4+2 || ta.Flow != 14 {
		t.Errorf("tree a: %+v, want critical path 14 (iterations and backoffs), flow 14", ta)
	}
}

// TestLimitWindows: loops on a profile in a limit window wait with reason
// rate_limited until it ends; the window wakes the run when it ends.
func TestLimitWindows(t *testing.T) {
	t.Parallel()
	w := parse(t, "limits.yaml", `limits: [{profile: default, from: 2, until: 50}]
loops:
  - {id: a, type: ralph, duration: 1}
  - {id: b, type: ralph, duration: 1, at: 3}
`)
	if got := sim.Run(w).Admissions(); !cmp.Equal(got, []string{"0:a", "50:b"}) {
		t.Errorf("admissions = %v, want b held until the window ends at 50", got)
	}
	w.Until = 10
	r := sim.Run(w)
	if len(r.Waiting) != 1 || r.Waiting[0].ID != "b" || !slices.ContainsFunc(r.Waiting[0].Reasons, func(re scheduler.Reason) bool { return re.Code == scheduler.RateLimited }) {
		t.Errorf("waiting at 10 = %+v, want b rate_limited", r.Waiting)
	}
}

// twoTrees: a big tree a (five tasks) and a small tree b submitted while
// a's first task runs, one slot.
const twoTrees = `config: {concurrency: {max_loops: 1}}
loops:
  - {id: a, type: plan, duration: 1}
  - {id: a1, type: ralph, parent: a, duration: 60}
  - {id: a2, type: ralph, parent: a, duration: 60}
  - {id: a3, type: ralph, parent: a, duration: 60}
  - {id: a4, type: ralph, parent: a, duration: 60}
  - {id: a5, type: ralph, parent: a, duration: 60}
  - {id: b, type: plan, duration: 1, at: 2}
  - {id: b1, type: ralph, parent: b, duration: 60}
`

// TestTreeTermInSim: the sim fills Snapshot.Trees as the daemon does, so
// with the tree term on the small tree b runs before a's remaining tasks;
// at 0 (seed) a task always outranks a plan and b waits for all of a.
func TestTreeTermInSim(t *testing.T) {
	t.Parallel()
	w := parse(t, "two.yaml", twoTrees)
	order := func(opt sim.Options) string {
		r, err := sim.RunWith(w, opt)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, a := range r.Admissions() {
			ids = append(ids, a[strings.IndexByte(a, ':')+1:])
		}
		return strings.Join(ids, " ")
	}
	if got, want := order(sim.Options{Policy: "seed"}), "a a1 a2 a3 a4 a5 b b1"; got != want {
		t.Errorf("seed order %q, want %q", got, want)
	}
	tree := sim.Options{Adjust: func(p *scheduler.Policy) { p.Weights.TreeBoostMax = 100 }}
	if got, want := order(tree), "a a1 b b1 a2 a3 a4 a5"; got != want {
		t.Errorf("tree term order %q, want %q", got, want)
	}
	if got, want := order(sim.Options{Policy: "fifo"}), "a a1 a2 a3 a4 a5 b b1"; got != want {
		t.Errorf("fifo order %q, want %q", got, want)
	}
}

// TestCriticalPathFirst: cpf starts the loop with the longest chain after
// it first; fifo, the older tree's.
func TestCriticalPathFirst(t *testing.T) {
	t.Parallel()
	w := parse(t, "cpf.yaml", `config: {concurrency: {max_loops: 1}}
loops:
  - {id: short, type: ralph, duration: 10}
  - {id: long, type: phase, duration: 1, at: 1}
  - {id: l1, type: ralph, parent: long, duration: 50}
  - {id: other, type: ralph, duration: 10, at: 1}
`)
	for policy, want := range map[string][]string{
		"cpf":  {"0:short", "10:long", "11:l1", "61:other"},
		"fifo": {"0:short", "10:other", "20:long", "21:l1"},
	} {
		r, err := sim.RunWith(w, sim.Options{Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Admissions(); !cmp.Equal(got, want) {
			t.Errorf("%s: admissions %v, want %v", policy, got, want)
		}
	}
	if _, err := sim.RunWith(w, sim.Options{Policy: "lifo"}); err == nil {
		t.Error("an unknown policy must be refused")
	}
}

// TestIterationsDrawn: iterations: {pass_rate, sigma, seed} draws the
// attempts, the same for the same seed and id, other for another seed,
// and about pass_rate of the first attempts pass.
func TestIterationsDrawn(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("loops:\n")
	for i := range 200 {
		b.WriteString("  - {id: l" + strconv.Itoa(i) + ", type: ralph, duration: 100, iterations: {pass_rate: 0.6, sigma: 0.5, seed: SEED}}\n")
	}
	draw := func(seed string) []sim.Loop {
		return parse(t, "drawn.yaml", strings.ReplaceAll(b.String(), "SEED", seed)).Loops
	}
	one, again, other := draw("1"), draw("1"), draw("2")
	if !cmp.Equal(one, again) {
		t.Error("the same seed drew other iterations")
	}
	if cmp.Equal(one, other) {
		t.Error("another seed drew the same iterations")
	}
	passed, varied := 0, false
	for _, l := range one {
		its := l.Iterations
		if len(its) == 0 || !its[len(its)-1].Pass || slices.ContainsFunc(its[:len(its)-1], func(it sim.Iteration) bool { return it.Pass }) {
			t.Fatalf("%s: %+v: want failures then one pass", l.ID, its)
		}
		if its[0].Pass {
			passed++
		}
		varied = varied || its[0].Duration != 100
	}
	if passed < 90 || passed > 150 || !varied {
		t.Errorf("%d of 200 first attempts passed (want about 120), durations varied %v", passed, varied)
	}
}
