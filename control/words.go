package control

import (
	"errors"
	"fmt"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// ActionError is a user action that does not apply to a loop in its
// status, in words: what the loop is and what would work instead. It
// wraps the *loop.TransitionError it explains, so the daemon still answers
// 409 and the CLI exits 2.
type ActionError struct {
	Action string
	Loop   loop.Loop
	Msg    string
	Err    *loop.TransitionError
}

func (e *ActionError) Error() string { return e.Msg }
func (e *ActionError) Unwrap() error { return e.Err }

// explainAction turns err, when it is a bare *loop.TransitionError of
// action on l, into an *ActionError; other errors pass through.
func explainAction(action string, l loop.Loop, err error) error {
	var te *loop.TransitionError
	var ae *ActionError
	if err == nil || !errors.As(err, &te) || errors.As(err, &ae) || te.ID != l.ID {
		return err
	}
	return &ActionError{Action: action, Loop: l, Msg: ActionWords(action, l), Err: te}
}

// ActionWords says why action does not apply to l in its status, and what
// would: one sentence per action and status that can happen.
func ActionWords(action string, l loop.Loop) string {
	id, st := l.ID, l.Status
	this := fmt.Sprintf("%s: this %s", id, l.Type)
	switch action {
	case api.ActionCancel:
		switch st {
		case loop.Complete:
			return this + " is already complete and nothing below it is still live; there is nothing to cancel"
		case loop.Cancelled:
			return this + " is already cancelled; there is nothing to cancel"
		}
		return fmt.Sprintf("%s %s, which is final; there is nothing to cancel", this, is(st))
	case api.ActionReset:
		switch st {
		case loop.Pending:
			return fmt.Sprintf("reset brings back failed loops; %s is pending — use loopr pause to hold it", id)
		case loop.Paused:
			return fmt.Sprintf("reset brings back failed loops; %s is paused — use loopr resume to release it", id)
		case loop.Running:
			return fmt.Sprintf("reset brings back failed loops; %s is running — use loopr cancel to stop it", id)
		case loop.Merging:
			return fmt.Sprintf("reset brings back failed loops; %s passed and waits in the merge queue — use loopr cancel to drop it", id)
		case loop.AwaitingApproval:
			return fmt.Sprintf("reset brings back failed loops; %s awaits approval — use loopr approve, iterate or reject", id)
		case loop.AwaitingReview:
			return fmt.Sprintf("reset brings back failed loops; %s awaits review — use loopr approve, iterate or reject", id)
		case loop.NeedsHuman:
			return fmt.Sprintf("reset brings back failed loops; %s needs you (needs_human) — %s resumes it", id, l.NeedsAction())
		}
		return fmt.Sprintf("reset brings back failed loops; %s %s, which is final — add a new loop to do its work again", id, is(st))
	case api.ActionPause:
		switch st {
		case loop.Paused:
			return fmt.Sprintf("%s is already paused; loopr resume %s releases it", this, id)
		case loop.Running:
			return fmt.Sprintf("%s is running, and no agent of it runs on a daemon here to stop (start loopr daemon, or wait for it to settle) — loopr cancel stops it for good", id)
		case loop.Merging:
			return fmt.Sprintf("pause holds pending loops; %s passed and waits in the merge queue, which runs no agent for it — use loopr cancel to drop it", id)
		case loop.AwaitingApproval, loop.AwaitingReview:
			return fmt.Sprintf("pause holds pending loops; %s %s and runs nothing until you approve, iterate or reject it", id, is(st))
		case loop.Failed:
			return fmt.Sprintf("pause holds pending loops; %s has failed and runs nothing until loopr reset %s", id, id)
		case loop.NeedsHuman:
			return fmt.Sprintf("pause holds pending loops; %s needs you (needs_human) and runs nothing until %s", id, l.NeedsAction())
		}
		return fmt.Sprintf("pause holds pending loops; %s %s, so there is nothing to hold", id, is(st))
	case api.ActionResume:
		switch st {
		case loop.Pending:
			return fmt.Sprintf("%s is not paused: it is pending and runs when the scheduler picks it (loopr why %s)", this, id)
		case loop.Running:
			return fmt.Sprintf("%s is not paused: it is running", this)
		case loop.AwaitingApproval, loop.AwaitingReview:
			return fmt.Sprintf("resume releases paused loops; %s %s — use loopr approve %s", id, is(st), id)
		case loop.Failed:
			return fmt.Sprintf("resume releases paused loops; %s has failed — use loopr reset %s to run it again", id, id)
		case loop.NeedsHuman:
			return fmt.Sprintf("resume releases paused loops; %s needs you (needs_human) — %s resumes it", id, l.NeedsAction())
		}
		return fmt.Sprintf("resume releases paused loops; %s %s, so there is nothing to resume", id, is(st))
	case api.ActionApprove, api.ActionReject, api.ActionIterate:
		verb := map[string]string{api.ActionApprove: "approve", api.ActionReject: "reject", api.ActionIterate: "send back"}[action]
		switch st {
		case loop.Complete:
			return fmt.Sprintf("%s is already complete; there is nothing to %s", this, verb)
		case loop.Pending, loop.Paused, loop.Running, loop.Merging, loop.NeedsHuman:
			return fmt.Sprintf("%s %s, not awaiting approval or review; loopr why %s says what it waits for", this, is(st), id)
		case loop.Failed:
			return fmt.Sprintf("%s has failed; there is nothing to %s — loopr reset %s runs it again", this, verb, id)
		}
		return fmt.Sprintf("%s %s, which is final; there is nothing to %s", this, is(st), verb)
	case api.ActionAnswer:
		if st == loop.Running {
			return fmt.Sprintf("%s is running; only a loop that needs you (needs_human) takes an answer — it may ask through $LOOPR_QUESTION_FILE", this)
		}
		return fmt.Sprintf("%s %s; only a loop that needs you (needs_human) takes an answer", this, is(st))
	}
	return fmt.Sprintf("%s: %s does not apply to a loop that %s", id, action, is(st))
}

// is says what a loop in status st is, as a verb phrase.
func is(st loop.Status) string {
	switch st {
	case loop.AwaitingApproval:
		return "awaits approval"
	case loop.AwaitingReview:
		return "awaits review"
	case loop.Failed:
		return "has failed"
	case loop.Cancelled:
		return "was cancelled"
	case loop.Expired:
		return "expired (its deadline passed before it ran)"
	case loop.Invalidated:
		return "was invalidated (its parent's plan changed)"
	case loop.Complete:
		return "is complete"
	case loop.NeedsHuman:
		return "needs you (needs_human)"
	case loop.Merging:
		return "is merging (it passed; its branch waits in the merge queue)"
	}
	return "is " + string(st)
}
