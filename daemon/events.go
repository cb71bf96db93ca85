package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Stream timing (GET /v1/events).
const (
	heartbeatEvery = 15 * time.Second
	statusEvery    = 250 * time.Millisecond // at most one status per subscriber this often
	writeTimeout   = 30 * time.Second       // a peer that takes longer to read one line is dropped
	eventBatch     = 512                    // journal events read per transaction
	recentTerminal = 24 * time.Hour         // terminal loops in the snapshot
)

// hub wakes the event streams when the journal grows. It carries no data:
// each stream reads the journal itself from the last sequence number it
// sent, so nothing is lost and a slow stream only falls behind. poke never
// blocks, so neither the manager nor an API write ever waits for a reader.
type hub struct {
	mu   sync.Mutex
	subs map[chan struct{}]bool // true: the daemon's own follower, not a stream
	done chan struct{}
	once sync.Once
}

func newHub() *hub {
	return &hub{subs: map[chan struct{}]bool{}, done: make(chan struct{})}
}

// poke tells every stream the journal may have grown.
func (h *hub) poke() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default: // already poked; the stream will read everything
		}
	}
}

// subscribe returns a channel poked on changes; cancel with unsubscribe.
func (h *hub) subscribe() chan struct{} { return h.add(false) }

// follow is subscribe for the daemon's own journal followers (metrics,
// webhooks), which count is leaves out.
func (h *hub) follow() chan struct{} { return h.add(true) }

func (h *hub) add(internal bool) chan struct{} {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[c] = internal
	h.mu.Unlock()
	return c
}

func (h *hub) unsubscribe(c chan struct{}) {
	h.mu.Lock()
	delete(h.subs, c)
	h.mu.Unlock()
}

// count returns how many event streams are open.
func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, internal := range h.subs {
		if !internal {
			n++
		}
	}
	return n
}

// close ends the streams (after each sends what the journal holds).
func (h *hub) close() { h.once.Do(func() { close(h.done) }) }

// stream writes StreamMsg lines to one subscriber.
type stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	enc *json.Encoder
}

func (s *stream) send(m api.StreamMsg) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err := s.enc.Encode(m); err != nil {
		return err
	}
	return s.rc.Flush()
}

// events serves GET /v1/events: a snapshot, then every journal event after
// it with the loop as it is now, status updates after changes (coalesced)
// and heartbeats.
func (d *daemon) events(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	d.streams.Add(1)
	defer d.streams.Done()
	poke := d.hub.subscribe()
	defer d.hub.unsubscribe(poke)

	seq, loops, err := d.snapshot()
	if err != nil {
		return err
	}
	st, err := d.status()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w), enc: json.NewEncoder(w)}
	if err := s.send(api.StreamMsg{Type: api.StreamSnapshot, Seq: seq, Loops: loops, Status: &st}); err != nil {
		return nil // the peer left
	}
	lastStatus := time.Now()

	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	statusTimer := time.NewTimer(0)
	<-statusTimer.C
	defer statusTimer.Stop()
	statusPending := false

	for {
		closing := false
		select {
		case <-r.Context().Done():
			return nil
		case <-d.hub.done:
			closing = true
		case <-poke:
		case <-heartbeat.C:
			if s.send(api.StreamMsg{Type: api.StreamHeartbeat, Seq: seq}) != nil {
				return nil
			}
			continue
		case <-statusTimer.C:
			statusPending = false
			if d.sendStatus(s, seq) != nil {
				return nil
			}
			lastStatus = time.Now()
			continue
		}
		n, err := d.sendEvents(s, &seq)
		if err != nil {
			d.log.Debug("event stream ended", "err", err)
			return nil
		}
		if closing {
			if n > 0 {
				d.sendStatus(s, seq)
			}
			return nil
		}
		if n > 0 && !statusPending {
			if wait := statusEvery - time.Since(lastStatus); wait > 0 {
				statusPending = true
				statusTimer.Reset(wait)
			} else {
				if d.sendStatus(s, seq) != nil {
					return nil
				}
				lastStatus = time.Now()
			}
		}
	}
}

// sendStatus sends a fresh status line.
func (d *daemon) sendStatus(s *stream, seq uint64) error {
	st, err := d.status()
	if err != nil {
		d.log.Warn("event stream status", "err", err)
		return nil
	}
	return s.send(api.StreamMsg{Type: api.StreamStatus, Seq: seq, Status: &st})
}

// sendEvents sends every journal event after *seq, advancing it, and
// returns how many it sent.
func (d *daemon) sendEvents(s *stream, seq *uint64) (int, error) {
	total := 0
	for {
		var msgs []api.StreamMsg
		err := d.store.View(func(tx *store.Tx) error {
			evs, err := tx.EventsSince(*seq, eventBatch)
			if err != nil {
				return err
			}
			for i := range evs {
				evs[i].Message = d.redact.String(evs[i].Message)
				m := api.StreamMsg{Type: api.StreamEvent, Seq: evs[i].Seq, Event: &evs[i]}
				if evs[i].Loop != "" {
					l, err := tx.Get(evs[i].Loop)
					switch {
					case err == nil:
						l = d.redactLoop(l)
						m.Loop = &l
					case !errors.Is(err, store.ErrNotFound):
						return err
					}
				}
				msgs = append(msgs, m)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("read journal: %w", err)
		}
		for _, m := range msgs {
			if err := s.send(m); err != nil {
				return total, err
			}
			*seq = m.Seq
			total++
		}
		if len(msgs) < eventBatch {
			return total, nil
		}
	}
}

// snapshot reads, in one transaction, the journal's last sequence number
// and every loop that is not terminal or finished within recentTerminal,
// plus the ancestors of those loops.
func (d *daemon) snapshot() (uint64, []loop.Loop, error) {
	var seq uint64
	loops := []loop.Loop{}
	since := d.svc.Now().Add(-recentTerminal)
	err := d.store.View(func(tx *store.Tx) error {
		seq = tx.LastSeq()
		for _, st := range loop.Statuses {
			err := tx.ByStatus(st, func(l loop.Loop) bool {
				if st.Terminal() {
					end := l.FinishedAt
					if end.IsZero() {
						end = l.UpdatedAt
					}
					if end.Before(since) {
						return true
					}
				}
				loops = append(loops, l)
				return true
			})
			if err != nil {
				return err
			}
		}
		// Ancestors of what is sent come too, however old, so a client can
		// draw every loop under its real parent and see that it completed.
		have := make(map[string]bool, len(loops))
		for _, l := range loops {
			have[l.ID] = true
		}
		for i := 0; i < len(loops); i++ {
			p := loops[i].Parent
			if p == "" || have[p] {
				continue
			}
			parent, err := tx.Get(p)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			have[p] = true
			loops = append(loops, parent)
		}
		return nil
	})
	slices.SortFunc(loops, func(a, b loop.Loop) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return seq, loops, err
}

// tail calls fn with each batch of journal events after seq, in order, as
// the journal grows, until ctx ends or the hub closes (then after a last
// read, so what shutdown journals is seen). fn runs inside a read
// transaction and must not block. A failed read is logged and retried on
// the next poke.
func (d *daemon) tail(ctx context.Context, name string, seq uint64, fn func(tx *store.Tx, evs []loop.Event)) {
	poke := d.hub.follow()
	defer d.hub.unsubscribe(poke)
	safety := time.NewTicker(2 * time.Second) // pokes coalesce but are never lost; belt and braces
	defer safety.Stop()
	for {
		closing := false
		select {
		case <-ctx.Done():
			return
		case <-d.hub.done:
			closing = true
		case <-poke:
		case <-safety.C:
		}
		select { // a select picks at random among ready cases: never miss the stop
		case <-d.hub.done:
			closing = true
		default:
		}
		for {
			n := 0
			err := d.store.View(func(tx *store.Tx) error {
				evs, err := tx.EventsSince(seq, eventBatch)
				if err != nil || len(evs) == 0 {
					return err
				}
				fn(tx, evs)
				n, seq = len(evs), evs[len(evs)-1].Seq
				return nil
			})
			if err != nil {
				d.log.Warn("read journal", "for", name, "err", err)
				break
			}
			if n < eventBatch {
				break
			}
		}
		if closing {
			return
		}
	}
}
