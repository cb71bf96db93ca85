package loopmgr

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// The review gate and line comments, as the manager sees them.
//
// A loop with its own branch whose type has require_review, or whose plan
// was made with --review, is recorded awaiting_review when it passes (its
// commit and evidence with it) instead of merging; `loopr approve` sends
// it on (control.Act). Line comments (package review) wait on the record
// of the loop they reached; the prompt of its next iteration carries them
// (runner), and once that iteration runs to a verdict they are answered
// by it. A comment that arrived while the iteration ran was not in its
// prompt: a pass then goes back to pending for one more iteration.

// answering is what the iteration being recorded carried in its prompt:
// the comments of loop id up to Seq upTo (finish sets it, like charge).
type answering struct {
	id        string
	iteration int
	upTo      int
}

// answerComments marks, on cur, the comments its iteration carried
// answered by it with outcome (passed or failed).
func (m *Manager) answerComments(cur *loop.Loop, outcome string) {
	a := m.answering
	if a == nil || a.id != cur.ID || a.iteration != cur.Iteration || a.upTo == 0 {
		return
	}
	cur.AnswerComments(a.upTo, a.iteration, outcome)
}

// reviewRequired reports whether cur, a loop that changes code on its own
// branch, waits for a person's review once it passes: its type's
// require_review, or its root plan's review flag (`loopr plan --review`).
func (m *Manager) reviewRequired(tx *store.Tx, cur loop.Loop) (bool, error) {
	if m.o.Git == nil || !ownBranch(cur.Type) {
		return false, nil
	}
	if m.cfg().Loop(cur.Type).RequireReview {
		return true, nil
	}
	root, err := rootIn(tx, cur)
	return root.Review, err
}

// lateComments sends cur, whose iteration passed, back to pending for one
// more iteration when comments reached it while that iteration ran (they
// were not in its prompt); ok is false when none did.
func (m *Manager) lateComments(tx *store.Tx, cur loop.Loop, commit string, ev []loop.Evidence, now time.Time) (ok bool, err error) {
	late := 0
	for _, c := range cur.PendingComments() {
		if a := m.answering; a == nil || a.id != cur.ID || c.Seq > a.upTo {
			late++
		}
	}
	if late == 0 {
		return false, nil
	}
	msg := fmt.Sprintf("iteration %d passed, but %d comment(s) reached it while it ran: iteration %d takes them", cur.Iteration, late, cur.Iteration+1)
	return true, control.Move(tx, cur, loop.Pending, now, msg, func(n *loop.Loop) {
		n.Iteration++
		n.MaxIterations = max(n.MaxIterations, n.Iteration)
		n.Reason, n.Answer, n.Stalls = "", "", 0
		n.Feedback = fmt.Sprintf("Iteration %d passed; comments on your work arrived while it ran: address them.", cur.Iteration)
		n.Commit, n.Evidence = commit, nil
		n.AddEvidence(ev...)
		n.RunnableAt = time.Time{}
	})
}
