package control_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

func TestAnswer(t *testing.T) {
	t.Parallel()
	type want struct {
		iteration, max int
		answer         string
	}
	for _, tc := range []struct {
		name   string
		reason loop.NeedsReason
		text   string
		want   want
	}{
		{"a question keeps its iteration", loop.NeedsQuestion, "  use port 8080\n", want{2, 3, "use port 8080"}},
		{"a repeated failure spent one", loop.NeedsNoProgress, "the test is flaky; skip it", want{3, 3, "the test is flaky; skip it"}},
		{"a stall spent one", loop.NeedsStalled, "", want{3, 3, ""}},
		{"a budget keeps its iteration", loop.NeedsBudget, "go on", want{2, 3, "go on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, 30)
			l := rec("a", "", loop.NeedsHuman, 0)
			l.Iteration, l.MaxIterations = 2, 3
			l.Needs = &loop.Needs{Reason: tc.reason, Detail: "why", Since: now}
			l.Stalls, l.FailureFingerprint, l.FailureRepeats = 1, "fp", 3
			if err := svc.Store.Update(func(tx *store.Tx) error { return tx.Create(l) }); err != nil {
				t.Fatal(err)
			}
			res, err := svc.Act("a", api.ActionAnswer, api.ActionRequest{Answer: tc.text})
			if err != nil {
				t.Fatalf("Act(answer) = %v", err)
			}
			got := res.Loop
			if got.Status != loop.Pending || got.Needs != nil || got.Stalls != 0 || got.FailureRepeats != 0 || got.FailureFingerprint != "" {
				t.Errorf("after answer: status %s needs %v stalls %d repeats %d fp %q; want pending, no needs, counters reset",
					got.Status, got.Needs, got.Stalls, got.FailureRepeats, got.FailureFingerprint)
			}
			if diff := cmp.Diff(tc.want, want{got.Iteration, got.MaxIterations, got.Answer}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("answer mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

func TestAnswerRefused(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	if err := svc.Store.Update(func(tx *store.Tx) error { return tx.Create(rec("p", "", loop.Pending, 0)) }); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Act("p", api.ActionAnswer, api.ActionRequest{Answer: "x"})
	var te *loop.TransitionError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "needs_human") {
		t.Errorf("answer on a pending loop = %v; want a TransitionError naming needs_human", err)
	}
	_, err = svc.Act("p", api.ActionAnswer, api.ActionRequest{Answer: strings.Repeat("x", 65<<10)})
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("oversize answer = %v; want too long", err)
	}
}
