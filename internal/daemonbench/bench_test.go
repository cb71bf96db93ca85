package daemonbench

import (
	"context"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// baselineRuns is how many times each in-process baseline runs (median).
const baselineRuns = 3

// Baselines, measured on the fixture before any daemon opens it.
var baseList, baseDebug time.Duration

// measureBaselines times the straightforward way to answer `list --json`
// and `debug scheduler` over the same store, in one process, no socket:
// decode every record, encoding/json out, encoding/json back in (what the
// CLI receives), then the CLI's output (indented JSON; the table); for the
// scheduler, Plan over a snapshot read from the store (no index).
func measureBaselines(ws string) error {
	st, err := store.Open(filepath.Join(home(ws), "loopr.db"), store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	cfg, err := config.Load(filepath.Join(ws, "loopr.yml"))
	if err != nil {
		return err
	}
	svc := control.New(st, workspace.Paths{Workspace: ws, Home: home(ws)}, func() *config.Config { return cfg }, time.Now)
	var lists, debugs []time.Duration
	for range baselineRuns {
		began := time.Now()
		loops, err := svc.List(api.ListRequest{})
		if err != nil {
			return err
		}
		wire, err := json.Marshal(loops)
		if err != nil {
			return err
		}
		var got []loop.Loop
		if err := json.Unmarshal(wire, &got); err != nil {
			return err
		}
		enc := json.NewEncoder(io.Discard)
		enc.SetIndent("", "  ")
		if err := enc.Encode(got); err != nil {
			return err
		}
		lists = append(lists, time.Since(began))

		began = time.Now()
		v, err := svc.Scheduler(time.Now().UTC())
		if err != nil {
			return err
		}
		if wire, err = json.Marshal(v); err != nil {
			return err
		}
		var view api.SchedulerView
		if err := json.Unmarshal(wire, &view); err != nil {
			return err
		}
		w := tabwriter.NewWriter(io.Discard, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTYPE\tPRIORITY\tAGE\tDEPTH\tITER\tRUNNABLE")
		for _, r := range view.Rows {
			fmt.Fprintf(w, "%s\t%s\t%d\t%ds\t%d\t%d\t%v %v\n", r.ID, r.Type, r.Priority, r.AgeSeconds, r.Depth, r.Iteration, r.Runnable, r.ReasonText)
		}
		w.Flush()
		debugs = append(debugs, time.Since(began))
		if len(got) != fixtureTotal || len(view.Rows) < 100_000 {
			return fmt.Errorf("baseline saw %d loops and %d rows, want %d and 100000", len(got), len(view.Rows), fixtureTotal)
		}
	}
	baseList, baseDebug = median(lists), median(debugs)
	return nil
}

// The daemon shared by the list, debug and memory benchmarks.
var (
	sharedOnce sync.Once
	shared     *daemon
	sharedErr  error
)

func sharedDaemon(b *testing.B) *daemon {
	b.Helper()
	ws := fixture(b)
	sharedOnce.Do(func() { shared, sharedErr = startDaemon(ws) })
	if sharedErr != nil {
		b.Fatal(sharedErr)
	}
	return shared
}

// BenchmarkListJSON: `loopr list --json` through the daemon, 120,000 loops,
// the CLI's output to /dev/null. Target ≤ 1 s.
func BenchmarkListJSON(b *testing.B) {
	d := sharedDaemon(b)
	var runs []time.Duration
	for b.Loop() {
		took, err := cli(context.Background(), d.ws, "list", "--json")
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, took)
	}
	b.ReportMetric(ms(median(runs)), "ms")
	b.ReportMetric(ms(baseList), "baseline-ms")
	b.ReportMetric(float64(baseList)/float64(median(runs)), "x-baseline")
	b.ReportMetric(fixtureTotal, "loops")
}

// BenchmarkDebugScheduler: `loopr debug scheduler` (the table) through the
// daemon, 100,000 waiting loops. Target ≤ 1 s.
func BenchmarkDebugScheduler(b *testing.B) {
	d := sharedDaemon(b)
	var runs []time.Duration
	for b.Loop() {
		took, err := cli(context.Background(), d.ws, "debug", "scheduler")
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, took)
	}
	b.ReportMetric(ms(median(runs)), "ms")
	b.ReportMetric(ms(baseDebug), "baseline-ms")
	b.ReportMetric(float64(baseDebug)/float64(median(runs)), "x-baseline")
}

// BenchmarkDaemonRSS: the daemon's resident memory with 120,000 loops once
// it settled after answering list --json and debug scheduler (and its
// peak), next to the same binary on an empty home doing the same. Target
// ≤ 200 MB.
func BenchmarkDaemonRSS(b *testing.B) {
	d := sharedDaemon(b)
	var full, empty mem
	for b.Loop() {
		for _, args := range [][]string{{"list", "--json"}, {"debug", "scheduler"}} {
			if _, err := cli(context.Background(), d.ws, args...); err != nil {
				b.Fatal(err)
			}
		}
		var err error
		if full, err = d.memory(); err != nil {
			b.Fatal(err)
		}
		e, err := startDaemon(emptyWS)
		if err != nil {
			b.Fatal(err)
		}
		for _, args := range [][]string{{"list", "--json"}, {"debug", "scheduler"}} {
			if _, err := cli(context.Background(), emptyWS, args...); err != nil {
				b.Fatal(err)
			}
		}
		empty, err = e.memory()
		e.stop()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(full.rss, "rss-MB")
	b.ReportMetric(full.peak, "peak-MB")
	b.ReportMetric(full.anon, "anon-MB")
	b.ReportMetric(full.file, "file-MB")
	b.ReportMetric(empty.rss, "empty-rss-MB")
	b.ReportMetric(full.rss/empty.rss, "x-empty")
}

// BenchmarkDaemonStart: from exec to the daemon's first scheduling tick
// (store opened and migrated, index built from 120,000 records, loops a
// crash left running reclaimed, socket served, first decision made), next
// to the same on an empty home. Target ≤ 1 s.
func BenchmarkDaemonStart(b *testing.B) {
	ws := fixture(b)
	if shared != nil { // one daemon per home: the shared one steps aside
		if err := shared.stop(); err != nil {
			b.Fatal(err)
		}
		shared, sharedOnce = nil, sync.Once{}
	}
	var full, empty, ready []time.Duration
	for b.Loop() {
		for _, w := range []string{emptyWS, ws} {
			d, err := startDaemon(w)
			if err != nil {
				b.Fatal(err)
			}
			if err := d.stop(); err != nil {
				b.Fatal(err)
			}
			if w == ws {
				full, ready = append(full, d.started), append(ready, d.ready)
			} else {
				empty = append(empty, d.started)
			}
		}
	}
	b.ReportMetric(ms(median(full)), "ms")
	b.ReportMetric(ms(median(ready)), "socket-ms")
	b.ReportMetric(ms(median(empty)), "empty-ms")
	b.ReportMetric(float64(median(full))/float64(median(empty)), "x-empty")
	b.ReportMetric(fixtureTotal, "loops")
}
