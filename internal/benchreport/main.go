// Command benchreport reads the output of `go test -bench` (the files named
// on the command line, or stdin) and prints the one table of issue 7: every
// target figure with its measurement, the baseline measured in the same
// run, the ratio between them, and whether the target is met — plus the
// machine and Go version they were measured on. `make bench` runs it.
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

func main() {
	var in []io.Reader
	for _, name := range os.Args[1:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	res, err := parse(io.MultiReader(in...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	m := machine{cpu: res.cpu, model: cpuModel(), cores: runtime.NumCPU(), goVersion: runtime.Version(),
		os: runtime.GOOS + "/" + runtime.GOARCH}
	write(os.Stdout, res, m)
}

// results are the metrics of each benchmark, by name without the -N suffix.
type results struct {
	cpu     string
	metrics map[string]map[string]float64
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// parse reads `go test -bench` output. A benchmark seen twice keeps its
// last figures.
func parse(r io.Reader) (results, error) {
	res := results{metrics: map[string]map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cpu, ok := strings.CutPrefix(line, "cpu: "); ok && res.cpu == "" {
			res.cpu = strings.TrimSpace(cpu)
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		vals := map[string]float64{}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			vals[f[i+1]] = v
		}
		res.metrics[m[1]] = vals
	}
	return res, sc.Err()
}

func (r results) get(bench, unit string) (float64, bool) {
	v, ok := r.metrics[bench][unit]
	return v, ok
}

type machine struct {
	cpu, model, os, goVersion string
	cores                     int
}

// cpuModel reads the CPU's model name from /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// row is one line of the table.
type row struct {
	figure, measured, baseline, ratio, target, verdict string
}

const missing = "not measured"

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func us(ns float64) string {
	if ns >= 1e6 {
		return ms(ns / 1e6)
	}
	return fmt.Sprintf("%.1f µs", ns/1e3)
}

func times(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	}
	return fmt.Sprintf("%.2f×", x)
}

// atMost judges a figure whose target is a ceiling.
func atMost(v, limit float64) string {
	if v <= limit {
		return "met"
	}
	return fmt.Sprintf("MISSED by %.0f%%", (v/limit-1)*100)
}

// atLeast judges a figure whose target is a floor.
func atLeast(v, floor float64) string {
	if v >= floor {
		return "met"
	}
	return fmt.Sprintf("MISSED by %.0f%%", (1-v/floor)*100)
}

func rows(r results) []row {
	var out []row
	dec := func(n string) string { return "BenchmarkDecision/pending=" + n }

	// One scheduling decision.
	var decNs [3]float64
	var decOK [3]bool
	for i, n := range []string{"1000", "10000", "100000"} {
		decNs[i], decOK[i] = r.get(dec(n), "ns/op")
	}
	for i, n := range []string{"100000", "10000", "1000"} {
		j := 2 - i
		label := map[string]string{"100000": "100k", "10000": "10k", "1000": "1k"}[n]
		rw := row{figure: "one scheduling decision, " + label + " pending (10% blocked by parents, 45/50 running)",
			measured: missing, target: "report (growth below)", verdict: "—"}
		if n == "100000" {
			rw.target = "≤ 1 ms and ≥ 500× the baseline"
		}
		if decOK[j] {
			base, _ := r.get(dec(n), "baseline-ms")
			x, _ := r.get(dec(n), "x-baseline")
			rw.measured = us(decNs[j])
			rw.baseline = ms(base) + " (the original design's selection, same bbolt store)"
			rw.ratio = times(x) + " faster"
			if n == "100000" {
				rw.verdict = "met"
				if decNs[j] > 1e6 || x < 500 {
					rw.verdict = "MISSED: " + atMost(decNs[j], 1e6) + ", ratio " + atLeast(x, 500)
				}
			}
		} else if n == "100000" {
			rw.verdict = missing
		}
		out = append(out, rw)
	}
	pol := row{figure: "same at 100k with tiers, owners' quotas and conflict keys on", measured: missing, target: "report", verdict: "—"}
	if v, ok := r.get(dec("100000/policies"), "ns/op"); ok {
		base, _ := r.get(dec("100000/policies"), "baseline-ms")
		x, _ := r.get(dec("100000/policies"), "x-baseline")
		pol.measured, pol.baseline, pol.ratio = us(v), ms(base)+" (the original design, which knows no policies)", times(x)+" faster"
	}
	out = append(out, pol)
	deps := row{figure: "same at 100k, 30% waiting on a sibling (depends_on)", measured: missing, target: "≤ 1 ms", verdict: missing}
	if v, ok := r.get(dec("100000/depends"), "ns/op"); ok {
		base, _ := r.get(dec("100000/depends"), "baseline-ms")
		x, _ := r.get(dec("100000/depends"), "x-baseline")
		deps.measured, deps.baseline, deps.ratio = us(v), ms(base)+" (the original design, which knows no dependencies)", times(x)+" faster"
		deps.verdict = "met"
		if v > 1e6 {
			deps.verdict = "MISSED: " + atMost(v, 1e6)
		}
	}
	out = append(out, deps)
	// Issue 25: the tree term (on by default) against the same decision
	// with its weights at 0; the 100k row above must still hold.
	tree := row{figure: "the 100k decision's cost of the tree term (100 trees; on by default)", measured: missing,
		target: "the 100k row holds (≤ 1 ms)", verdict: missing}
	if v, ok := r.get(dec("100000/notree"), "ns/op"); ok && decOK[2] {
		tree.measured, tree.baseline = us(decNs[2])+" with it", us(v)+" with its weights at 0, same run"
		tree.ratio = fmt.Sprintf("%.1f×", decNs[2]/v)
		tree.verdict = "met"
		if decNs[2] > 1e6 {
			tree.verdict = "MISSED: " + atMost(decNs[2], 1e6)
		}
	}
	out = append(out, tree)
	// Issue 14: with the store on etcd the ready set stays local to the
	// scheduler, so a decision should cost what it costs on bbolt.
	onEtcd := row{figure: "same at 100k, the store on etcd (index built once from etcd)", measured: missing,
		target: "≤ 1 ms and ≤ 1.2× bbolt", verdict: missing}
	if v, ok := r.get("BenchmarkDecisionEtcdArtifacts", "files-ms"); ok {
		bolt, _ := r.get("BenchmarkDecisionEtcdArtifacts", "bbolt-ms")
		onEtcd.measured = ms(v)
		onEtcd.verdict = atMost(v, 1)
		if bolt > 0 {
			x := v / bolt
			onEtcd.baseline = ms(bolt) + " the same decision on the bbolt file, same run"
			onEtcd.ratio = times(x)
			if v <= 1 {
				onEtcd.verdict = atMost(x, 1.2)
			}
		}
	}
	out = append(out, onEtcd)
	art := row{figure: "same at 100k on etcd, the parents' artifacts only in the store (passed on other machines)", measured: missing,
		target: "≤ 1.5× the same decision with the artifacts as files here", verdict: missing}
	if v, ok := r.get("BenchmarkDecisionEtcdArtifacts", "ns/op"); ok {
		files, _ := r.get("BenchmarkDecisionEtcdArtifacts", "files-ms")
		x, _ := r.get("BenchmarkDecisionEtcdArtifacts", "x-files")
		art.measured, art.baseline, art.ratio = us(v), ms(files)+" (etcd, artifacts as files here)", times(x)
		art.verdict = "met"
		if x > 1.5 {
			art.verdict = "MISSED: " + times(x)
		}
	}
	out = append(out, art)
	growth := row{figure: "decision cost growth, 1k → 10k → 100k", measured: missing, target: "no worse than n log n", verdict: missing}
	if decOK[0] && decOK[1] && decOK[2] {
		g1, g2 := decNs[1]/decNs[0], decNs[2]/decNs[1]
		n1 := 10 * math.Log(1e4) / math.Log(1e3)
		n2 := 10 * math.Log(1e5) / math.Log(1e4)
		growth.measured = fmt.Sprintf("×%.2f, ×%.2f", g1, g2)
		growth.baseline = fmt.Sprintf("n log n: ×%.1f, ×%.1f", n1, n2)
		b1, _ := r.get(dec("1000"), "baseline-ms")
		b2, _ := r.get(dec("10000"), "baseline-ms")
		b3, _ := r.get(dec("100000"), "baseline-ms")
		growth.ratio = fmt.Sprintf("baseline ×%.1f, ×%.1f", b2/b1, b3/b2)
		growth.verdict = "met"
		if g1 > n1 || g2 > n2 {
			growth.verdict = "MISSED"
		}
	}
	out = append(out, growth)

	// Durable writes.
	for _, w := range []struct{ bench, figure, target string }{
		{"BenchmarkDurableTransition", "durable state transitions, one per transaction", "≥ 0.8× raw fsync"},
		{"BenchmarkGroupCommitTransitions", "durable transitions, many at once (group commit, 256 writers)", "≥ 10× raw fsync"},
	} {
		rw := row{figure: w.figure, measured: missing, target: w.target, verdict: missing}
		if tx, ok := r.get(w.bench, "tx/s"); ok {
			raw, _ := r.get(w.bench, "fsync/s")
			x, _ := r.get(w.bench, "x-raw-fsync")
			rw.measured = fmt.Sprintf("%.0f tx/s", tx)
			rw.baseline = fmt.Sprintf("%.0f/s raw write+fsync of one page, same disk", raw)
			rw.ratio = times(x)
			if o, ok := r.get(w.bench, "ordered-2sync/s"); ok {
				rw.baseline += fmt.Sprintf("; %.0f/s the data+meta syncs a bbolt commit needs", o)
				xo, _ := r.get(w.bench, "x-ordered-2sync")
				rw.ratio += fmt.Sprintf(" (%s of that)", times(xo))
			}
			if strings.HasPrefix(w.target, "≥ 0.8") {
				rw.verdict = atLeast(x, 0.8)
			} else {
				rw.verdict = atLeast(x, 10)
			}
		}
		out = append(out, rw)
	}

	etcd := row{figure: "durable state transitions on the etcd store, one per transaction", measured: missing,
		target: "≥ 0.5× etcd put", verdict: missing}
	if tx, ok := r.get("BenchmarkEtcdDurableTransition", "tx/s"); ok {
		put, _ := r.get("BenchmarkEtcdDurableTransition", "etcd-put/s")
		x, _ := r.get("BenchmarkEtcdDurableTransition", "x-etcd-put")
		etcd.measured = fmt.Sprintf("%.0f tx/s", tx)
		etcd.baseline = fmt.Sprintf("%.0f/s single puts of a 300-byte value, same etcd, alternating rounds", put)
		etcd.ratio = times(x)
		etcd.verdict = atLeast(x, 0.5)
	}
	out = append(out, etcd)

	tick := row{figure: "a tick's 50 starts in one transaction (the daemon's own group commit)", measured: missing,
		target: "report", verdict: "—"}
	if tx, ok := r.get("BenchmarkTickStarts", "tx/s"); ok {
		raw, _ := r.get("BenchmarkTickStarts", "fsync/s")
		each, _ := r.get("BenchmarkTickStarts", "one-tx-each/s")
		x, _ := r.get("BenchmarkTickStarts", "x-raw-fsync")
		tick.measured = fmt.Sprintf("%.0f tx/s", tx)
		tick.baseline = fmt.Sprintf("%.0f/s raw fsync; %.0f/s one transaction per start", raw, each)
		tick.ratio = times(x) + " raw"
	}
	out = append(out, tick)

	// Dispatch latency.
	for _, d := range []struct{ bench, figure, target string }{
		{"BenchmarkDispatchLatency", "parent completes → first child's agent started, worktrees off (p50 / p99)", "p99 ≤ 20 ms"},
		{"BenchmarkDispatchLatencyWorktrees", "same, worktrees on (git repository)", "report"},
		{"BenchmarkDispatchLatencyEtcd", "same, worktrees off, the store on etcd (p50 / p99)", "p99 ≤ 50 ms"},
		{"BenchmarkDispatchLatencyEtcdWorker", "same on etcd, through a worker: the scheduler assigns, the worker starts it from its watch (p50 / p99)", "p99 ≤ 50 ms"},
	} {
		rw := row{figure: d.figure, measured: missing, target: d.target, verdict: missing}
		if p50, ok := r.get(d.bench, "p50-ms"); ok {
			p99, _ := r.get(d.bench, "p99-ms")
			spawn, _ := r.get(d.bench, "spawn-p50-ms")
			rw.measured = ms(p50) + " / " + ms(p99)
			rw.baseline = ms(spawn) + " starting the same agent directly (p50)"
			rw.ratio = times(p50/spawn) + " (p50)"
			rw.verdict = "—"
			switch d.target {
			case "p99 ≤ 20 ms":
				rw.verdict = atMost(p99, 20)
			case "p99 ≤ 50 ms":
				rw.verdict = atMost(p99, 50)
			}
		}
		out = append(out, rw)
	}

	// Issue 20.8: status waits for no tick and no git command.
	status := row{figure: "`loopr status` (GET /v1/status) while 6 agents run and their passes merge (p50 / p99)", measured: missing,
		target: "p99 ≤ 100 ms", verdict: missing}
	if p50, ok := r.get("BenchmarkStatusUnderLoad", "p50-ms"); ok {
		p99, _ := r.get("BenchmarkStatusUnderLoad", "p99-ms")
		i50, _ := r.get("BenchmarkStatusUnderLoad", "idle-p50-ms")
		i99, _ := r.get("BenchmarkStatusUnderLoad", "idle-p99-ms")
		x, _ := r.get("BenchmarkStatusUnderLoad", "x-idle")
		status.measured = ms(p50) + " / " + ms(p99)
		status.baseline = ms(i50) + " / " + ms(i99) + " the same daemon idle"
		status.ratio = times(x) + " (p99)"
		status.verdict = atMost(p99, 100)
	}
	out = append(out, status)

	// The daemon at scale.
	for _, d := range []struct{ bench, figure string }{
		{"BenchmarkListJSON", "`loopr list --json` through the daemon, 120k loops"},
		{"BenchmarkDebugScheduler", "`loopr debug scheduler` through the daemon, 100k waiting"},
	} {
		rw := row{figure: d.figure, measured: missing, target: "≤ 1 s", verdict: missing}
		if v, ok := r.get(d.bench, "ms"); ok {
			base, _ := r.get(d.bench, "baseline-ms")
			x, _ := r.get(d.bench, "x-baseline")
			rw.measured = ms(v)
			rw.baseline = ms(base) + " decode all + encoding/json, in one process"
			rw.ratio = times(x) + " faster"
			rw.verdict = atMost(v, 1000)
		}
		out = append(out, rw)
	}
	// Issue 20.6: with no daemon, the CLI answers from the store itself.
	for _, o := range []struct{ figure, unit, base, x string }{
		{"`loopr debug scheduler --json` with no daemon, 100k waiting: CPU (user+sys)", "cpu-ms", "base-cpu-ms", "x-base-cpu"},
		{"same, peak resident memory", "maxrss-MB", "base-maxrss-MB", "x-base-rss"},
	} {
		rw := row{figure: o.figure, measured: missing, target: "≤ 1× the build of 2026-11-23", verdict: missing}
		if v, ok := r.get("BenchmarkDebugSchedulerOffline", o.unit); ok {
			base, _ := r.get("BenchmarkDebugSchedulerOffline", o.base)
			x, _ := r.get("BenchmarkDebugSchedulerOffline", o.x)
			if o.unit == "cpu-ms" {
				rw.measured, rw.baseline = ms(v), ms(base)
			} else {
				rw.measured, rw.baseline = fmt.Sprintf("%.0f MiB", v), fmt.Sprintf("%.0f MiB", base)
			}
			rw.baseline += " (the build of 2026-11-23, same store, same run)"
			rw.ratio = times(x)
			rw.verdict = atMost(x, 1)
		}
		out = append(out, rw)
	}
	rss := row{figure: "daemon resident memory, 120k loops (pending and finished), settled after list and debug", measured: missing,
		target: "≤ 200 MB", verdict: missing}
	if v, ok := r.get("BenchmarkDaemonRSS", "rss-MB"); ok {
		peak, _ := r.get("BenchmarkDaemonRSS", "peak-MB")
		empty, _ := r.get("BenchmarkDaemonRSS", "empty-rss-MB")
		anon, _ := r.get("BenchmarkDaemonRSS", "anon-MB")
		file, _ := r.get("BenchmarkDaemonRSS", "file-MB")
		rss.measured = fmt.Sprintf("%.0f MiB: heap %.0f + store pages %.0f (peak %.0f)", v, anon, file, peak)
		rss.baseline = fmt.Sprintf("%.0f MiB, the same daemon on an empty home", empty)
		rss.ratio = times(v / empty)
		rss.verdict = atMost(v*1.048576, 200) // MiB → MB
	}
	out = append(out, rss)
	start := row{figure: "daemon start (open + recover + index + first decision), 120k records", measured: missing,
		target: "≤ 1 s", verdict: missing}
	if v, ok := r.get("BenchmarkDaemonStart", "ms"); ok {
		empty, _ := r.get("BenchmarkDaemonStart", "empty-ms")
		start.measured = ms(v)
		start.baseline = ms(empty) + " on an empty home"
		start.ratio = times(v / empty)
		start.verdict = atMost(v, 1000)
	}
	out = append(out, start)
	// Issue 21: the merge queue.
	mq := row{figure: "merge queue: 20 passed branches, merge.batch 8, 2 s merge.validate: validation runs when none breaks; with one breaker, the run that finds it (all settled in)",
		measured: missing, target: "≤ 3 runs; breaker found in ≤ 6", verdict: missing}
	if clean, ok := r.get("BenchmarkMergeQueue", "runs-clean"); ok {
		cleanS, _ := r.get("BenchmarkMergeQueue", "clean-s")
		found, _ := r.get("BenchmarkMergeQueue", "isolated-at")
		all, _ := r.get("BenchmarkMergeQueue", "runs-breaker")
		brokenS, _ := r.get("BenchmarkMergeQueue", "breaker-s")
		one, _ := r.get("BenchmarkMergeQueue", "batch1-runs")
		mq.measured = fmt.Sprintf("%.0f runs (%.1f s); breaker found at run %.0f (%.0f runs, %.1f s)", clean, cleanS, found, all, brokenS)
		mq.baseline = fmt.Sprintf("%.0f runs at merge.batch 1 (%.0f s)", one, 2*one)
		if clean > 0 {
			mq.ratio = times(one/clean) + " fewer runs"
		}
		mq.verdict = "met"
		if clean > 3 || found > 6 {
			mq.verdict = "MISSED: " + atMost(clean, 3) + " / " + atMost(found, 6)
		}
	}
	out = append(out, mq)
	view := row{figure: "TUI View(), 10k loops, 200×50", measured: missing, target: "≤ 10 ms per frame", verdict: missing}
	if v, ok := r.get("BenchmarkView", "ns/op"); ok {
		small, _ := r.get("BenchmarkViewSmall", "ns/op")
		view.measured = ms(v / 1e6)
		view.baseline = ms(small/1e6) + " View() of 1k loops"
		view.ratio = times(v / small)
		view.verdict = atMost(v/1e6, 10)
	}
	return append(out, view)
}

func write(w io.Writer, r results, m machine) {
	fmt.Fprintf(w, "loopr benchmarks — %s, %d cores (%s), %s, %s\n", m.model, m.cores, m.cpu, m.os, m.goVersion)
	fmt.Fprintf(w, "every baseline was measured in the same run; ratios compare the two\n\n")
	rs := rows(r)
	head := row{"figure", "measured", "baseline (same run)", "ratio", "target", "verdict"}
	width := [6]int{}
	cells := func(x row) [6]string {
		return [6]string{x.figure, x.measured, x.baseline, x.ratio, x.target, x.verdict}
	}
	for _, x := range append([]row{head}, rs...) {
		for i, c := range cells(x) {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(x row) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells(x) {
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		fmt.Fprintln(w, b.String())
	}
	line(head)
	var sep strings.Builder
	sep.WriteString("|")
	for _, n := range width {
		sep.WriteString(strings.Repeat("-", n+2) + "|")
	}
	fmt.Fprintln(w, sep.String())
	for _, x := range rs {
		line(x)
	}
	met, missed := 0, 0
	for _, x := range rs {
		switch {
		case x.verdict == "met":
			met++
		case strings.HasPrefix(x.verdict, "MISSED") || x.verdict == missing:
			missed++
		}
	}
	fmt.Fprintf(w, "\ntargets met: %d, missed or not measured: %d (BENCHMARKS.md explains each figure)\n", met, missed)
}
