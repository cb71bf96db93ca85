package control

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// The operations behind loopr's MCP server (package mcp, POST /v1/mcp):
// what an agent may do to its own loop and the loops below it. The daemon
// checks the caller's token first; every target is checked here with
// Within, in the transaction that acts on it.

// ForbiddenError is an MCP call the caller may not make: a token that is
// not its loop's, or a target outside the token's loop subtree (HTTP 403).
type ForbiddenError struct{ Msg string }

func (e *ForbiddenError) Error() string { return e.Msg }

// MaxProgressText bounds report_progress's text, in bytes.
const MaxProgressText = 500

// Within reports whether target is caller or lies below it.
func Within(tx *store.Tx, caller, target string) (bool, error) {
	cur := target
	for i := 0; cur != "" && i < 1000; i++ {
		if cur == caller {
			return true, nil
		}
		l, err := tx.Get(cur)
		if err != nil {
			return false, err
		}
		cur = l.Parent
	}
	return false, nil
}

// inSubtree returns target (caller when "") after checking that it lies
// in caller's subtree: a *ForbiddenError when not.
func inSubtree(tx *store.Tx, caller, target string) (loop.Loop, error) {
	if target == "" {
		target = caller
	}
	ok, err := Within(tx, caller, target)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return loop.Loop{}, fmt.Errorf("target %s: %w", target, err)
		}
		return loop.Loop{}, err
	}
	if !ok {
		return loop.Loop{}, &ForbiddenError{Msg: fmt.Sprintf("loop %s is outside the subtree of loop %s, the caller's: an agent acts only on its own loop and the loops below it", target, caller)}
	}
	return tx.Get(target)
}

// MCPTarget returns target (caller when "") when it lies in caller's
// subtree, else a *ForbiddenError.
func (s *Service) MCPTarget(caller, target string) (loop.Loop, error) {
	var out loop.Loop
	err := s.Store.View(func(tx *store.Tx) (err error) {
		out, err = inSubtree(tx, caller, target)
		return err
	})
	return out, err
}

// SetProgress records the progress the agent of running loop id reports
// (Loop.Progress): text on one line, at most MaxProgressText bytes;
// percent 0–100, or -1 when not given.
func (s *Service) SetProgress(id, text string, percent int) (loop.Loop, error) {
	if percent < -1 || percent > 100 {
		return loop.Loop{}, Invalid("percent", "%d is out of range: give 0 to 100, or leave it out", percent)
	}
	text = strings.TrimSpace(termsafe.Line(strings.ToValidUTF8(text, "\uFFFD")))
	if text == "" {
		return loop.Loop{}, Invalid("text", "empty: say in a few words how far the work is")
	}
	for len(text) > MaxProgressText {
		_, n := utf8.DecodeLastRuneInString(text)
		text = text[:len(text)-n]
	}
	now := s.Now()
	var out loop.Loop
	err := s.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		if l.Status != loop.Running {
			return Invalid("loop", "loop %s is %s: progress is reported while its agent runs", id, l.Status)
		}
		l.Progress = &loop.Progress{Text: text, Percent: percent, At: now}
		out = l
		return tx.Put(l)
	})
	return out, err
}

// Siblings returns the loops that share id's parent, id left out; none for
// a root (other roots are other people's trees). Siblings lie outside the
// caller's subtree: of each, only its id, parent, type, status, title and
// depth, never its task, answer, feedback, comments or question.
func (s *Service) Siblings(id string) ([]loop.Loop, error) {
	var out []loop.Loop
	err := s.Store.View(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil || l.Parent == "" {
			return err
		}
		kids, err := tx.Children(l.Parent)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if k.ID != l.ID {
				out = append(out, loop.Loop{ID: k.ID, Parent: k.Parent, Type: k.Type, Status: k.Status, Title: k.Title, Depth: k.Depth})
			}
		}
		return nil
	})
	return out, err
}

// MaxSpawnDepth is the deepest a loop spawn_child makes may lie (a root
// is at depth 0, the built-in tree's tasks at 3): agents that spawn agents
// that spawn agents stop there.
const MaxSpawnDepth = 8

// MaxSpawnTitle bounds the title of a loop spawn_child makes, in bytes:
// the tree shows it on one line, in the TUI and on the dashboard.
const MaxSpawnTitle = 200

// SpawnChild creates a loop below parent, which must lie in caller's
// subtree, through the one create path (CreateIn: max_pending and quotas
// admit it or refuse it). A built-in type must be the parent's child type
// (plan: spec, spec: phase, phase: ralph); a user type may go below any
// loop; no deeper than MaxSpawnDepth. The child inherits the parent's
// owner, fairness key and profile, as the children of an artifact do, so
// the owner's quota counts it.
func (s *Service) SpawnChild(caller string, req api.CreateRequest) (loop.Loop, error) {
	switch title := strings.TrimSpace(req.Title); {
	case len(title) > MaxSpawnTitle:
		return loop.Loop{}, Invalid("title", "%d bytes, at most %d: a short title; the details go in task", len(title), MaxSpawnTitle)
	case strings.ContainsFunc(title, unicode.IsControl):
		return loop.Loop{}, Invalid("title", "holds a line break or another control character: give one line")
	}
	now := s.Now()
	var out loop.Loop
	err := s.Store.Update(func(tx *store.Tx) error {
		p, err := inSubtree(tx, caller, req.Parent)
		if err != nil {
			return err
		}
		if _, user := s.cfg().UserTypes[req.Type]; !user && s.cfg().KnownType(req.Type) {
			if ct, ok := loop.ChildType(p.Type); !ok || ct != req.Type {
				want := "a user type (types: in loopr.yml)"
				if ok {
					want = ct + " or " + want
				}
				return Invalid("type", "%s cannot go below %s %s: want %s", req.Type, p.Type, p.ID, want)
			}
		}
		if p.Depth+1 > MaxSpawnDepth {
			return &ForbiddenError{Msg: fmt.Sprintf("loop %s is at depth %d: spawn_child makes no loop deeper than %d", p.ID, p.Depth, MaxSpawnDepth)}
		}
		req.Parent = p.ID
		req.Owner, req.FairnessKey = p.Owner, p.FairnessKey
		if _, ok := s.cfg().Profile(p.Agent); ok {
			req.Agent = p.Agent
		}
		out, err = s.CreateIn(tx, req, now)
		return err
	})
	return out, err
}

// JournalMCP writes what an MCP call did on loop id (kind mcp), or, for an
// id no loop has (a forged call), an event of no loop that names it.
func (s *Service) JournalMCP(id, msg string) error {
	now := s.Now()
	return s.Store.Update(func(tx *store.Tx) error {
		ev := loop.Event{Time: now, Loop: id, Kind: loop.EventMCP, Message: msg}
		l, err := tx.Get(id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			ev.Loop, ev.Message = "", "loop "+id+": "+msg
		case err != nil:
			return err
		default:
			ev.Iteration = l.Iteration
		}
		_, err = tx.AppendEvent(ev)
		return err
	})
}
