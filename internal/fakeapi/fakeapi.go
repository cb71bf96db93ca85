// Package fakeapi holds what the scripted fakes of provider APIs
// (internal/fakeanthropic, fakeresponses, fakegemini, fakechat) share: the
// record of the requests a test asserts on, answered one at a time, and the
// plumbing of a JSON request and an error reply.
package fakeapi

import (
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"sync"
)

// Log records the requests a fake received. The zero value is ready.
type Log[Req any] struct {
	mu   sync.Mutex
	reqs []*Req
}

// Requests returns every request recorded so far, in order.
func (l *Log[Req]) Requests() []*Req {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Req(nil), l.reqs...)
}

// Record adds r, then calls answer with its number (1 for the first)
// while it holds the log: a fake's script sees one request at a time.
func (l *Log[Req]) Record(r *Req, answer func(n int)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r)
	answer(len(l.reqs))
}

// ReadJSON decodes the body of hr (at most 64 MiB) into v.
func ReadJSON(hr *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// WriteError answers with status, the headers of h and a JSON body.
func WriteError(w http.ResponseWriter, status int, h http.Header, body string) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}
