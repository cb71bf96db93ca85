package loop

import "time"

// EventKind names what an Event records.
type EventKind string

// Event kinds. Every transition writes one Event in the same store transaction.
const (
	EventCreated    EventKind = "created"
	EventTransition EventKind = "transition"
	EventIteration  EventKind = "iteration"
	EventRateLimit  EventKind = "rate_limit"
	EventImported   EventKind = "imported"
	EventDaemon     EventKind = "daemon"
	EventConfig     EventKind = "config"
	// EventTreeComplete is written on a plan when the last loop of its
	// tree completes: the plan's branch is ready to land (`loopr land`).
	EventTreeComplete EventKind = "tree_complete"
	// EventComment is written on a loop a person's line comment reached
	// (`loopr comment`).
	EventComment EventKind = "comment"
	// EventLanded is written on a plan when `loopr land` merged its branch
	// into its base branch.
	EventLanded EventKind = "landed"
	// EventFanout is written on the candidates of a best-of-N group when
	// it starts (how many, and why fewer than asked) and when it is
	// decided (the winner, and how it was chosen).
	EventFanout EventKind = "fanout"
	// EventMCP is written on the loop whose agent called a tool of
	// loopr's MCP server (`loopr mcp`): the tool, its target and the
	// outcome, refusals included.
	EventMCP EventKind = "mcp"
)

// Event is one entry of a loop's append-only journal. Seq is assigned by the
// store and increases across all loops.
type Event struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Loop      ID        `json:"loop,omitzero"`
	Kind      EventKind `json:"kind"`
	From      Status    `json:"from,omitzero"`
	To        Status    `json:"to,omitzero"`
	Iteration int       `json:"iteration,omitzero"`
	Message   string    `json:"message,omitzero"`
}

// TransitionEvent describes the change from before to after.
func TransitionEvent(before, after Loop, msg string) Event {
	return Event{
		Time: after.UpdatedAt, Loop: after.ID, Kind: EventTransition,
		From: before.Status, To: after.Status, Iteration: after.Iteration, Message: msg,
	}
}
