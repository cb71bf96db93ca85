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
		{"a budget raised since keeps its iteration", loop.NeedsBudget, "go on", want{2, 3, "go on"}},
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

// TestAnswerRefusedBudget: a loop held because a budget is still spent
// takes no answer (back to pending, the same gate would hold it out of
// "Needs you"); the refusal names the command that does resume it, and
// the loop stays where it was.
func TestAnswerRefusedBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		loops  []loop.Loop
		answer string // the loop answered
		want   string // what the refusal says
	}{
		{
			name: "its own budget",
			loops: func() []loop.Loop {
				l := rec("own1", "", loop.NeedsHuman, 0)
				l.Budget, l.Usage = loop.Budget{USD: 1}, loop.Usage{CostUSD: 1.25}
				l.Needs = &loop.Needs{Reason: loop.NeedsBudget, Detail: "budget spent: $1.25 of $1.00", Since: now}
				return []loop.Loop{l}
			}(),
			answer: "own1",
			want:   "own1: budget spent: $1.25 of $1.00; an answer would leave this ralph behind the same gate — raise the budget with loopr budget own1 --usd N and it resumes",
		},
		{
			name: "its tree's budget",
			loops: func() []loop.Loop {
				root := rec("root1", "", loop.Running, 0)
				root.Type, root.Budget, root.Usage = loop.Plan, loop.Budget{USD: 2}, loop.Usage{CostUSD: 1.5}
				kid := rec("kid1", "root1", loop.NeedsHuman, 0)
				kid.Usage = loop.Usage{CostUSD: 1}
				kid.Needs = &loop.Needs{Reason: loop.NeedsBudget, Detail: "tree budget spent: $2.50 of $2.00 (root root1)", Since: now}
				return []loop.Loop{root, kid}
			}(),
			answer: "kid1",
			want:   "kid1: tree budget spent: $2.50 of $2.00 (root root1); an answer would leave this ralph behind the same gate — raise the budget with loopr budget root1 --usd N and it resumes",
		},
		{
			// It asked, and its iteration spent the tree's budget: an
			// answer would send it pending behind the budget gate.
			name: "a question while its tree's budget is spent",
			loops: func() []loop.Loop {
				root := rec("root2", "", loop.Running, 0)
				root.Type, root.Budget, root.Usage = loop.Plan, loop.Budget{Tokens: 1000}, loop.Usage{InputTokens: 600}
				kid := rec("kid2", "root2", loop.NeedsHuman, 0)
				kid.Usage = loop.Usage{InputTokens: 500}
				kid.Needs = &loop.Needs{Reason: loop.NeedsQuestion, Detail: "Which port?", Since: now}
				return []loop.Loop{root, kid}
			}(),
			answer: "kid2",
			want:   "kid2: tree budget spent: 1100 of 1000 tokens (root root2); answered, this ralph would wait behind the budget gate, out of Needs you — raise the budget with loopr budget root2 --usd N first, then answer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, 30)
			if err := svc.Store.Update(func(tx *store.Tx) error {
				for _, l := range tc.loops {
					if err := tx.Create(l); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			_, err := svc.Act(tc.answer, api.ActionAnswer, api.ActionRequest{Answer: "go on"})
			var te *loop.TransitionError
			if err == nil || err.Error() != tc.want || !errors.As(err, &te) {
				t.Errorf("answer = %v\nwant the *loop.TransitionError (409, exit 2) %q", err, tc.want)
			}
			got, err := svc.Get(tc.answer)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.loops[len(tc.loops)-1].Needs.Reason
			if got.Status != loop.NeedsHuman || got.Needs == nil || got.Needs.Reason != want || got.Answer != "" {
				t.Errorf("after the refusal: status %s needs %v answer %q; want needs_human (%s), no answer", got.Status, got.Needs, got.Answer, want)
			}
		})
	}
}
