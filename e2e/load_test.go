package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
)

// TestLoad: 8 concurrent clients submit 10,000 loops through the socket
// (four one by one, four in batches of 50) while the daemon schedules and
// runs them (agent `true`, no validation). None is lost or duplicated (ids
// and titles), every API call succeeds, the p50/p99 latency of single and
// batch submissions is reported, and the daemon's resident memory stays
// bounded. -short submits 2,000. LOOPR_LOAD_LOOPS overrides the count.
func TestLoad(t *testing.T) {
	t.Parallel()
	const clients, batchSize = 8, 50
	total := 10000
	if testing.Short() {
		total = 2000
	}
	if s := os.Getenv("LOOPR_LOAD_LOOPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < clients*batchSize {
			t.Fatalf("LOOPR_LOAD_LOOPS=%q: want a number >= %d", s, clients*batchSize)
		}
		total = n
	}
	per := total / clients
	total = per * clients
	// relSimpleConfig caps at 4 loops; the load runs at loopr's default caps.
	cfg := relSimpleConfig([]string{"true"}, "")
	cfg = strings.Replace(cfg, "max_loops: 4", "max_loops: 50", 1)
	cfg = strings.Replace(cfg, "max_api_calls: 4", "max_api_calls: 10", 1)
	e := newRelEnv(t, cfg)
	d := e.start()
	pid := d.pid()

	// Sample the daemon's memory while it works.
	var rssMax int
	samplerDone := make(chan struct{})
	stopSampler := make(chan struct{})
	go func() {
		defer close(samplerDone)
		for {
			if rss, _, err := relRSS(pid); err == nil {
				rssMax = max(rssMax, rss)
			}
			select {
			case <-stopSampler:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	type submitted struct {
		ids, titles []string
		single      []time.Duration
		batch       []time.Duration
		err         error
	}
	results := make([]submitted, clients)
	began := time.Now()
	var wg sync.WaitGroup
	for ci := range clients {
		wg.Go(func() {
			ctx := context.Background()
			c, err := client.Dial(ctx, d.c.Socket())
			if err != nil {
				results[ci].err = err
				return
			}
			defer c.Close()
			r := &results[ci]
			req := func(j int) api.CreateRequest {
				title := fmt.Sprintf("load c%d n%05d", ci, j)
				r.titles = append(r.titles, title)
				return api.CreateRequest{Type: loop.Ralph, Title: title, Task: "Load test task " + title + "."}
			}
			if ci < clients/2 {
				for j := range per {
					t0 := time.Now()
					l, err := c.Create(ctx, req(j))
					r.single = append(r.single, time.Since(t0))
					if err != nil {
						r.err = fmt.Errorf("create %d: %w", j, err)
						return
					}
					r.ids = append(r.ids, l.ID)
				}
				return
			}
			for j := 0; j < per; j += batchSize {
				var reqs []api.CreateRequest
				for k := j; k < min(j+batchSize, per); k++ {
					reqs = append(reqs, req(k))
				}
				t0 := time.Now()
				res, err := c.CreateBatch(ctx, reqs)
				r.batch = append(r.batch, time.Since(t0))
				if err == nil && (res.Failed != 0 || res.Created != len(reqs)) {
					err = fmt.Errorf("%d created, %d failed: %+v", res.Created, res.Failed, res.Results)
				}
				if err != nil {
					r.err = fmt.Errorf("batch at %d: %w", j, err)
					return
				}
				for _, it := range res.Results {
					r.ids = append(r.ids, it.ID)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	var ids, titles []string
	var single, batch []time.Duration
	for ci, r := range results {
		if r.err != nil {
			t.Fatalf("client %d: %v", ci, r.err)
		}
		ids = append(ids, r.ids...)
		titles = append(titles, r.titles...)
		single = append(single, r.single...)
		batch = append(batch, r.batch...)
	}

	// None lost, none duplicated: the daemon lists exactly what was
	// acknowledged, each id and title once.
	ctx := context.Background()
	all, err := d.c.List(ctx, api.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st := d.status(t)
	close(stopSampler)
	<-samplerDone
	rss, hwm, err := relRSS(pid)
	if err != nil {
		t.Fatal(err)
	}
	rssMax = max(rssMax, rss)
	var gotIDs, gotTitles []string
	for _, l := range all {
		gotIDs = append(gotIDs, l.ID)
		gotTitles = append(gotTitles, l.Title)
		if l.Status == loop.Failed || l.Status == loop.Cancelled {
			t.Errorf("loop %s is %s: %s", l.ID, l.Status, l.Reason)
		}
	}
	for name, pair := range map[string][2][]string{"ids": {ids, gotIDs}, "titles": {titles, gotTitles}} {
		want, got := slices.Sorted(slices.Values(pair[0])), slices.Sorted(slices.Values(pair[1]))
		if len(slices.Compact(slices.Clone(want))) != total {
			t.Errorf("%s acknowledged to the clients: %d distinct of %d", name, len(slices.Compact(slices.Clone(want))), total)
		}
		if !slices.Equal(want, got) {
			t.Errorf("%s: the daemon lists %d, the clients got %d acknowledged (lost or duplicated)", name, len(got), len(want))
		}
	}
	ps, pb := relPercentiles(single), relPercentiles(batch)
	t.Logf("load: %d loops from %d clients in %s (%.0f loops/s); %d single creates p50 %s p99 %s max %s; %d batches of %d p50 %s p99 %s max %s",
		total, clients, took.Round(time.Millisecond), float64(total)/took.Seconds(),
		len(single), ps[0], ps[1], ps[2], len(batch), batchSize, pb[0], pb[1], pb[2])
	t.Logf("load: meanwhile the daemon ran %d loops to completion (%d running, %d pending at the end); daemon RSS peak %d MiB (VmHWM %d MiB, now %d MiB)",
		st.Counts[loop.Complete], st.Counts[loop.Running], st.Counts[loop.Pending], rssMax>>10, hwm>>10, rss>>10)
	fmt.Printf("load: loops=%d clients=%d took=%s single_p50=%s single_p99=%s batch_p50=%s batch_p99=%s completed_meanwhile=%d rss_peak_mib=%d lost=0 duplicated=0\n",
		total, clients, took.Round(time.Millisecond), ps[0], ps[1], pb[0], pb[1], st.Counts[loop.Complete], hwm>>10)
	if ticks := relTickDurations(e.output(), total/2); len(ticks) > 0 {
		pt := relPercentiles(ticks)
		t.Logf("load: %d scheduling ticks with more than %d loops waiting took p50 %s, p99 %s, max %s", len(ticks), total/2, pt[0], pt[1], pt[2])
	}
	const rssBound = 512 << 10 // KiB
	if hwm > rssBound {
		t.Errorf("daemon peak RSS %d MiB, want < %d MiB", hwm>>10, rssBound>>10)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d after SIGTERM, want 0", code)
	}
	loops, evs := e.relStore(t)
	if len(loops) != total {
		t.Errorf("store holds %d loops, want %d", len(loops), total)
	}
	if p := relJournalProblems(loops, evs); len(p) > 0 {
		t.Errorf("journal disagrees with the records (%d problems), e.g. %s", len(p), p[0])
	}
}

// relPercentiles returns the p50, p99 and max of ds, rounded.
func relPercentiles(ds []time.Duration) [3]time.Duration {
	if len(ds) == 0 {
		return [3]time.Duration{}
	}
	s := slices.Sorted(slices.Values(ds))
	at := func(p float64) time.Duration {
		return s[min(len(s)-1, int(p*float64(len(s))))].Round(10 * time.Microsecond)
	}
	return [3]time.Duration{at(0.50), at(0.99), s[len(s)-1].Round(10 * time.Microsecond)}
}

// relTickDurations returns the durations of the scheduler ticks the daemon
// logged (at info level: those that changed something) with more than
// minPending loops pending.
func relTickDurations(log string, minPending int) []time.Duration {
	var out []time.Duration
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="scheduler tick"`) {
			continue
		}
		var pending int
		var took time.Duration
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "pending":
				pending, _ = strconv.Atoi(v)
			case "took":
				took, _ = time.ParseDuration(v)
			}
		}
		if pending > minPending && took > 0 {
			out = append(out, took)
		}
	}
	return out
}
