package control_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestRefusedActionsSayWhatWouldWork applies every action to a plan in
// every status, on a real store: each refusal is an *ActionError that
// names the loop, says no "cannot go from", stays a usage error wrapping
// the *loop.TransitionError (409, exit 2), and is one line.
func TestRefusedActionsSayWhatWouldWork(t *testing.T) {
	t.Parallel()
	for _, action := range api.Actions {
		for _, st := range loop.Statuses {
			t.Run(action+"/"+string(st), func(t *testing.T) {
				t.Parallel()
				svc := newService(t, 30)
				l := rec("P1", "", st, 0)
				l.Type = loop.Plan
				if err := svc.Store.Update(func(tx *store.Tx) error { return tx.Create(l) }); err != nil {
					t.Fatal(err)
				}
				_, err := svc.Act("P1", action, api.ActionRequest{Feedback: "more"})
				var te *loop.TransitionError
				if !errors.As(err, &te) {
					return // the action applies (or fails otherwise, e.g. approve without an artifact)
				}
				var ae *control.ActionError
				if !errors.As(err, &ae) {
					t.Fatalf("Act(%s) on %s = %v, want an *ActionError", action, st, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, "P1") || strings.Contains(msg, "cannot go") || strings.Contains(msg, "\n") || !control.IsUsage(err) {
					t.Errorf("Act(%s) on %s: %q: want one line naming P1, a usage error", action, st, msg)
				}
			})
		}
	}
}

func TestActionWords(t *testing.T) {
	t.Parallel()
	plan := func(st loop.Status) loop.Loop { return loop.Loop{ID: "01JX", Type: loop.Plan, Status: st} }
	held := plan(loop.NeedsHuman) // held for its tree's budget: raising it resumes it
	held.Needs = &loop.Needs{Reason: loop.NeedsBudget, Detail: "tree budget spent: $2.10 of $2.00 (root 01JR)"}
	tests := []struct {
		action string
		l      loop.Loop
		want   string
	}{
		{api.ActionApprove, plan(loop.Complete), "01JX: this plan is already complete; there is nothing to approve"},
		{api.ActionReset, plan(loop.Pending), "reset brings back failed loops; 01JX is pending — use loopr pause to hold it"},
		{api.ActionReset, plan(loop.Paused), "reset brings back failed loops; 01JX is paused — use loopr resume to release it"},
		{api.ActionResume, plan(loop.Failed), "resume releases paused loops; 01JX has failed — use loopr reset 01JX to run it again"},
		{api.ActionPause, plan(loop.Running), "01JX is running, and no agent of it runs on a daemon here to stop (start loopr daemon, or wait for it to settle) — loopr cancel stops it for good"},
		{api.ActionCancel, plan(loop.Expired), "01JX: this plan expired (its deadline passed before it ran), which is final; there is nothing to cancel"},
		{api.ActionIterate, plan(loop.Pending), "01JX: this plan is pending, not awaiting approval or review; loopr why 01JX says what it waits for"},
		{api.ActionReset, plan(loop.NeedsHuman), "reset brings back failed loops; 01JX needs you (needs_human) — loopr answer 01JX \"…\" resumes it"},
		{api.ActionResume, held, "resume releases paused loops; 01JX needs you (needs_human) — loopr budget 01JR --usd N resumes it"},
		{api.ActionPause, held, "pause holds pending loops; 01JX needs you (needs_human) and runs nothing until loopr budget 01JR --usd N"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.action, tc.l.Status), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, control.ActionWords(tc.action, tc.l)); diff != "" {
				t.Errorf("ActionWords() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
