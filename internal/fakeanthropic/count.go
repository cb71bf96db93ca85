package fakeanthropic

import (
	"crypto/sha256"
	"time"
)

// Count is what the fake counts of one request's input: the tokens of its
// messages (4 bytes of their text a token: role, text blocks, tool
// results; the system prompt and tool list, the same in every request of
// a CLI, are left out), and of those the ones no earlier request had sent
// as the same prefix of messages: what a provider's prompt cache would
// not hold (Uncached).
type Count struct {
	Received time.Time
	Input    int64
	Uncached int64
}

// Counts counts every request received, in order, against a prompt cache
// of every message prefix the server has seen.
func (s *Server) Counts() []Count {
	seen := map[[32]byte]bool{}
	var out []Count
	for _, r := range s.Requests() {
		c := Count{Received: r.Received}
		h := sha256.New()
		cached := true
		for _, m := range r.Messages {
			text := m.Role + "\n" + m.Text()
			n := int64(len(text)+3) / 4
			h.Write([]byte(text))
			h.Write([]byte{0})
			var key [32]byte
			copy(key[:], h.Sum(nil))
			c.Input += n
			if cached = cached && seen[key]; !cached {
				c.Uncached += n
			}
			seen[key] = true
		}
		out = append(out, c)
	}
	return out
}
