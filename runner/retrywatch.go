package runner

import (
	"bytes"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/preset"
)

// maxWatchLine is how much of one output line the retry watch keeps to
// classify it (plus the line's last byte): the markers it looks for lie at
// the start of a line.
const maxWatchLine = 4 << 10

// retryWatch follows an agent's output line by line and fires once the
// agent has printed nothing but retry notices (preset.Line) for d: its CLI
// waits out a provider error by itself (opencode retries a 429 for about a
// minute and a half and honours a retry-after of days; gemini waits up to
// 300 s a try), which loopr would rather wait out itself, knowing why and
// for how long. A structured event (Progress) ends the retrying.
type retryWatch struct {
	kind  func(line []byte) preset.LineKind
	d     time.Duration
	fired chan struct{} // closed when the watch fires

	mu      sync.Mutex
	line    []byte // the head of the line being written
	last    byte   // its last byte, when the head is cut
	cut     bool
	retries bool // printed only retry notices since the timer was armed
	timer   *time.Timer
	gen     int
	done    bool
}

func newRetryWatch(kind func(line []byte) preset.LineKind, d time.Duration) *retryWatch {
	return &retryWatch{kind: kind, d: d, fired: make(chan struct{})}
}

// Write classifies each complete line of p; it never fails.
func (w *retryWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxWatchLine - len(w.line); room > 0 {
			w.line = append(w.line, chunk[:min(room, len(chunk))]...)
		}
		if len(chunk) > 0 && len(w.line) == maxWatchLine {
			w.cut, w.last = true, chunk[len(chunk)-1]
		}
		if i < 0 {
			break
		}
		w.endLine()
		p = p[i+1:]
	}
	return n, nil
}

// endLine classifies the line held and starts the next.
func (w *retryWatch) endLine() {
	line := w.line
	if w.cut {
		line = append(line, w.last)
	}
	switch w.kind(line) {
	case preset.Progress:
		w.retries = false
		w.gen++
		if w.timer != nil {
			w.timer.Stop()
		}
	case preset.Retrying:
		if !w.retries && !w.done {
			w.retries = true
			w.gen++
			gen := w.gen
			w.timer = time.AfterFunc(w.d, func() { w.fire(gen) })
		}
	}
	w.line, w.cut = w.line[:0], false
}

// fire closes fired when the agent is still only retrying since gen.
func (w *retryWatch) fire(gen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == w.gen && w.retries && !w.done {
		w.done = true
		close(w.fired)
	}
}

// stop ends the watch: it fires no more.
func (w *retryWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	if w.timer != nil {
		w.timer.Stop()
	}
}
