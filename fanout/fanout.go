// Package fanout decides best-of-N groups (issue 25): a task with
// `fanout: N` runs as N candidate loops, each in its own worktree, and only
// one of them — the winner — merges. The package is pure: it says how many
// candidates a budget lets start (Launches), which candidate wins once
// enough of them ended (Pick), and reads a judge command's answer
// (ParseJudge). Package loopmgr gathers the candidates' states, runs the
// judge and applies the decision: the winner merges, the losers are
// cancelled and their worktrees and branches removed.
//
// The pick policies (loops.<type>.fanout_pick):
//
//   - PickFirst: the first candidate to pass validation wins, at once; the
//     others are cancelled while they run.
//   - PickSmallestDiff: once every candidate ended (passed, failed,
//     cancelled or waiting for a person), the passing one with the
//     smallest diff (lines added + deleted) wins; a tie goes to the one
//     that passed first.
//   - PickJudge: once every candidate ended, a judge command
//     (loops.<type>.fanout_judge) reads the passing candidates' diffs and
//     names the winner (see ParseJudge for its contract). With one passing
//     candidate the judge is not run.
//
// A group where no candidate passes has no winner: its candidates keep
// their own outcomes (failed, needs_human), as a task of its own would.
package fanout

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The values of loops.<type>.fanout_pick.
const (
	PickFirst        = "first"
	PickSmallestDiff = "smallest_diff"
	PickJudge        = "judge"
)

// Picks lists every pick policy, the default first.
var Picks = []string{PickFirst, PickSmallestDiff, PickJudge}

// MaxN bounds a group's size: `fanout: N` with N in 1..MaxN (1 is no
// fanout).
const MaxN = 16

// State is how far one candidate got.
type State int

// The states of a candidate.
const (
	Running State = iota // pending or running: may still pass
	Passed               // its iteration passed validation (merging or complete)
	Ended                // failed, cancelled, or waiting for a person: out of the race
)

// Candidate is one loop of a group as Pick sees it.
type Candidate struct {
	ID       string
	Index    int // 1..N
	State    State
	PassedAt time.Time // when it passed (Passed only)
	// Diff is the size of its change against its base, lines added plus
	// deleted; read for PickSmallestDiff (-1: unknown, counted as largest).
	Diff int
}

// Decision is what Pick found.
type Decision struct {
	// Decided: the group is settled (a winner, or none can pass any more).
	Decided bool
	// Winner is the winning candidate's id; "" when Decided with no winner
	// (no candidate passed), or not decided yet.
	Winner string
	// Judge: the judge must choose among Passing (PickJudge with more
	// than one passing candidate); not decided until it did.
	Judge bool
	// Passing lists the passing candidates in the order they passed.
	Passing []Candidate
	// Why says how the winner was chosen, for the journal and `loopr why`.
	Why string
}

// Pick decides a group under policy (one of Picks; "" is PickFirst).
func Pick(policy string, cands []Candidate) Decision {
	var d Decision
	running := 0
	for _, c := range cands {
		switch c.State {
		case Passed:
			d.Passing = append(d.Passing, c)
		case Running:
			running++
		}
	}
	slices.SortStableFunc(d.Passing, func(a, b Candidate) int {
		if c := a.PassedAt.Compare(b.PassedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	n := len(cands)
	if policy == "" || policy == PickFirst {
		if len(d.Passing) > 0 {
			w := d.Passing[0]
			d.Decided, d.Winner = true, w.ID
			d.Why = fmt.Sprintf("candidate %d of %d passed first (fanout_pick: first)", w.Index, n)
		} else if running == 0 {
			d.Decided, d.Why = true, "no candidate passed"
		}
		return d
	}
	if running > 0 {
		return d // smallest_diff and judge wait for every candidate
	}
	d.Decided = true
	switch {
	case len(d.Passing) == 0:
		d.Why = "no candidate passed"
	case len(d.Passing) == 1:
		w := d.Passing[0]
		d.Winner = w.ID
		d.Why = fmt.Sprintf("candidate %d of %d was the only one to pass", w.Index, n)
	case policy == PickJudge:
		d.Decided, d.Judge = false, true
	default:
		w := slices.MinFunc(d.Passing, func(a, b Candidate) int { return cmp.Compare(diffKey(a), diffKey(b)) }) // the first of equals: the earliest pass
		d.Winner = w.ID
		d.Why = fmt.Sprintf("candidate %d of %d has the smallest diff of the %d that passed (%d lines; fanout_pick: smallest_diff)", w.Index, n, len(d.Passing), w.Diff)
	}
	return d
}

func diffKey(c Candidate) int {
	if c.Diff < 0 {
		return math.MaxInt
	}
	return c.Diff
}

// Launches returns how many of n candidates a budget lets start: a tree
// budget (root, with spent already used) divided by the budget each
// candidate gets of its own (per), by the smaller of dollars and tokens.
// Without a tree budget or a candidate budget to divide by, all n start.
// At least one starts: a task of its own would start too, and the budget
// gate holds it when the tree is spent.
func Launches(n int, root, per Budget, spent Budget) int {
	k := n
	if root.USD > 0 && per.USD > 0 {
		// Compared as a float: a huge ratio (a budget of 1e300 dollars)
		// converted to int would wrap and start one candidate.
		if f := math.Floor((root.USD-spent.USD)/per.USD + 1e-9); f < float64(k) {
			k = int(f)
		}
	}
	if root.Tokens > 0 && per.Tokens > 0 {
		k = min(k, int((root.Tokens-spent.Tokens)/per.Tokens))
	}
	return max(k, 1)
}

// Budget is an amount of dollars and tokens (0: none of that kind).
type Budget struct {
	USD    float64
	Tokens int64
}

// Agents returns the agent profile of candidate i (1-based) of a group
// over profiles: round-robin, "" (the loop's own) when profiles is empty.
func Agents(profiles []string, i int) string {
	if len(profiles) == 0 || i < 1 {
		return ""
	}
	return profiles[(i-1)%len(profiles)]
}

// ParseJudge reads a judge command's standard output: the winner is the
// first non-blank line, the candidate's index (1..N) or its loop id (or a
// unique suffix of the id, as a short id), optionally followed by text
// after a space (a reason, kept for the journal). The winner must be one of
// passing.
func ParseJudge(out string, passing []Candidate) (Candidate, string, error) {
	line := ""
	for l := range strings.Lines(out) {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	if line == "" {
		return Candidate{}, "", fmt.Errorf("the judge printed nothing: print the winning candidate's index (1..N) or loop id on the first line")
	}
	word, reason := line, ""
	if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
		word, reason = line[:i], line[i:] // "3 cleaner", "3\tcleaner"
	}
	word = strings.TrimPrefix(strings.TrimSuffix(word, ":"), "#")
	if i, err := strconv.Atoi(word); err == nil {
		for _, c := range passing {
			if c.Index == i {
				return c, clipReason(reason), nil
			}
		}
		return Candidate{}, "", fmt.Errorf("the judge chose candidate %d, which did not pass (passing: %s)", i, indexes(passing))
	}
	var found []Candidate
	for _, c := range passing {
		if len(word) >= 4 && strings.HasSuffix(strings.ToLower(c.ID), strings.ToLower(word)) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return Candidate{}, "", fmt.Errorf("the judge printed %q, which names no passing candidate: print its index (%s) or loop id", clip(word), indexes(passing))
	}
	return found[0], clipReason(reason), nil
}

// MaxReason bounds the reason kept from a judge's line, in bytes.
const MaxReason = 500

// clipReason trims a judge's reason and clips it to MaxReason bytes of
// valid UTF-8: it goes into every candidate's journal.
func clipReason(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > MaxReason {
		s = strings.ToValidUTF8(s[:MaxReason], "") + "…"
	}
	return s
}

func indexes(cs []Candidate) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = strconv.Itoa(c.Index)
	}
	return strings.Join(s, ", ")
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
