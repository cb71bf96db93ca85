package control_test

import (
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestActOnReview: approve sends a task of a plan awaiting review to the
// merge queue and completes a standalone one; iterate sends it back with
// the feedback; reject fails it.
func TestActOnReview(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, action string
		inPlan       bool
		req          api.ActionRequest
		want         loop.Status
		iteration    int
	}{
		{"approve a task of a plan", api.ActionApprove, true, api.ActionRequest{}, loop.Merging, 1},
		{"approve a standalone loop", api.ActionApprove, false, api.ActionRequest{}, loop.Complete, 1},
		{"iterate", api.ActionIterate, true, api.ActionRequest{Feedback: "FEEDBACK-MARKER"}, loop.Pending, 2},
		{"reject", api.ActionReject, true, api.ActionRequest{Reason: "no"}, loop.Failed, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, 0)
			task := loop.Loop{ID: "T", Type: loop.Ralph, Status: loop.AwaitingReview, Title: "t", Iteration: 1, MaxIterations: 1,
				CreatedAt: now, UpdatedAt: now, Branch: "loopr/t-t", Commit: strings.Repeat("c", 40)}
			err := svc.Store.Update(func(tx *store.Tx) error {
				if tt.inPlan {
					if err := tx.Create(loop.Loop{ID: "P", Type: loop.Plan, Status: loop.Complete, Title: "p", Iteration: 1, MaxIterations: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
						return err
					}
					task.Parent, task.Depth = "P", 1
				}
				return tx.Create(task)
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := svc.Act("T", tt.action, tt.req)
			if err != nil {
				t.Fatalf("Act(%s) = %v", tt.action, err)
			}
			l := res.Loop
			if l.Status != tt.want || l.Iteration != tt.iteration || l.Commit != task.Commit {
				t.Errorf("Act(%s) = %s at iteration %d, commit %q; want %s at %d, the commit kept", tt.action, l.Status, l.Iteration, l.Commit, tt.want, tt.iteration)
			}
			if tt.action == api.ActionIterate && (l.MaxIterations < 2 || !strings.Contains(l.Feedback, "FEEDBACK-MARKER")) {
				t.Errorf("iterate: max_iterations %d, feedback %q; want room for iteration 2 and the feedback", l.MaxIterations, l.Feedback)
			}
			if tt.want == loop.Complete && l.SubtreeDoneAt.IsZero() {
				t.Errorf("an approved standalone loop is complete with no subtree_done_at")
			}
		})
	}
	svc := newService(t, 0)
	if err := svc.Store.Update(func(tx *store.Tx) error {
		return tx.Create(loop.Loop{ID: "R", Type: loop.Ralph, Status: loop.Running, Title: "r", Iteration: 1, MaxIterations: 1, CreatedAt: now, UpdatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Act("R", api.ActionApprove, api.ActionRequest{}); err == nil || !strings.Contains(err.Error(), "not awaiting approval or review") {
		t.Errorf("approve of a running loop = %v; want a refusal naming approval or review", err)
	}
}

// TestActReasonBounded: a reject's --reason is bounded as feedback is: it
// is kept on the record and shown by show, status and the dashboard.
func TestActReasonBounded(t *testing.T) {
	t.Parallel()
	svc := newService(t, 0)
	if err := svc.Store.Update(func(tx *store.Tx) error {
		return tx.Create(loop.Loop{ID: "T", Type: loop.Ralph, Status: loop.AwaitingReview, Title: "t", Iteration: 1, MaxIterations: 1, CreatedAt: now, UpdatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Act("T", api.ActionReject, api.ActionRequest{Reason: strings.Repeat("r", control.MaxAnswerBytes+1)})
	if !control.IsUsage(err) || !strings.Contains(err.Error(), "--reason") {
		t.Errorf("Act(reject, a reason of %d bytes) = %v; want a usage error naming --reason", control.MaxAnswerBytes+1, err)
	}
	if l, _ := svc.Get("T"); l.Status != loop.AwaitingReview {
		t.Errorf("T = %s after a refused reject, want awaiting_review", l.Status)
	}
}
