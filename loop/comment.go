package loop

import (
	"fmt"
	"slices"
	"time"
)

// Comment is a person's comment on one line of a loop's work (`loopr
// comment`). It is kept on the record of the loop that wrote the line and
// carried into the prompt of that loop's next iteration; once an iteration
// whose prompt held it runs to a verdict, it is answered by that iteration.
type Comment struct {
	Seq  int    `json:"seq"` // 1, 2, … within the loop
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
	// On is the loop the comment was made on, when it is not this one: a
	// plan, whose branch's line this loop wrote (git blame).
	On ID `json:"on,omitzero"`
	// Commit is the commit the line was read at (the branch's tip then).
	Commit string `json:"commit,omitzero"`
	// Context is the lines around it at Commit, each "N: text".
	Context string    `json:"context,omitzero"`
	At      time.Time `json:"at"`
	// AnsweredBy is the iteration whose prompt carried the comment and
	// that ran to a verdict (Outcome: passed or failed); 0 while it waits.
	AnsweredBy int    `json:"answered_by,omitzero"`
	Outcome    string `json:"outcome,omitzero"`
}

// Bounds of a loop's comments: how many a record keeps, and the bytes of
// a comment's text, path and context.
const (
	MaxComments       = 32
	MaxCommentText    = 4 << 10
	MaxCommentPath    = 1024
	MaxCommentContext = 4 << 10
)

// State words a comment's state for people: "sent" while it waits for the
// loop's next iteration, else "answered by iteration N (passed)".
func (c Comment) State() string {
	if c.AnsweredBy == 0 {
		return "sent"
	}
	return fmt.Sprintf("answered by iteration %d (%s)", c.AnsweredBy, c.Outcome)
}

// PendingComments returns the comments no iteration has answered yet.
func (l *Loop) PendingComments() []Comment {
	var out []Comment
	for _, c := range l.Comments {
		if c.AnsweredBy == 0 {
			out = append(out, c)
		}
	}
	return out
}

// LastPendingSeq is the Seq of the newest comment waiting, 0 for none: what
// an iteration's prompt carried, for AnswerComments.
func (l *Loop) LastPendingSeq() int {
	n := 0
	for _, c := range l.Comments {
		if c.AnsweredBy == 0 {
			n = max(n, c.Seq)
		}
	}
	return n
}

// AddComment appends c to l's comments with the next Seq, and returns it.
// A record full of comments drops its oldest answered one; full of
// comments that wait, it refuses.
func (l *Loop) AddComment(c Comment) (Comment, error) {
	if len(l.Comments) >= MaxComments {
		i := slices.IndexFunc(l.Comments, func(c Comment) bool { return c.AnsweredBy != 0 })
		if i < 0 {
			return c, fmt.Errorf("loop %s holds %d comments waiting for its next iteration, the most it keeps: let it run first", l.ID, MaxComments)
		}
		l.Comments = slices.Delete(slices.Clone(l.Comments), i, i+1)
	}
	c.Seq = 1
	for _, o := range l.Comments {
		c.Seq = max(c.Seq, o.Seq+1)
	}
	c.AnsweredBy, c.Outcome = 0, ""
	l.Comments = append(slices.Clip(l.Comments), c)
	return c, nil
}

// AnswerComments marks the waiting comments up to Seq upTo answered by
// iteration, with outcome (passed or failed); it reports how many.
func (l *Loop) AnswerComments(upTo, iteration int, outcome string) int {
	n := 0
	for i, c := range l.Comments {
		if c.AnsweredBy == 0 && c.Seq <= upTo {
			if n == 0 {
				l.Comments = slices.Clone(l.Comments)
			}
			l.Comments[i].AnsweredBy, l.Comments[i].Outcome = iteration, outcome
			n++
		}
	}
	return n
}
