package loop

import (
	"fmt"
	"slices"
	"time"
)

// Status is where a loop is in its lifecycle (SPEC §3).
type Status string

// The statuses. Pending and Paused loops wait; Running holds a lease;
// Merging is a pass recorded before its branch is merged into the plan
// branch (the merge queue's; no agent runs for it again); Complete,
// Cancelled, Expired and Invalidated are terminal; Failed is terminal until
// a user resets it; AwaitingApproval, AwaitingReview and NeedsHuman wait
// for a person (NeedsHuman is never scheduled and never counts as failed).
// AwaitingReview is a task that passed with review required
// (loops.<type>.require_review, `loopr plan --review`): its commit and
// evidence are recorded, and it waits for `loopr approve` (then merging,
// or complete when it has no plan), `reject` or `iterate`.
const (
	Pending          Status = "pending"
	Paused           Status = "paused"
	Running          Status = "running"
	Merging          Status = "merging"
	AwaitingApproval Status = "awaiting_approval"
	AwaitingReview   Status = "awaiting_review"
	NeedsHuman       Status = "needs_human"
	Complete         Status = "complete"
	Failed           Status = "failed"
	Cancelled        Status = "cancelled"
	Expired          Status = "expired"
	Invalidated      Status = "invalidated"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{Pending, Paused, Running, Merging, AwaitingApproval, AwaitingReview, NeedsHuman, Complete, Failed, Cancelled, Expired, Invalidated}

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Terminal reports whether no automatic transition leaves s. Failed counts:
// only a user's reset brings a failed loop back.
func (s Status) Terminal() bool {
	switch s {
	case Complete, Failed, Cancelled, Expired, Invalidated:
		return true
	}
	return false
}

// Settled reports whether s is complete or cancelled: the statuses that
// let a tree be done (a failed, expired or invalidated loop keeps it from
// being done).
func (s Status) Settled() bool { return s == Complete || s == Cancelled }

// AwaitsPerson reports whether s waits for a person's decision on a pass:
// a plan awaiting approval or a task awaiting review.
func (s Status) AwaitsPerson() bool { return s == AwaitingApproval || s == AwaitingReview }

// Waiting reports whether s is a status the scheduler looks at (pending, or
// paused or needs_human so it can say why such a loop does not start).
func (s Status) Waiting() bool { return s == Pending || s == Paused || s == NeedsHuman }

// ParseStatus returns the status named s.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown status %q (want one of %v)", s, Statuses)
	}
	return st, nil
}

// transitions is the legal state machine. Running → Pending is both a failed
// iteration (iteration+1, backoff) and a requeue that costs nothing (rate
// limit, clean daemon stop); the caller decides the iteration. Merging →
// Pending is a merge the queue refused (a conflict, or merge.validate
// failed): it spends the iteration that passed.
var transitions = map[Status][]Status{
	Pending:          {Running, Paused, NeedsHuman, Cancelled, Expired, Invalidated, Failed},
	Paused:           {Pending, NeedsHuman, Cancelled, Expired, Invalidated, Failed},
	Running:          {Complete, Merging, AwaitingApproval, AwaitingReview, Pending, NeedsHuman, Failed, Cancelled, Invalidated},
	Merging:          {Complete, Pending, NeedsHuman, Failed, Cancelled, Invalidated},
	AwaitingApproval: {Complete, Failed, Pending, Cancelled, Invalidated},
	AwaitingReview:   {Merging, Complete, Failed, Pending, Cancelled, Invalidated},
	NeedsHuman:       {Pending, Failed, Cancelled, Invalidated},
	Failed:           {Pending, Cancelled, Invalidated},
	Complete:         {Pending, Invalidated},
	Cancelled:        nil,
	Expired:          nil,
	Invalidated:      nil,
}

// CanTransition reports whether a loop may move from one status to another.
func CanTransition(from, to Status) bool { return slices.Contains(transitions[from], to) }

// TransitionError is returned for an illegal status change.
type TransitionError struct {
	ID       ID
	From, To Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("loop %s: cannot go from %s to %s", e.ID, e.From, e.To)
}

// Transition returns l moved to status to at now, or a *TransitionError. It
// keeps the bookkeeping fields consistent: updated_at always; started_at and
// a cleared finished_at on running; finished_at on terminal statuses; the
// lease only while running. Iteration, feedback and reason are the caller's.
func Transition(l Loop, to Status, now time.Time) (Loop, error) {
	if !CanTransition(l.Status, to) {
		return l, &TransitionError{ID: l.ID, From: l.Status, To: to}
	}
	l.Status = to
	l.UpdatedAt = now
	switch {
	case to == Running:
		l.StartedAt = now
		l.FinishedAt = time.Time{}
	case to.Terminal():
		l.FinishedAt = now
	default:
		l.FinishedAt = time.Time{}
	}
	if to != Running {
		l.Lease = nil
	}
	if to != NeedsHuman {
		l.Needs = nil // the wait is over, whichever way it ended
	}
	return l, nil
}
