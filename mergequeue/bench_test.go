package mergequeue

import (
	"fmt"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/runner"
)

// BenchmarkMergeQueue: 20 passed branches wait, merge.batch is 8 and
// merge.validate takes 2 s (real git, real processes). It reports the
// validation runs to land them all when none breaks (runs-clean), and
// with one breaker, the 9th branch — the worst place for both figures —
// the run after which it was found (isolated-at) and the runs to settle
// all 20 (runs-breaker), with the wall time of each. The baseline is the
// same queue at merge.batch 1: one run per branch (batch1-runs, counted by
// the same Drain, at 2 s a run).
func BenchmarkMergeQueue(b *testing.B) {
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("t%02d", i)
	}
	run := func(validate string) (Stats, time.Duration) {
		b.StopTimer()
		f := newFixture(b, names...)
		b.StartTimer()
		start := time.Now()
		st, err := (&Queue{Git: f.repo, Runner: &runner.Runner{}}).Run(b.Context(), Plan{
			Into: f.into, Batch: 8, Validate: []string{validate},
			Items: func() ([]Item, error) { return f.items, nil }, Sink: &sink{},
		})
		if err != nil {
			b.Fatal(err)
		}
		return st, time.Since(start)
	}
	var clean, broken Stats
	var cleanTook, brokenTook time.Duration
	for range b.N {
		clean, cleanTook = run("sleep 2")
		broken, brokenTook = run("sleep 2; test ! -e t08.txt")
	}
	if clean.Landed != 20 || broken.Landed != 19 || broken.Rejected != 1 {
		b.Fatalf("clean %+v, with a breaker %+v: want 20 landed, then 19 and 1 sent back", clean, broken)
	}
	one, err := Drain(items(20), 1, (&world{}).try, &record{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(clean.Validations), "runs-clean")
	b.ReportMetric(cleanTook.Seconds(), "clean-s")
	b.ReportMetric(float64(broken.IsolatedAt), "isolated-at")
	b.ReportMetric(float64(broken.Validations), "runs-breaker")
	b.ReportMetric(brokenTook.Seconds(), "breaker-s")
	b.ReportMetric(float64(one.Validations), "batch1-runs")
}
