package cli

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes buffer safe for the ticker goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// On a terminal the waiting line is rewritten in place with the elapsed
// time, and erased when the operation ends.
func TestShowWaitingTerminal(t *testing.T) {
	var buf syncBuf
	stop := showWaiting(&buf, true, "landing")
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(buf.String(), "landing… ") {
		if time.Now().After(deadline) {
			t.Fatalf("no waiting line after a minute: %q", buf.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	out := buf.String()
	if !strings.HasPrefix(out, "\r\x1b[K") || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("the line is not rewritten in place and erased: %q", out)
	}
	if strings.Contains(out, "\n") {
		t.Errorf("a terminal's waiting line added lines: %q", out)
	}
}

// A fast operation writes nothing at all.
func TestShowWaitingQuick(t *testing.T) {
	var buf syncBuf
	showWaiting(&buf, true, "landing")()
	showWaiting(&buf, false, "landing")()
	if buf.String() != "" {
		t.Errorf("a quick operation wrote %q", buf.String())
	}
}
