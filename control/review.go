package control

import (
	"fmt"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// The review gate: a task that passed with review required waits in
// awaiting_review with its commit and evidence (loopmgr records it). A
// person approves it (on to the merge queue, or complete when it has no
// plan to merge into), rejects it (failed), or sends it back with
// feedback; a line comment sends it back too (package review, Reopen).

// ApproveReview sends l, a loop awaiting review, on in tx: merging when it
// is a task of a plan (the merge queue merges its recorded commit into the
// plan branch), else complete (a standalone loop: its branch is its
// result). git says whether a tree it completes names its branch.
func ApproveReview(tx *store.Tx, l loop.Loop, now time.Time, git bool) error {
	root, err := RootOf(tx, l)
	if err != nil {
		return err
	}
	if root.Type == loop.Plan && root.ID != l.ID {
		return Move(tx, l, loop.Merging, now, fmt.Sprintf("approved by user; its branch %s waits in the merge queue", l.Branch), nil)
	}
	msg := "approved by user"
	if l.Branch != "" {
		msg += "; its work is on branch " + l.Branch + " (git merge " + l.Branch + ")"
	}
	if err := Move(tx, l, loop.Complete, now, msg, nil); err != nil {
		return err
	}
	return Settle(tx, l.ID, now, git)
}

// IterateReview sends l, a loop awaiting review, back to pending for its
// next iteration with the reviewer's feedback in its prompt; its branch
// keeps the work it passed with.
func IterateReview(tx *store.Tx, l loop.Loop, feedback string, now time.Time) error {
	return Move(tx, l, loop.Pending, now, "iterate requested by user", func(n *loop.Loop) {
		SendBack(n, "Reviewer feedback on your previous iteration:\n"+strings.TrimSpace(feedback))
	})
}

// SendBack gives n, sent back by a person (iterate, a line comment), its
// next iteration (with room for it past max_iterations) and feedback for
// its prompt.
func SendBack(n *loop.Loop, feedback string) {
	n.Iteration++
	n.MaxIterations = max(n.MaxIterations, n.Iteration)
	n.Feedback = feedback
	n.Reason, n.Answer, n.RunnableAt = "", "", time.Time{}
	n.Stalls, n.FailureFingerprint, n.FailureRepeats = 0, "", 0
}
