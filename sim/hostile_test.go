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
