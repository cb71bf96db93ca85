package control

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// MinPrefix is the shortest id prefix that names a loop, as in git.
const MinPrefix = 4

// MaxCandidates bounds the loops an ambiguous prefix lists.
const MaxCandidates = 10

// AmbiguousError is an id prefix that more than one loop's id starts
// with, or a short id (a suffix) that more than one ends with.
type AmbiguousError struct {
	Prefix     string      // what was given
	Suffix     bool        // ids end with Prefix, rather than start with it
	Candidates []loop.Loop // at most MaxCandidates, in id order
	More       bool        // more loops match than are listed
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	n := fmt.Sprint(len(e.Candidates))
	if e.More {
		n = "more than " + n
	}
	what := "id prefix"
	if e.Suffix {
		what = "short id"
	}
	fmt.Fprintf(&b, "%s %q is ambiguous: %s loops match; give more characters:", what, e.Prefix, n)
	for _, l := range e.Candidates {
		fmt.Fprintf(&b, "\n  %s  %-6s  %s", l.ID, l.Type, termsafe.Line(l.Title))
	}
	return b.String()
}

// Match picks the loop ref names among matches, the loops whose id starts
// with ref: exactly one, or an error that says what is wrong — no loop
// (wrapping store.ErrNotFound), a prefix too short, or an *AmbiguousError
// listing the candidates. An exact id always wins.
func Match(ref string, matches []loop.Loop) (loop.Loop, error) {
	return match(ref, matches, false)
}

// MatchSuffix is Match for the loops whose id ends with ref (a short id,
// as branch names carry), when none starts with it.
func MatchSuffix(ref string, matches []loop.Loop) (loop.Loop, error) {
	return match(ref, matches, true)
}

func match(ref string, matches []loop.Loop, suffix bool) (loop.Loop, error) {
	for _, l := range matches {
		if l.ID == ref {
			return l, nil
		}
	}
	switch {
	case len(matches) == 0 && len(ref) < MinPrefix:
		return loop.Loop{}, fmt.Errorf("loop %s: %w (an id prefix needs at least %d characters; loopr list shows the ids)", ref, store.ErrNotFound, MinPrefix)
	case len(matches) == 0:
		return loop.Loop{}, fmt.Errorf("loop %s: %w: no loop id is, starts or ends with it (loopr list shows the ids)", ref, store.ErrNotFound)
	case len(ref) < MinPrefix:
		return loop.Loop{}, Invalid("id", "%q is too short for an id prefix: give at least %d characters", ref, MinPrefix)
	case len(matches) == 1:
		return matches[0], nil
	}
	e := &AmbiguousError{Prefix: ref, Suffix: suffix, Candidates: matches}
	if len(matches) > MaxCandidates {
		e.Candidates, e.More = matches[:MaxCandidates], true
	}
	return loop.Loop{}, e
}

// Resolve returns the loop that ref names in the store: its id, a unique
// prefix of at least MinPrefix characters (case-insensitive for loopr's
// upper-case ids), or else a unique suffix of as many (a short id, as
// `loopr list` and branch names show, in any case).
func (s *Service) Resolve(ref string) (loop.Loop, error) {
	l, err := s.Get(ref)
	if err == nil || !errors.Is(err, store.ErrNotFound) || len(ref) < MinPrefix {
		if err != nil && errors.Is(err, store.ErrNotFound) {
			return Match(ref, nil)
		}
		return l, err
	}
	matches, err := s.byPrefix(ref)
	if err != nil || len(matches) > 0 {
		if err != nil {
			return loop.Loop{}, err
		}
		return Match(ref, matches)
	}
	if matches, err = s.byPrefixFilter(api.ListRequest{Suffix: ref}); err != nil {
		return loop.Loop{}, err
	}
	return MatchSuffix(ref, matches)
}

// byPrefix lists the loops whose id starts with ref, or else with ref in
// upper case (loopr's ids are upper-case ULIDs; people type lower case).
func (s *Service) byPrefix(ref string) ([]loop.Loop, error) {
	return s.byPrefixFilter(api.ListRequest{Prefix: ref})
}

// byPrefixFilter is List for a request with a prefix or suffix: at most
// MaxCandidates+1 loops whose id starts with req.Prefix (or its upper
// case), or ends with req.Suffix (in any case), that match the other
// filters.
func (s *Service) byPrefixFilter(req api.ListRequest) ([]loop.Loop, error) {
	f := store.Filter{Statuses: req.Status, Type: req.Type, Parent: req.Parent, IDPrefix: req.Prefix, IDSuffix: req.Suffix, Limit: MaxCandidates + 1}
	matches, err := s.Store.List(f)
	if err == nil && len(matches) == 0 && req.Prefix != "" && strings.ToUpper(req.Prefix) != req.Prefix {
		f.IDPrefix = strings.ToUpper(req.Prefix)
		matches, err = s.Store.List(f)
	}
	return matches, err
}
