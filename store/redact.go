package store

import "github.com/loopr-dev/loopr/loop"

// SetRedact makes every write transaction from now on pass the free text
// of the loop records it puts (loop.Loop.MapText) and the message of the
// events it appends through fn: the daemon's redactor, so that no secret
// an agent printed reaches the store, the journal, the event stream or a
// webhook, whichever code path carried it here. nil: text is kept as it
// is. Safe to call while the store is in use.
func (s *Store) SetRedact(fn func(string) string) {
	if fn == nil {
		s.w.redact.Store(nil)
		return
	}
	s.w.redact.Store(&fn)
}

// redacting wraps fn so that its Tx redacts what it writes, when
// SetRedact set a function.
func (s *Store) redacting(fn func(*Tx) error) func(*Tx) error {
	p := s.w.redact.Load()
	if p == nil {
		return fn
	}
	r := *p
	return func(tx *Tx) error {
		tx.redact = r
		return fn(tx)
	}
}

// redactLoop is l as a write transaction stores it.
func (tx *Tx) redactLoop(l loop.Loop) loop.Loop {
	if tx.redact == nil {
		return l
	}
	return l.MapText(tx.redact)
}
