package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Webhook delivery (the webhooks: setting, seed 003).
const (
	webhookTimeout  = 10 * time.Second // one attempt
	webhookAttempts = 4                // the first and three retries
	webhookQueue    = 1024             // deliveries waiting per receiver; the oldest is dropped beyond
	webhookDrain    = 3 * time.Second  // how long shutdown lets queued deliveries go out
	webhookWarnGap  = 10 * time.Second // at most one "queue full" warning per receiver this often
	webhookCursor   = "webhooks"       // meta key: the last journal seq handed to the queues
)

// webhooks delivers loop events to the receivers loopr.yml names. It tails
// the store's journal like an event stream, so each event is seen once and
// in order; it hands each matching event to its receiver's sender, whose
// own goroutine POSTs them one at a time, in order, with retries. Handing
// over never blocks (a full queue drops its oldest delivery, with a
// warning), so a slow or dead receiver never holds up the journal, the
// manager or the API. The journal position is saved in the store's meta, so
// events written while no daemon ran (the CLI on the store) go out at the
// next start; deliveries still queued at shutdown after webhookDrain are
// dropped (logged). The position is saved at most once a second, so after a
// crash the last second's events may go out again (receivers can dedupe on
// X-Loopr-Delivery, the journal seq).
type webhooks struct {
	d       *daemon
	client  *http.Client
	backoff time.Duration // before the first retry; doubles
	queue   int           // deliveries a sender holds

	mu      sync.Mutex
	senders map[string]*sender // by URL
	cursor  uint64
	saved   uint64
	wg      sync.WaitGroup
}

func newWebhooks(d *daemon, backoff time.Duration) *webhooks {
	if backoff <= 0 {
		backoff = time.Second
	}
	return &webhooks{
		d: d,
		client: &http.Client{
			Timeout: webhookTimeout,
			// A receiver answers; it does not send loop events elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		backoff: backoff,
		queue:   webhookQueue,
		senders: map[string]*sender{},
	}
}

// run delivers events after from (or after the saved position, when
// earlier) until ctx ends or the daemon stops.
func (w *webhooks) run(ctx context.Context, from uint64) {
	err := w.d.store.View(func(tx *store.Tx) error {
		var c struct {
			Seq uint64 `json:"seq"`
		}
		ok, err := tx.Meta(webhookCursor, &c)
		if ok && err == nil && c.Seq < from {
			from = c.Seq
		}
		return err
	})
	if err != nil {
		w.d.log.Warn("webhooks: read saved position", "err", err)
	}
	w.cursor, w.saved = from, from

	saveCtx, stopSave := context.WithCancel(ctx)
	saveDone := make(chan struct{})
	go func() {
		defer close(saveDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-saveCtx.Done():
				return
			case <-t.C:
				w.save()
			}
		}
	}()

	w.d.tail(ctx, "webhooks", from, w.dispatch)

	stopSave()
	<-saveDone
	w.drain()
	w.save()
}

// save stores the journal position when it moved.
func (w *webhooks) save() {
	w.mu.Lock()
	cur := w.cursor
	w.mu.Unlock()
	if cur == w.saved {
		return
	}
	err := w.d.store.Update(func(tx *store.Tx) error {
		return tx.SetMeta(webhookCursor, struct {
			Seq uint64 `json:"seq"`
		}{cur})
	})
	if err != nil {
		w.d.log.Warn("webhooks: save position", "err", err)
		return
	}
	w.saved = cur
}

// drain lets the senders deliver what is queued, for at most webhookDrain,
// then stops them.
func (w *webhooks) drain() {
	deadline := time.Now().Add(webhookDrain)
	w.mu.Lock()
	senders := make([]*sender, 0, len(w.senders))
	for _, s := range w.senders {
		senders = append(senders, s)
	}
	w.mu.Unlock()
	for _, s := range senders {
		for !s.idle() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := s.stop(); n > 0 {
			w.d.log.Warn("webhooks: daemon stopping, deliveries dropped", "url", s.name, "dropped", n)
			w.d.metrics.webhookResult("dropped", int64(n))
		}
	}
	w.wg.Wait()
}

// eventName is the webhook event an journal event is, or "".
func eventName(ev loop.Event) string {
	switch ev.Kind {
	case loop.EventCreated:
		return "created"
	case loop.EventTransition:
		return string(ev.To)
	case loop.EventRateLimit:
		return "rate_limited"
	case loop.EventTreeComplete:
		return "tree_complete"
	}
	return ""
}

// dispatch hands a batch of journal events to the senders that want them.
// It runs inside the tail's read transaction and never blocks.
func (w *webhooks) dispatch(tx *store.Tx, evs []loop.Event) {
	subs := w.sync()
	defer func() {
		w.mu.Lock()
		w.cursor = evs[len(evs)-1].Seq
		w.mu.Unlock()
	}()
	if len(subs) == 0 || w.d.svc.Untrusted() != "" {
		return // the URLs are the file's: nothing is sent until it is trusted
	}
	for _, ev := range evs {
		name := eventName(ev)
		if name == "" || ev.Loop == "" {
			continue
		}
		var body []byte
		for _, s := range subs {
			if !slices.Contains(s.events, name) {
				continue
			}
			if body == nil {
				l, err := tx.Get(ev.Loop)
				if err != nil {
					break // the loop is gone (gc): nothing to say
				}
				l = w.d.redactLoop(l)
				body, err = json.Marshal(api.WebhookPayload{Event: name, Seq: ev.Seq, Time: ev.Time,
					From: ev.From, To: ev.To, Iteration: ev.Iteration, Message: w.d.redact.String(ev.Message), Loop: l,
					Action: actionFor(name, l)})
				if err != nil {
					w.d.log.Error("webhooks: encode", "seq", ev.Seq, "err", err)
					break
				}
			}
			s.s.enqueue(delivery{seq: ev.Seq, event: name, loop: ev.Loop, body: body})
		}
	}
}

type subscription struct {
	s      *sender
	events []string
}

// sync makes one sender per configured URL (entries naming the same URL
// share it and the union of their events), starting new ones and stopping
// the ones no longer configured.
func (w *webhooks) sync() []subscription {
	cfg := w.d.config()
	want := map[string][]string{}
	var order []string
	for _, h := range cfg.Webhooks {
		if _, ok := want[h.URL]; !ok {
			order = append(order, h.URL)
		}
		for _, e := range h.Events {
			if !slices.Contains(want[h.URL], e) {
				want[h.URL] = append(want[h.URL], e)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for u, s := range w.senders {
		if _, ok := want[u]; !ok {
			delete(w.senders, u)
			if n := s.stop(); n > 0 {
				w.d.log.Warn("webhooks: receiver removed from the configuration, deliveries dropped", "url", s.name, "dropped", n)
				w.d.metrics.webhookResult("dropped", int64(n))
			}
		}
	}
	subs := make([]subscription, 0, len(order))
	for _, u := range order {
		s := w.senders[u]
		if s == nil {
			s = w.start(u)
			w.senders[u] = s
		}
		subs = append(subs, subscription{s: s, events: want[u]})
	}
	return subs
}

// delivery is one event on its way to one receiver.
type delivery struct {
	seq   uint64
	event string
	loop  string
	body  []byte
}

// sender delivers to one receiver, in order, from a bounded queue.
type sender struct {
	w      *webhooks
	url    string
	name   string // the URL without credentials, for logs
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	mu       sync.Mutex
	queue    []delivery
	busy     bool
	dropped  int // since the last warning
	lastWarn time.Time
}

// start starts the sender of u (w.mu held).
func (w *webhooks) start(u string) *sender {
	name := u
	if pu, err := url.Parse(u); err == nil {
		name = pu.Redacted()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &sender{w: w, url: u, name: name, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1)}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		s.loop()
	}()
	return s
}

// enqueue adds dl, dropping the oldest queued delivery when full. It never
// blocks.
func (s *sender) enqueue(dl delivery) {
	s.mu.Lock()
	if len(s.queue) >= s.w.queue {
		old := s.queue[0]
		s.queue = s.queue[1:]
		s.dropped++
		s.w.d.metrics.webhookResult("dropped", 1)
		if now := time.Now(); now.Sub(s.lastWarn) >= webhookWarnGap {
			s.w.d.log.Warn("webhooks: queue full, oldest deliveries dropped", "url", s.name,
				"dropped", s.dropped, "oldest_dropped_seq", old.seq, "queue", s.w.queue)
			s.lastWarn, s.dropped = now, 0
		}
	}
	s.queue = append(s.queue, dl)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// idle reports whether nothing is queued or in flight.
func (s *sender) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) == 0 && !s.busy
}

// stop ends the sender (an attempt in flight is cancelled) and returns how
// many deliveries it drops.
func (s *sender) stop() int {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.queue)
	s.queue = nil
	return n
}

func (s *sender) loop() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.busy = false
			s.mu.Unlock()
			select {
			case <-s.ctx.Done():
				return
			case <-s.wake:
			}
			continue
		}
		dl := s.queue[0]
		s.queue = s.queue[1:]
		s.busy = true
		s.mu.Unlock()
		s.deliver(dl)
		if s.ctx.Err() != nil {
			return
		}
	}
}

// deliver POSTs dl, retrying after backoff, 2·backoff, 4·backoff.
func (s *sender) deliver(dl delivery) {
	wait := s.w.backoff
	var err error
	attempt := 0
	for attempt = 1; attempt <= webhookAttempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait *= 2
		}
		var retry bool
		retry, err = s.post(dl)
		if err == nil {
			s.w.d.metrics.webhookResult("delivered", 1)
			s.w.d.log.Debug("webhook delivered", "url", s.name, "event", dl.event, "seq", dl.seq, "loop", dl.loop, "attempt", attempt)
			return
		}
		if s.ctx.Err() != nil {
			return
		}
		if !retry {
			break
		}
	}
	s.w.d.metrics.webhookResult("failed", 1)
	s.w.d.log.Warn("webhook delivery failed", "url", s.name, "event", dl.event, "seq", dl.seq, "loop", dl.loop,
		"attempts", min(attempt, webhookAttempts), "err", err)
}

// post makes one attempt. A 2xx answer is success; a 4xx other than 408
// and 429 will not change on retry.
func (s *sender) post(dl delivery) (retry bool, err error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.url, bytes.NewReader(dl.body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "loopr/"+s.w.d.o.Version)
	req.Header.Set("X-Loopr-Event", dl.event)
	req.Header.Set("X-Loopr-Delivery", fmt.Sprint(dl.seq))
	resp, err := s.w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the log line already, maybe with credentials
		}
		return true, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	err = fmt.Errorf("answered %s", resp.Status)
	c := resp.StatusCode
	return c/100 != 4 || c == http.StatusRequestTimeout || c == http.StatusTooManyRequests, err
}
