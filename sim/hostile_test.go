package sim_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/sim"
)

// events returns r's events as "t:event:id" strings.
func events(r sim.Result) string {
	var out []string
	for _, e := range r.Events {
		out = append(out, fmt.Sprintf("%d:%s:%s", e.T, e.Event, e.ID))
	}
	return strings.Join(out, " ")
}

// TestDeadlinesPastTheirSecond: a loop that arrives after its deadline,
// or waits again (a failed iteration) after it, expires in that second.
func TestDeadlinesPastTheirSecond(t *testing.T) {
	w := parse(t, "w.yaml", `
config: {concurrency: {max_loops: 1}, retry: {backoff_base_secs: 1}}
loops:
  - {id: a, type: ralph, deadline: 2, iterations: [{duration: 4, pass: false}, {duration: 1, pass: true}]}
  - {id: b, type: ralph, duration: 1, at: 6, deadline: 5}
  - {id: c, type: ralph, duration: 1, at: 6, deadline: 9}
`)
	r, err := sim.RunWith(w, sim.Options{Policy: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	want := "0:arrive:a 0:admit:a 4:retry:a 4:expire:a 6:arrive:b 6:arrive:c 6:expire:b 6:admit:c 7:done:c"
	if got := events(r); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// TestManyDeadlinesAndALongLoop: thousands of loops with deadlines beside
// one loop of a million seconds ends in seconds: the expiry sweep does
// not walk the whole workload every virtual second (it took minutes).
func TestManyDeadlinesAndALongLoop(t *testing.T) {
	var b strings.Builder
	b.WriteString("config: {concurrency: {max_loops: 2}}\nloops:\n  - {id: big, type: ralph, duration: 1000000}\n")
	for i := range 20000 {
		fmt.Fprintf(&b, "  - {id: l%d, type: ralph, duration: 5, at: 1, deadline: 100}\n", i)
	}
	w := parse(t, "w.yaml", b.String())
	done := make(chan sim.Result, 1)
	go func() { r, _ := sim.RunWith(w, sim.Options{Policy: "seed"}); done <- r }()
	select {
	case r := <-done:
		if r.Metrics.Makespan != 1000000 {
			t.Errorf("makespan %d, want 1000000", r.Metrics.Makespan)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not end within 2 minutes")
	}
}

// TestRunPastTheLastSecond: a workload that cannot end within the virtual
// seconds loopr sim runs is an error, not a summary whose makespan is 0 or
// below its lower bound; with until: its first seconds are fine.
func TestRunPastTheLastSecond(t *testing.T) {
	const long = `
loops:
  - {id: a, type: ralph, iterations: [{duration: 10000000, pass: false}, {duration: 10000000, pass: true}]}
`
	for _, policy := range []string{"loopr", "fifo"} {
		_, err := sim.RunWith(parse(t, "w.yaml", long), sim.Options{Policy: policy})
		if err == nil || !strings.Contains(err.Error(), "did not end by virtual second 10000000") {
			t.Errorf("%s: err %v, want one saying the workload did not end", policy, err)
		}
		if _, err := sim.Compare(parse(t, "w.yaml", long), []string{policy}); err == nil {
			t.Errorf("Compare %s: no error", policy)
		}
	}
	if _, err := sim.RunWith(parse(t, "w.yaml", "until: 100\n"+long), sim.Options{}); err != nil {
		t.Errorf("with until: %v", err)
	}
}

// TestLoopWaitingForItself: depends_on an ancestor, or a dependency on a
// subtree that waits for the loop, is an error naming the loop and its
// line, not a stack overflow that kills loopr sim.
func TestLoopWaitingForItself(t *testing.T) {
	for _, tc := range []struct{ name, workload, want string }{
		{"its parent", `
loops:
  - {id: p, type: phase, duration: 2}
  - {id: c, type: ralph, parent: p, depends_on: [p], duration: 3}
`, "w.yaml:4: loops[1].depends_on: c waits for itself"},
		{"a subtree that waits for it", `
loops:
  - {id: p, type: phase, duration: 2}
  - {id: c, type: ralph, parent: p, duration: 3}
  - {id: d, type: ralph, parent: p, depends_on: [c], duration: 3}
  - {id: e, type: ralph, parent: c, depends_on: [d], duration: 3}
`, "waits for itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, policy := range sim.Policies {
				_, err := sim.RunWith(parse(t, "w.yaml", tc.workload), sim.Options{Policy: policy})
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: err %v, want %q", policy, err, tc.want)
				}
			}
		})
	}
}

// TestDrawnIterationsStayInRange: drawn durations (a long duration, the
// widest sigma) stay between 1 and the last virtual second, as listed
// ones must.
func TestDrawnIterationsStayInRange(t *testing.T) {
	w := parse(t, "w.yaml", `
types: {long: {base: 1, max_iterations: 50}}
loops:
  - {id: a, type: long, duration: 10000000, iterations: {pass_rate: 0.01, sigma: 5, seed: 7}}
  - {id: b, type: long, duration: 1, iterations: {pass_rate: 0.01, sigma: 5, seed: 8}}
`)
	for _, l := range w.Loops {
		if len(l.Iterations) < 10 {
			t.Fatalf("%s: %d iterations drawn, want many", l.ID, len(l.Iterations))
		}
		for i, it := range l.Iterations {
			if it.Duration < 1 || it.Duration > 10_000_000 {
				t.Errorf("%s iteration %d: duration %d, want 1..10000000", l.ID, i, it.Duration)
			}
		}
	}
}
