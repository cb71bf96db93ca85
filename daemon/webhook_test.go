package daemon_test

import (
	"context"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// receiver is a webhook endpoint that records what it is sent. answer, if
// set, picks the status of each attempt (n counts attempts at that seq).
type receiver struct {
	srv    *httptest.Server
	answer func(p api.WebhookPayload, n int) int

	mu       sync.Mutex
	got      []api.WebhookPayload // delivered (answered 2xx)
	attempts map[uint64]int
	headers  []string // X-Loopr-Event of each delivery
}

func newReceiver(t *testing.T, answer func(api.WebhookPayload, int) int) *receiver {
	t.Helper()
	r := &receiver{answer: answer, attempts: map[uint64]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p api.WebhookPayload
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook request %s %q", req.Method, req.Header.Get("Content-Type"))
		}
		if err := json.NewDecoder(req.Body).Decode(&p); err != nil {
			t.Errorf("webhook body: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.attempts[p.Seq]++
		n := r.attempts[p.Seq]
		r.mu.Unlock()
		code := http.StatusNoContent
		if r.answer != nil {
			code = r.answer(p, n)
		}
		if code/100 == 2 {
			r.mu.Lock()
			r.got = append(r.got, p)
			r.headers = append(r.headers, req.Header.Get("X-Loopr-Event")+" "+req.Header.Get("X-Loopr-Delivery"))
			r.mu.Unlock()
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) delivered() []api.WebhookPayload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// waitDelivered waits until the receiver holds n deliveries.
func (r *receiver) waitDelivered(t *testing.T, n int, within time.Duration) []api.WebhookPayload {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := r.delivered()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook receiver got %d deliveries after %s, want %d", len(got), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runLoops creates n ralph loops that run at once and waits until all are
// complete; it returns their ids and how long that took.
func runLoops(t *testing.T, d *testDaemon, n int, within time.Duration) ([]string, time.Duration) {
	t.Helper()
	ctx := context.Background()
	reqs := make([]api.CreateRequest, n)
	for i := range reqs {
		reqs[i] = api.CreateRequest{Type: loop.Ralph, Title: "job " + strconv.Itoa(i)}
	}
	began := time.Now()
	res, err := d.c.CreateBatch(ctx, reqs)
	if err != nil || res.Created != n {
		t.Fatalf("CreateBatch() = %+v, %v", res, err)
	}
	ids := make([]string, n)
	for i, r := range res.Results {
		ids[i] = r.ID
	}
	deadline := began.Add(within)
	for {
		done, err := d.c.List(ctx, api.ListRequest{Status: []loop.Status{loop.Complete}})
		if err != nil {
			t.Fatal(err)
		}
		if len(done) >= n {
			return ids, time.Since(began)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d loops complete after %s", len(done), n, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWebhookDeliversEachEventOnceInOrder: every subscribed event reaches
// the receiver exactly once, in journal order, with the loop as JSON.
func TestWebhookDeliversEachEventOnceInOrder(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, nil)
	other := newReceiver(t, nil) // a second receiver with other events
	cfg := testConfig()
	cfg.Webhooks = []config.Webhook{
		{URL: rcv.srv.URL + "/hook", Events: []string{"created", "running", "complete"}},
		{URL: other.srv.URL, Events: []string{"complete"}},
	}
	d := startDaemon(t, newPaths(t), cfg)
	const n = 20
	ids, _ := runLoops(t, d, n, 30*time.Second)

	got := rcv.waitDelivered(t, 3*n, 20*time.Second)
	time.Sleep(300 * time.Millisecond) // anything more would be a duplicate
	got = rcv.delivered()
	if len(got) != 3*n {
		var b strings.Builder
		for _, p := range got {
			fmt.Fprintf(&b, "\n  seq %d %s %s iteration %d", p.Seq, p.Loop.ID, p.Event, p.Loop.Iteration)
		}
		t.Fatalf("receiver got %d deliveries, want %d (each event once):%s", len(got), 3*n, b.String())
	}
	seen := map[uint64]bool{}
	perLoop := map[string][]string{}
	for i, p := range got {
		if seen[p.Seq] {
			t.Errorf("event seq %d delivered twice", p.Seq)
		}
		seen[p.Seq] = true
		if i > 0 && p.Seq <= got[i-1].Seq {
			t.Errorf("delivery %d: seq %d after %d: out of journal order", i, p.Seq, got[i-1].Seq)
		}
		if p.Loop.ID == "" || p.Loop.Type != loop.Ralph || p.Time.IsZero() {
			t.Errorf("delivery %d: loop %+v time %v; want the loop record and the event time", i, p.Loop, p.Time)
		}
		perLoop[p.Loop.ID] = append(perLoop[p.Loop.ID], p.Event)
	}
	for _, id := range ids {
		if diff := cmp.Diff([]string{"created", "running", "complete"}, perLoop[id]); diff != "" {
			t.Errorf("loop %s events mismatch (-want +got):\n%s", id, diff)
		}
	}
	rcv.mu.Lock()
	if h := rcv.headers[0]; h != "created "+strconv.FormatUint(got[0].Seq, 10) {
		t.Errorf("first delivery headers X-Loopr-Event, X-Loopr-Delivery = %q", h)
	}
	rcv.mu.Unlock()
	if o := other.waitDelivered(t, n, 10*time.Second); len(o) != n || o[0].Event != "complete" || o[0].To != loop.Complete || o[0].From != loop.Running {
		t.Errorf("second receiver: %d deliveries, first %+v; want %d complete events", len(o), o[0], n)
	}
}

// TestWebhookRetries: a failing receiver is retried with backoff until it
// answers 2xx (delivered once); a 4xx is not retried; a receiver that never
// answers well is given up after 4 attempts. Failures are counted.
func TestWebhookRetries(t *testing.T) {
	t.Parallel()
	flaky := newReceiver(t, func(_ api.WebhookPayload, n int) int {
		if n < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	refusing := newReceiver(t, func(api.WebhookPayload, int) int { return http.StatusForbidden })
	broken := newReceiver(t, func(api.WebhookPayload, int) int { return http.StatusInternalServerError })
	cfg := testConfig()
	cfg.Webhooks = []config.Webhook{
		{URL: flaky.srv.URL, Events: []string{"complete"}},
		{URL: refusing.srv.URL, Events: []string{"complete"}},
		{URL: broken.srv.URL, Events: []string{"complete"}},
	}
	d := startDaemonWith(t, newPaths(t), cfg, func(o *daemon.Options) { o.WebhookBackoff = 10 * time.Millisecond })
	runLoops(t, d, 1, 20*time.Second)

	got := flaky.waitDelivered(t, 1, 10*time.Second)
	deadline := time.Now().Add(testslack.Scale(10 * time.Second))
	for {
		m := scrape(t, d)
		if m[`loopr_webhook_deliveries_total{result="failed"}`] == 2 || time.Now().After(deadline) {
			if m[`loopr_webhook_deliveries_total{result="delivered"}`] != 1 || m[`loopr_webhook_deliveries_total{result="failed"}`] != 2 {
				t.Errorf("webhook deliveries delivered %g failed %g; want 1 2",
					m[`loopr_webhook_deliveries_total{result="delivered"}`], m[`loopr_webhook_deliveries_total{result="failed"}`])
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	attempts := func(r *receiver) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.attempts[got[0].Seq]
	}
	if a, b, c := attempts(flaky), attempts(refusing), attempts(broken); a != 3 || b != 1 || c != 4 {
		t.Errorf("attempts: flaky %d, 403 %d, 500 %d; want 3 (delivered on the third), 1 (4xx is final), 4 (then given up)", a, b, c)
	}
	if len(flaky.delivered()) != 1 {
		t.Errorf("flaky receiver has %d deliveries, want 1", len(flaky.delivered()))
	}
}

// TestDeadWebhookDoesNotSlowScheduling runs the same loops without
// webhooks and with two dead receivers (one refuses connections, one
// accepts and never answers) subscribed to every event: the loops complete
// in about the same time.
func TestDeadWebhookDoesNotSlowScheduling(t *testing.T) {
	// Not parallel: it compares two timings.
	const n = 40
	base := startDaemon(t, newPaths(t), testConfig())
	runLoops(t, base, 5, 60*time.Second) // warm up: the first agent processes start slower
	_, without := runLoops(t, base, n, 60*time.Second)
	base.stop(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	cfg := testConfig()
	cfg.Webhooks = []config.Webhook{
		{URL: refused, Events: config.WebhookEvents},
		{URL: hang.URL, Events: config.WebhookEvents},
	}
	d := startDaemon(t, newPaths(t), cfg)
	runLoops(t, d, 5, 60*time.Second)
	_, with := runLoops(t, d, n, 60*time.Second)
	t.Logf("%d loops complete in %s without webhooks, %s with two dead receivers", n, without.Round(time.Millisecond), with.Round(time.Millisecond))
	if limit := 2*without + time.Second; with > limit {
		t.Errorf("with dead webhooks %d loops took %s, over %s (twice the %s without, plus 1s)", n, with, limit, without)
	}
	// The daemon still stops promptly: queued deliveries are dropped.
	began := time.Now()
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("daemon with dead webhooks took %s to stop", took)
	}
	if !strings.Contains(d.log.String(), "deliveries dropped") {
		t.Errorf("no warning about dropped deliveries in the log")
	}
}

// TestWebhookCatchesUpAfterRestart: events written while no daemon ran
// (the CLI on the store) are delivered at the next start, and events
// delivered before are not sent again.
func TestWebhookCatchesUpAfterRestart(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, nil)
	cfg := testConfig()
	cfg.Webhooks = []config.Webhook{{URL: rcv.srv.URL, Events: []string{"created", "cancelled"}}}
	paths := newPaths(t)
	d := startDaemon(t, paths, cfg)
	first := create(t, d.c, "first", false)
	rcv.waitDelivered(t, 1, 10*time.Second)
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}

	// No daemon: the CLI's way, straight on the store.
	st, err := store.Open(filepath.Join(paths.Home, "loopr.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := control.New(st, paths, func() *config.Config { return cfg }, time.Now)
	if _, err := svc.Act(first.ID, api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	startDaemon(t, paths, cfg)
	got := rcv.waitDelivered(t, 2, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	got = rcv.delivered()
	var events []string
	for _, p := range got {
		events = append(events, p.Event+" "+p.Loop.ID)
	}
	if diff := cmp.Diff([]string{"created " + first.ID, "cancelled " + first.ID}, events); diff != "" {
		t.Errorf("deliveries across a restart mismatch (-want +got):\n%s", diff)
	}
}
