// Package review carries people's line comments to the loop that wrote the
// line (`loopr comment`, `loopr comments`, POST and GET
// /v1/loops/{id}/comments).
//
// A comment on a loop with its own branch (a ralph task) goes to that
// loop; its line is read at the tip of the loop's branch, or of its plan
// branch once the task's branch merged and went. A comment on a plan (or a
// spec or phase of one) is a comment on the plan branch: git blame names
// the commit that last touched the line, and the Loopr-Loop trailer loopr
// writes on every commit of a loop's work names the loop
// (gitflow.LoopOfLine); a line no loop of the tree wrote is refused, naming
// the commit.
//
// Comments are kept on the record of the loop they reach (loop.Comment,
// bounded by loop.MaxComments): the same transaction stores the comment
// and re-opens the loop, they are exported and deleted with it, and the
// bbolt and etcd stores keep them alike. Re-opening: a complete loop goes
// back to pending at its next iteration and its tree is no longer done
// (control.Unsettle; its branch is made again from the plan branch, which
// holds its work, when it starts); a loop awaiting review, merging or
// failed goes back to pending at its next iteration; a pending, paused,
// running or needs_human loop keeps its status and the comment waits for
// its next iteration. The runner puts the comments a loop waits with into
// its prompt (file:line, the text, the lines around); the manager marks
// them answered by the iteration that ran with them.
package review

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Git is what comments need of the repository (*gitflow.Repo).
type Git interface {
	Branch(ctx context.Context, id, title string) (string, error)
	BranchTip(ctx context.Context, branch string) (commit string, ok bool, err error)
	FileAt(ctx context.Context, commit, path string) ([]byte, error)
	BlameLine(ctx context.Context, commit, path string, line int) (string, error)
	LoopOfLine(ctx context.Context, commit, tip string) (string, error)
}

// contextLines is how many lines around the commented one its context
// shows on each side.
const contextLines = 3

// Check validates a comment request: the fields named in its errors.
func Check(req api.CommentRequest) error {
	switch {
	case strings.TrimSpace(req.Path) == "":
		return control.Invalid("path", "required: the file the comment is on, relative to the repository's root")
	case len(req.Path) > loop.MaxCommentPath:
		return control.Invalid("path", "too long (%d bytes, max %d)", len(req.Path), loop.MaxCommentPath)
	case req.Line < 1:
		return control.Invalid("line", "%d: lines count from 1", req.Line)
	case strings.TrimSpace(req.Text) == "":
		return control.Invalid("text", "required: what the agent should know or change")
	case len(req.Text) > loop.MaxCommentText:
		return control.Invalid("text", "too long (%d bytes, max %d)", len(req.Text), loop.MaxCommentText)
	case !utf8.ValidString(req.Text) || !utf8.ValidString(req.Path):
		return control.Invalid("text", "not valid UTF-8")
	}
	return nil
}

// Add attaches a line comment, made on loop id, to the loop that wrote the
// line, and re-opens that loop (see the package comment). g is nil
// without git flow: comments need it.
func Add(ctx context.Context, svc *control.Service, g Git, id string, req api.CommentRequest) (api.Comment, error) {
	if err := Check(req); err != nil {
		return api.Comment{}, err
	}
	if g == nil {
		why := svc.NoGit()
		if why == "" {
			why = "git flow is off"
		}
		return api.Comment{}, control.Invalid("comment", "line comments need loopr's git worktrees, and here %s", why)
	}
	on, err := svc.Get(id)
	if err != nil {
		return api.Comment{}, err
	}
	target, c, err := route(ctx, svc, g, on, req)
	if err != nil {
		return api.Comment{}, err
	}
	c.At = svc.Now()
	var out loop.Loop
	err = svc.Store.Update(func(tx *store.Tx) error {
		cur, err := tx.Get(target)
		if err != nil {
			return err
		}
		out, c, err = attach(tx, cur, c, c.At)
		return err
	})
	if err != nil {
		return api.Comment{}, err
	}
	return wire(out, c), nil
}

// route finds the loop a comment on loop on reaches and reads its line:
// the comment, without its time, and the target's id.
func route(ctx context.Context, svc *control.Service, g Git, on loop.Loop, req api.CommentRequest) (string, loop.Comment, error) {
	c := loop.Comment{Path: req.Path, Line: req.Line, Text: strings.TrimSpace(req.Text)}
	var root loop.Loop
	if err := svc.Store.View(func(tx *store.Tx) (err error) {
		root, err = control.RootOf(tx, on)
		return err
	}); err != nil {
		return "", c, err
	}
	_, spawns := loop.ChildType(on.Type)
	own := !spawns
	branch, tip, err := tipOf(ctx, g, on, root, own)
	if err != nil {
		return "", c, err
	}
	content, err := g.FileAt(ctx, tip, req.Path)
	if err != nil {
		return "", c, lineError(req, branch, tip, err)
	}
	if gitflow.Binary(content) {
		return "", c, control.Invalid("PATH:LINE", "%s:%d on %s (at %.12s): %s is a binary file: comment on a line of a text file", req.Path, req.Line, branch, tip, req.Path)
	}
	if n := gitflow.LineCount(content); req.Line > n {
		return "", c, control.Invalid("PATH:LINE", "%s:%d: %s has %d lines on %s (at %.12s)", req.Path, req.Line, req.Path, n, branch, tip)
	}
	c.Commit, c.Context = tip, Context(content, req.Line)
	if own {
		return on.ID, c, nil
	}
	commit, err := g.BlameLine(ctx, tip, req.Path, req.Line)
	if err != nil {
		return "", c, lineError(req, branch, tip, err)
	}
	writer, err := g.LoopOfLine(ctx, commit, tip)
	if err != nil {
		return "", c, err
	}
	if writer == "" {
		return "", c, control.Invalid("PATH:LINE", "%s:%d on %s was last changed by commit %.12s, which no loop made (the base's, or a person's): comment on a line a task of this plan wrote",
			req.Path, req.Line, branch, commit)
	}
	if err := within(svc, writer, on.ID); err != nil {
		return "", c, control.Invalid("PATH:LINE", "%s:%d on %s was last changed by commit %.12s of loop %s, %v", req.Path, req.Line, branch, commit, writer, err)
	}
	c.On = on.ID
	return writer, c, nil
}

// tipOf returns the branch a comment on loop on reads and its tip: the
// loop's own branch (own), else when it is gone or the loop has none its
// plan's branch.
func tipOf(ctx context.Context, g Git, on, root loop.Loop, own bool) (string, string, error) {
	var tries []string
	recorded := false // a branch the record names: one that is missing was deleted
	if own {
		recorded = on.Branch != ""
		b := on.Branch
		if b == "" {
			var err error
			if b, err = g.Branch(ctx, on.ID, on.Title); err != nil {
				return "", "", err
			}
		}
		tries = append(tries, b)
	}
	if root.Type == loop.Plan && (root.ID != on.ID || !own) {
		recorded = recorded || root.Branch != ""
		b := root.Branch
		if b == "" {
			var err error
			if b, err = g.Branch(ctx, root.ID, root.Title); err != nil {
				return "", "", err
			}
		}
		tries = append(tries, b)
	}
	for _, b := range tries {
		tip, ok, err := g.BranchTip(ctx, b)
		if err != nil {
			return "", "", err
		}
		if ok {
			return b, tip, nil
		}
	}
	if recorded {
		verb := "is"
		if len(tries) > 1 {
			verb = "are"
		}
		return "", "", control.Invalid("id", "%s %s: %s %s gone (deleted?): there is no line to comment on", on.Type, on.ID, strings.Join(tries, " and "), verb)
	}
	return "", "", control.Invalid("id", "%s %s has no branch yet (%s): there is no line to comment on", on.Type, on.ID, strings.Join(tries, ", "))
}

// lineError words a path or line git cannot find as the user's error.
func lineError(req api.CommentRequest, branch, tip string, err error) error {
	if errors.Is(err, gitflow.ErrNoLine) || errors.Is(err, gitflow.ErrInvalidID) {
		return control.Invalid("PATH:LINE", "%s:%d on %s (at %.12s): %s", req.Path, req.Line, branch, tip, strings.TrimPrefix(err.Error(), gitflow.ErrNoLine.Error()+": "))
	}
	return err
}

// within checks that loop id is top or below it.
func within(svc *control.Service, id, top string) error {
	return svc.Store.View(func(tx *store.Tx) error {
		cur, err := tx.Get(id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("which is not in the store any more")
		}
		for i := 0; err == nil && i < 1000; i++ {
			if cur.ID == top {
				return nil
			}
			if cur.Parent == "" {
				break
			}
			cur, err = tx.Get(cur.Parent)
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("which is not in the tree of %s", top)
	})
}

// attach stores c on cur in tx and re-opens cur as its status calls for;
// it returns the loop as recorded and the comment with its Seq.
func attach(tx *store.Tx, cur loop.Loop, c loop.Comment, now time.Time) (loop.Loop, loop.Comment, error) {
	switch cur.Status {
	case loop.Cancelled, loop.Expired, loop.Invalidated:
		return cur, c, &control.ActionError{Action: "comment", Loop: cur, Err: &loop.TransitionError{ID: cur.ID, From: cur.Status, To: loop.Pending},
			Msg: fmt.Sprintf("%s: this %s is %s, which is final: a comment cannot re-open it", cur.ID, cur.Type, cur.Status)}
	}
	c, err := cur.AddComment(c)
	if err != nil {
		return cur, c, control.Invalid("comment", "%v", err)
	}
	where := fmt.Sprintf("comment %d on %s:%d", c.Seq, c.Path, c.Line)
	if c.On != "" {
		where += " (made on " + c.On + ")"
	}
	// The comments have a section of their own in the prompt; the
	// feedback of a loop that passed is about failures already behind it.
	feedback := ""
	if cur.Status == loop.Failed {
		feedback = cur.Feedback
	}
	switch cur.Status {
	case loop.Complete, loop.AwaitingReview, loop.Merging, loop.Failed:
		if err := control.Move(tx, cur, loop.Pending, now, where+": re-opened for iteration "+fmt.Sprint(cur.Iteration+1), func(n *loop.Loop) {
			control.SendBack(n, feedback)
		}); err != nil {
			return cur, c, err
		}
		if cur.Status == loop.Complete {
			n, err := tx.Get(cur.ID)
			if err == nil {
				err = control.Unsettle(tx, n) // it and its ancestors: not done any more
			}
			if err != nil {
				return cur, c, err
			}
		}
	default: // pending, paused, running, needs_human: it waits for the next iteration
		if err := tx.Put(cur); err != nil {
			return cur, c, err
		}
	}
	if _, err := tx.AppendEvent(loop.Event{Time: now, Loop: cur.ID, Kind: loop.EventComment, Iteration: cur.Iteration,
		Message: where + ": " + clip(c.Text, 200)}); err != nil {
		return cur, c, err
	}
	out, err := tx.Get(cur.ID)
	return out, c, err
}

// List returns the comments of loop id and of every loop below it,
// oldest first.
func List(svc *control.Service, id string) ([]api.Comment, error) {
	out := []api.Comment{}
	err := svc.Store.View(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		desc, err := control.Descendants(tx, id)
		if err != nil {
			return err
		}
		for _, d := range append([]loop.Loop{l}, desc...) {
			for _, c := range d.Comments {
				out = append(out, wire(d, c))
			}
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b api.Comment) int { return a.At.Compare(b.At) })
	return out, err
}

// wire is c as the API shows it, with l, the loop it reached.
func wire(l loop.Loop, c loop.Comment) api.Comment {
	return api.Comment{Loop: l.ID, Type: l.Type, Title: l.Title, Status: l.Status, State: c.State(), Comment: c}
}

// Context is the lines of content around line (1-based), each "  N | text"
// and the line itself marked "> N | text", bounded by
// loop.MaxCommentContext.
func Context(content []byte, line int) string {
	lines := strings.Split(strings.TrimSuffix(string(content), "\n"), "\n")
	from, to := max(1, line-contextLines), min(len(lines), line+contextLines)
	w := len(fmt.Sprint(to))
	var b strings.Builder
	for n := from; n <= to; n++ {
		mark := " "
		if n == line {
			mark = ">"
		}
		s := fmt.Sprintf("%s %*d | %s\n", mark, w, n, clip(strings.TrimRight(lines[n-1], "\r"), 200))
		if b.Len()+len(s) > loop.MaxCommentContext {
			break
		}
		b.WriteString(s)
	}
	return strings.TrimRight(b.String(), "\n")
}

// clip cuts s to n bytes of valid UTF-8, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
