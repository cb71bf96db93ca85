package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSenderDropsOldest: a full queue drops its oldest delivery, never
// blocks, warns once per gap, and counts the drops.
func TestSenderDropsOldest(t *testing.T) {
	t.Parallel()
	var logBuf lockedBuffer
	d := &daemon{log: slog.New(slog.NewTextHandler(&logBuf, nil))}
	d.metrics = newMetrics(d)
	w := newWebhooks(d, 0)
	w.queue = 3
	s := &sender{w: w, url: "http://x", name: "http://x", wake: make(chan struct{}, 1)} // not started: nothing drains
	for seq := uint64(1); seq <= 6; seq++ {
		s.enqueue(delivery{seq: seq, event: "complete"})
	}
	var seqs []uint64
	for _, dl := range s.queue {
		seqs = append(seqs, dl.seq)
	}
	if len(seqs) != 3 || seqs[0] != 4 || seqs[2] != 6 {
		t.Errorf("queue after 6 enqueues into 3 slots = %v, want [4 5 6]", seqs)
	}
	if n := strings.Count(logBuf.String(), "queue full"); n != 1 {
		t.Errorf("%d queue-full warnings, want 1 (at most one per %s):\n%s", n, webhookWarnGap, logBuf.String())
	}
	if got := d.metrics.webhook["dropped"]; got != 3 {
		t.Errorf("dropped counter = %d, want 3", got)
	}
}
