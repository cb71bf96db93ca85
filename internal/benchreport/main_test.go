package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
cpu: Test CPU @ 3GHz
BenchmarkDecision/pending=1000-2         	   55191	     46171 ns/op	        23.03 baseline-ms	       498.9 x-baseline	    4176 B/op	      51 allocs/op
BenchmarkDecision/pending=10000-2        	   84361	     28533 ns/op	       213.0 baseline-ms	      7466 x-baseline	    4176 B/op	      51 allocs/op
BenchmarkDecision/pending=100000-2       	   80182	     31455 ns/op	      1522 baseline-ms	     48378 x-baseline	    4178 B/op	      51 allocs/op
BenchmarkDecision/pending=100000/depends-2       	   22212	     79110 ns/op	      2147 baseline-ms	     27135 x-baseline	    5897 B/op	     100 allocs/op
BenchmarkDecisionEtcdArtifacts-2   	    5943	    198000 ns/op	        15.00 first-ms	         0.2410 files-ms	         0.0480 bbolt-ms	         0.8216 x-files	         4.125 x-bbolt	   42893 B/op	     582 allocs/op
BenchmarkDurableTransition-2        	    1578	   1430388 ns/op	      2207 fsync/s	       699.1 tx/s	         0.3167 x-raw-fsync	   75280 B/op	     179 allocs/op
BenchmarkEtcdDurableTransition-2   	     913	   1668661 ns/op	      1894 etcd-put/s	       879.8 tx/s	         0.4646 x-etcd-put	  119545 B/op	    1400 allocs/op
BenchmarkDispatchLatencyEtcd-2   	     200	  28905692 ns/op	         5.169 p50-ms	        12.89 p99-ms	      1000 poll-ms	         0.2770 spawn-p50-ms	        18.62 x-spawn
BenchmarkDispatchLatencyEtcdWorker-2   	     200	  31905692 ns/op	         8.169 p50-ms	        17.89 p99-ms	      1000 poll-ms	         0.2770 spawn-p50-ms	        29.49 x-spawn
BenchmarkStatusUnderLoad-2   	       1	16891116868 ns/op	         0.9760 idle-p50-ms	         3.332 idle-p99-ms	        42.00 merges	         1.291 p50-ms	        130.5 p99-ms	       891.0 requests	         39.17 x-idle
BenchmarkMergeQueue-2   	       1	22054247427 ns/op	        20.00 batch1-runs	        15.28 breaker-s	         6.772 clean-s	         5.000 isolated-at	         7.000 runs-breaker	         3.000 runs-clean
BenchmarkDispatchLatency-2   	     100	  19539331 ns/op	         2.258 p50-ms	         25.047 p99-ms	      1000 poll-ms	         0.7780 spawn-p50-ms	         2.903 x-spawn
`

func TestReport(t *testing.T) {
	t.Parallel()
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if r.cpu != "Test CPU @ 3GHz" {
		t.Errorf("cpu = %q", r.cpu)
	}
	var b strings.Builder
	write(&b, r, machine{model: "m", cores: 2, goVersion: "go1.26", os: "linux/amd64", cpu: r.cpu})
	out := b.String()
	for _, want := range []string{
		"31.5 µs", "1522 ms (the original design's selection", "48378× faster", "≤ 1 ms and ≥ 500× the baseline",
		"×0.62, ×1.10", "n log n: ×13.3, ×12.5",
		"0.24 ms", "0.05 ms the same decision on the bbolt file, same run", "5.02×", "≤ 1 ms and ≤ 1.2× bbolt", "MISSED by 318%",
		"699 tx/s", "0.32×", "MISSED by 60%",
		"880 tx/s", "1894/s single puts", "0.46×", "MISSED by 7%",
		"2.26 ms / 25.0 ms", "MISSED by 25%",
		"5.17 ms / 12.9 ms", "the store on etcd",
		"8.17 ms / 17.9 ms", "through a worker",
		"1.29 ms / 130 ms", "0.98 ms / 3.33 ms the same daemon idle", "39.2× (p99)", "p99 ≤ 100 ms", "MISSED by 30%",
		"3 runs (6.8 s); breaker found at run 5 (7 runs, 15.3 s)", "20 runs at merge.batch 1 (40 s)", "6.67× fewer runs",
		"not measured",
		"30% waiting on a sibling (depends_on)", "79.1 µs", "27135× faster",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
