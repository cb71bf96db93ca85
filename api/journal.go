package api

import "github.com/loopr-dev/loopr/loop"

// JournalEntry is one event of the journal with the type and title of its
// loop (none for daemon and config events): a line of GET /v1/journal and
// of `loopr events --json`.
type JournalEntry struct {
	loop.Event
	Type  string `json:"type,omitzero"`
	Title string `json:"title,omitzero"`
}
