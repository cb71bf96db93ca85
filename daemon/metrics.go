package daemon

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/loopmgr"
	"github.com/loopr-dev/loopr/store"
)

// metrics is what the daemon measures, served at GET /metrics through a
// Prometheus registry of its own (so several daemons in one process, as in
// tests, never collide) and summarised by GET /v1/stats.
//
// Counters are derived from the store's journal, which the daemon tails
// from the sequence number it started at: every start, completion, failure,
// iteration and rate-limit hit is an event there, so the numbers agree with
// `loopr list` and the event stream and nothing is counted twice. Gauges of
// loops by status and type are computed at scrape time from the store
// (cached until the journal grows). The tick duration and the dispatch
// latency come from the manager's hooks.
type metrics struct {
	d           *daemon
	reg         *prometheus.Registry
	h           http.Handler
	handlerOnce sync.Once

	tick     prometheus.Histogram
	dispatch *prometheus.HistogramVec
	tokens   *prometheus.CounterVec // by kind, type, agent
	cost     *prometheus.CounterVec // by type, agent

	tickWin, dispatchWin *window

	mu          sync.Mutex
	byType      map[string]*typeCounts // counters since start, by loop type
	rlHits      int64
	rlBlocked   time.Duration
	rlUntil     time.Time      // end of the backoff windows counted so far
	startIter   map[string]int // running loops: the iteration they started
	rateLimited map[string]bool
	webhook     map[string]int64 // deliveries by result
	reloads     map[string]int64 // config reloads by result
	gcRemoved   int64

	cacheMu  sync.Mutex
	cacheSeq uint64
	cache    map[[2]string]int // {status, type} → loops
	cacheOK  bool
}

// typeCounts are one loop type's counters.
type typeCounts struct {
	starts, completions, failures int64
	iterations                    map[string]int64 // by result
}

// Iteration results (label result of loopr_iterations_total).
const (
	iterPassed      = "passed"       // validated: complete or awaiting approval
	iterFailed      = "failed"       // a failed attempt (retry or park)
	iterRateLimited = "rate_limited" // requeued without spending an iteration
	iterRequeued    = "requeued"     // daemon stopping: back to pending, no attempt spent
	iterStopped     = "stopped"      // cancelled or invalidated while running
	iterNeedsHuman  = "needs_human"  // stopped for a person (question, stalls, no progress): not a failure
)

// windowSize is how many recent samples the quantiles of loopr stats use.
const windowSize = 2048

func newMetrics(d *daemon) *metrics {
	m := &metrics{
		d:   d,
		reg: prometheus.NewRegistry(),
		tick: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "loopr_scheduler_tick_seconds",
			Help:    "Duration of a scheduling tick: sweep, snapshot, plan and the starts it makes.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs … 3.3s
		}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loopr_dispatch_latency_seconds",
			Help: "Time from a loop being ready (created, runnable_at reached, requeued or resumed, parent finished; the latest) to its start.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
				120, 300, 600, 1800, 3600},
		}, []string{"type"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopr_tokens_total",
			Help: "Tokens agents reported using, by kind (input, output, cache_read, cache_creation), loop type and agent profile.",
		}, []string{"kind", "type", "agent"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loopr_cost_usd_total",
			Help: "Dollars agents reported spending (their total_cost_usd), by loop type and agent profile.",
		}, []string{"type", "agent"}),
		tickWin:     newWindow(windowSize),
		dispatchWin: newWindow(windowSize),
		byType:      map[string]*typeCounts{},
		startIter:   map[string]int{},
		rateLimited: map[string]bool{},
		webhook:     map[string]int64{},
		reloads:     map[string]int64{},
	}
	m.reg.MustRegister(m.tick, m.dispatch, m.tokens, m.cost, (*collector)(m),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	m.handlerOnce.Do(func() {
		m.h = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
			ErrorLog:      promLogger{m.d},
			ErrorHandling: promhttp.ContinueOnError,
		})
	})
	return m.h
}

type promLogger struct{ d *daemon }

func (l promLogger) Println(v ...any) { l.d.log.Warn("metrics", "err", v) }

// onTick is the manager's OnTick hook.
func (m *metrics) onTick(st loopmgr.TickStats) {
	m.tick.Observe(st.Duration.Seconds())
	m.tickWin.add(st.Duration)
}

// onUsage is the manager's OnUsage hook: what one iteration consumed.
func (m *metrics) onUsage(l loop.Loop, agent string, u loop.Usage) {
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens,
		"cache_read": u.CacheReadTokens, "cache_creation": u.CacheCreationTokens} {
		m.tokens.WithLabelValues(kind, l.Type, agent).Add(float64(n))
	}
	m.cost.WithLabelValues(l.Type, agent).Add(u.CostUSD)
}

// onDispatch is the manager's OnDispatch hook.
func (m *metrics) onDispatch(l loop.Loop, latency time.Duration) {
	m.dispatch.WithLabelValues(l.Type).Observe(latency.Seconds())
	m.dispatchWin.add(latency)
}

func (m *metrics) counts(typ string) *typeCounts {
	c := m.byType[typ]
	if c == nil {
		c = &typeCounts{iterations: map[string]int64{}}
		m.byType[typ] = c
	}
	return c
}

// follow tails the journal from seq and counts what happens.
func (m *metrics) follow(ctx context.Context, seq uint64) {
	err := m.d.store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Running, func(l loop.Loop) bool {
			m.startIter[l.ID] = l.Iteration
			return true
		})
	})
	if err != nil {
		m.d.log.Warn("metrics: read running loops", "err", err)
	}
	m.d.tail(ctx, "metrics", seq, m.observe)
}

// observe counts a batch of journal events.
func (m *metrics) observe(tx *store.Tx, evs []loop.Event) {
	types := map[string]string{}
	typeOf := func(id string) string {
		if t, ok := types[id]; ok {
			return t
		}
		l, err := tx.Get(id)
		if err != nil {
			return "" // deleted since (gc): not counted
		}
		types[id] = l.Type
		return l.Type
	}
	var rl *rateState
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		switch ev.Kind {
		case loop.EventRateLimit:
			m.rlHits++
			m.rateLimited[ev.Loop] = true
			if rl == nil {
				rl = readRate(tx)
			}
			// The blocked time is the union of the backoff windows: a hit
			// during a backoff only extends it.
			from := ev.Time
			if m.rlUntil.After(from) {
				from = m.rlUntil
			}
			if rl.until.After(from) {
				m.rlBlocked += rl.until.Sub(from)
				m.rlUntil = rl.until
			}
		case loop.EventTransition:
			typ := typeOf(ev.Loop)
			if typ == "" {
				continue
			}
			c := m.counts(typ)
			if ev.From == loop.Running {
				result := iterStopped
				switch ev.To {
				case loop.Complete, loop.Merging, loop.AwaitingApproval, loop.AwaitingReview:
					result = iterPassed // a pass to be merged counts when it is recorded
				case loop.Failed:
					result = iterFailed
				case loop.NeedsHuman:
					result = iterNeedsHuman
				case loop.Pending:
					switch start, known := m.startIter[ev.Loop]; {
					case known && ev.Iteration > start:
						result = iterFailed
					case m.rateLimited[ev.Loop]:
						result = iterRateLimited
					default:
						result = iterRequeued
					}
				}
				c.iterations[result]++
				delete(m.startIter, ev.Loop)
				delete(m.rateLimited, ev.Loop)
			}
			switch ev.To {
			case loop.Running:
				c.starts++
				m.startIter[ev.Loop] = ev.Iteration
				delete(m.rateLimited, ev.Loop)
			case loop.Complete:
				c.completions++
			case loop.Failed:
				c.failures++
			}
		}
	}
}

type rateState struct{ until time.Time }

// readRate reads the backoffs as they are now: a hit moved the end of its
// profile's to at least the end the hit set; the latest end counts.
func readRate(tx *store.Tx) *rateState {
	limits, _ := control.LoadLimits(tx)
	var until time.Time
	for _, st := range limits {
		if st.BackoffUntil.After(until) {
			until = st.BackoffUntil
		}
	}
	return &rateState{until: until}
}

func (m *metrics) webhookResult(result string, n int64) {
	m.mu.Lock()
	m.webhook[result] += n
	m.mu.Unlock()
}

func (m *metrics) reload(result string) {
	m.mu.Lock()
	m.reloads[result]++
	m.mu.Unlock()
}

func (m *metrics) removed(n int) {
	m.mu.Lock()
	m.gcRemoved += int64(n)
	m.mu.Unlock()
}

// loopCounts returns the loops by {status, type}, recounted only when the
// journal has grown since the last count.
func (m *metrics) loopCounts() (map[[2]string]int, error) {
	m.cacheMu.Lock()
	defer m.cacheMu.Unlock()
	err := m.d.store.View(func(tx *store.Tx) error {
		seq := tx.LastSeq()
		if m.cacheOK && seq == m.cacheSeq {
			return nil
		}
		counts := map[[2]string]int{}
		for _, st := range loop.Statuses {
			err := tx.ByStatus(st, func(l loop.Loop) bool {
				counts[[2]string{string(st), l.Type}]++
				return true
			})
			if err != nil {
				return err
			}
		}
		m.cache, m.cacheSeq, m.cacheOK = counts, seq, true
		return nil
	})
	return m.cache, err
}

// collector turns the daemon's state into metrics at scrape time.
type collector metrics

var (
	descLoops       = prometheus.NewDesc("loopr_loops", "Loops in the store by status and type.", []string{"status", "type"}, nil)
	descRunning     = prometheus.NewDesc("loopr_running", "Loops running by type.", []string{"type"}, nil)
	descTypeCap     = prometheus.NewDesc("loopr_type_cap", "Most loops of a type that may run at once (0: no per-type cap).", []string{"type"}, nil)
	descMaxLoops    = prometheus.NewDesc("loopr_max_loops", "Most loops that may run at once.", nil, nil)
	descRateLimited = prometheus.NewDesc("loopr_rate_limited", "1 while some agent profile is rate limited (its loops wait unless a fallback is free).", nil, nil)
	descRLStreak    = prometheus.NewDesc("loopr_rate_limit_consecutive_hits", "Rate-limit signals since the last success (drives the backoff).", nil, nil)
	descDisk        = prometheus.NewDesc("loopr_disk_free_gb", "Free space on the home's file system, GB.", nil, nil)
	descUptime      = prometheus.NewDesc("loopr_uptime_seconds", "Seconds since the daemon started.", nil, nil)
	descStreams     = prometheus.NewDesc("loopr_event_subscribers", "Open /v1/events streams.", nil, nil)
	descStarts      = prometheus.NewDesc("loopr_loop_starts_total", "Iterations started (pending → running), by type.", []string{"type"}, nil)
	descCompletions = prometheus.NewDesc("loopr_loop_completions_total", "Loops that completed, by type.", []string{"type"}, nil)
	descFailures    = prometheus.NewDesc("loopr_loop_failures_total", "Loops that failed (budget spent, rejected, orphaned), by type.", []string{"type"}, nil)
	descIterations  = prometheus.NewDesc("loopr_iterations_total", "Iterations that ended, by type and result (passed, failed, rate_limited, requeued, stopped).", []string{"type", "result"}, nil)
	descRLHits      = prometheus.NewDesc("loopr_rate_limit_hits_total", "Rate-limit signals from agents.", nil, nil)
	descRLBlocked   = prometheus.NewDesc("loopr_rate_limit_blocked_seconds_total", "Seconds the shared 429 backoff kept new agents from starting (union of the backoff windows).", nil, nil)
	descWebhooks    = prometheus.NewDesc("loopr_webhook_deliveries_total", "Webhook deliveries by result (delivered, failed after every attempt, dropped from a full queue).", []string{"result"}, nil)
	descReloads     = prometheus.NewDesc("loopr_config_reloads_total", "Changes of loopr.yml seen by the daemon, by result (applied, refused, held: its commands not trusted).", []string{"result"}, nil)
	descGC          = prometheus.NewDesc("loopr_gc_removed_loops_total", "Loops removed by retention.", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLoops, descRunning, descTypeCap, descMaxLoops, descRateLimited,
		descRLStreak, descDisk, descUptime, descStreams, descStarts, descCompletions, descFailures,
		descIterations, descRLHits, descRLBlocked, descWebhooks, descReloads, descGC} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := (*metrics)(c)
	d := m.d
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, labels...)
	}
	types := d.config().Types()
	counts, err := m.loopCounts()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descLoops, err)
	} else {
		for k := range counts { // types no longer configured still have loops
			if !slices.Contains(types, k[1]) {
				types = append(types, k[1])
			}
		}
		for _, st := range loop.Statuses {
			for _, t := range types {
				gauge(descLoops, float64(counts[[2]string{string(st), t}]), string(st), t)
			}
		}
	}
	if st, err := d.status(); err != nil {
		ch <- prometheus.NewInvalidMetric(descRunning, err)
	} else {
		for _, t := range st.Types {
			gauge(descRunning, float64(t.Running), t.Type)
			gauge(descTypeCap, float64(t.Cap), t.Type)
		}
		gauge(descMaxLoops, float64(st.MaxLoops))
		gauge(descRateLimited, b2f(st.RateLimited))
		gauge(descRLStreak, float64(st.RateLimit.Hits))
		gauge(descDisk, st.DiskFreeGB)
		gauge(descUptime, float64(st.UptimeSecs))
	}
	gauge(descStreams, float64(d.hub.count()))

	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range types {
		tc := m.byType[t]
		if tc == nil {
			tc = &typeCounts{}
		}
		counter(descStarts, float64(tc.starts), t)
		counter(descCompletions, float64(tc.completions), t)
		counter(descFailures, float64(tc.failures), t)
		for _, r := range []string{iterPassed, iterFailed, iterRateLimited, iterRequeued, iterStopped, iterNeedsHuman} {
			counter(descIterations, float64(tc.iterations[r]), t, r)
		}
	}
	counter(descRLHits, float64(m.rlHits))
	counter(descRLBlocked, m.rlBlocked.Seconds())
	for _, r := range []string{"delivered", "failed", "dropped"} {
		counter(descWebhooks, float64(m.webhook[r]), r)
	}
	for _, r := range []string{"applied", "refused", "held"} {
		counter(descReloads, float64(m.reloads[r]), r)
	}
	counter(descGC, float64(m.gcRemoved))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// window keeps the most recent durations for quantiles.
type window struct {
	mu    sync.Mutex
	buf   []time.Duration
	next  int
	count int64
}

func newWindow(n int) *window { return &window{buf: make([]time.Duration, 0, n)} }

func (w *window) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count++
	if len(w.buf) < cap(w.buf) {
		w.buf = append(w.buf, d)
		return
	}
	w.buf[w.next] = d
	w.next = (w.next + 1) % len(w.buf)
}

// summary returns the count so far and p50, p99 and max of the window.
func (w *window) summary() api.Latency {
	w.mu.Lock()
	s := slices.Clone(w.buf)
	n := w.count
	w.mu.Unlock()
	out := api.Latency{Count: n, Window: len(s)}
	if len(s) == 0 {
		return out
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) float64 { // nearest rank
		i := int(p*float64(len(s))+0.999999) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	out.P50Ms, out.P99Ms, out.MaxMs = q(0.50), q(0.99), ms(s[len(s)-1])
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// stats fills what the daemon measured into st.
func (m *metrics) stats(st *api.Stats) {
	st.Tick = m.tickWin.summary()
	st.Dispatch = m.dispatchWin.summary()
	m.mu.Lock()
	defer m.mu.Unlock()
	st.RateLimit.Hits = m.rlHits
	st.RateLimit.BlockedSecs = m.rlBlocked.Seconds()
	byType := maps.Clone(m.byType)
	for i := range st.Types {
		if tc := byType[st.Types[i].Type]; tc != nil {
			t := &st.Types[i]
			t.Starts, t.Completions, t.Failures = tc.starts, tc.completions, tc.failures
			for _, n := range tc.iterations {
				t.Iterations += n
			}
		}
	}
}
