package loop

import (
	"strings"
	"testing"
)

func TestComments(t *testing.T) {
	t.Parallel()
	l := Loop{ID: "L"}
	for i := range MaxComments {
		c, err := l.AddComment(Comment{Path: "a", Line: i + 1, Text: "t"})
		if err != nil || c.Seq != i+1 {
			t.Fatalf("AddComment(%d) = seq %d, %v; want seq %d", i, c.Seq, err, i+1)
		}
	}
	if _, err := l.AddComment(Comment{Path: "a", Line: 1, Text: "t"}); err == nil || !strings.Contains(err.Error(), "waiting") {
		t.Errorf("AddComment(full of waiting comments) = %v; want a refusal", err)
	}
	if l.LastPendingSeq() != MaxComments || len(l.PendingComments()) != MaxComments {
		t.Errorf("LastPendingSeq() = %d, %d pending; want %d", l.LastPendingSeq(), len(l.PendingComments()), MaxComments)
	}
	if n := l.AnswerComments(2, 5, "passed"); n != 2 || l.Comments[0].State() != "answered by iteration 5 (passed)" || l.Comments[2].State() != "sent" {
		t.Errorf("AnswerComments(2) = %d; states %q, %q; want 2, answered, sent", n, l.Comments[0].State(), l.Comments[2].State())
	}
	// Full, with answered ones: the oldest answered goes.
	c, err := l.AddComment(Comment{Path: "b", Line: 1, Text: "t"})
	if err != nil || c.Seq != MaxComments+1 || len(l.Comments) != MaxComments || l.Comments[0].Seq != 2 {
		t.Errorf("AddComment(full, 2 answered) = seq %d, %v, %d kept, first seq %d; want seq %d, %d kept, first 2",
			c.Seq, err, len(l.Comments), l.Comments[0].Seq, MaxComments+1, MaxComments)
	}
}

func TestReviewTransitions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		from, to Status
		ok       bool
	}{
		{Running, AwaitingReview, true}, {AwaitingReview, Merging, true}, {AwaitingReview, Complete, true},
		{AwaitingReview, Failed, true}, {AwaitingReview, Pending, true}, {AwaitingReview, Cancelled, true},
		{Complete, Pending, true}, {Pending, AwaitingReview, false}, {AwaitingReview, Running, false},
	} {
		if got := CanTransition(tt.from, tt.to); got != tt.ok {
			t.Errorf("CanTransition(%s, %s) = %v; want %v", tt.from, tt.to, got, tt.ok)
		}
	}
	if !AwaitingReview.Valid() || AwaitingReview.Terminal() || AwaitingReview.Waiting() || !AwaitingReview.AwaitsPerson() {
		t.Errorf("awaiting_review: valid, not terminal, not scheduled, awaits a person")
	}
}
