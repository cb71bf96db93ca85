package api

import "github.com/loopr-dev/loopr/loop"

// Stream message types on GET /v1/events (one JSON object per line).
const (
	// StreamSnapshot is the first message: every loop that is not terminal,
	// plus terminal loops finished recently, and the daemon status.
	StreamSnapshot = "snapshot"
	// StreamEvent carries one journal event and the loop as it is after it.
	StreamEvent = "event"
	// StreamStatus carries a fresh daemon status (counts, caps, rate limit);
	// sent after changes and at least every few seconds.
	StreamStatus = "status"
	// StreamHeartbeat keeps idle connections alive.
	StreamHeartbeat = "heartbeat"
)

// StreamMsg is one line of the /v1/events stream.
type StreamMsg struct {
	Type   string      `json:"type"`
	Seq    uint64      `json:"seq,omitzero"` // last journal seq included
	Event  *loop.Event `json:"event,omitempty"`
	Loop   *loop.Loop  `json:"loop,omitempty"`
	Loops  []loop.Loop `json:"loops,omitempty"`
	Status *Status     `json:"status,omitempty"`
}
