// Package radar predicts merge conflicts before they happen: given a plan's
// integration branch and the branches of its live loops, it dry-runs each
// branch against the plan branch's tip and against each other with `git
// merge-tree --write-tree` (git 2.38 or later), which merges in the object
// store only — no worktree, index or ref moves — and names the paths that
// would conflict.
//
// The pairs grow as n², so a scan is bounded three ways: a branch with no
// commit beyond the plan tip (its tip is an ancestor of the plan's) is
// skipped, since it can conflict with nothing; each dry run is cached on its
// two commit ids, so a scan re-runs git only for the pairs whose branches
// moved; and at most MaxPairs loop-against-loop pairs are dry-run per scan
// (the rest are counted in Report.Skipped).
//
// Git runs through the Git interface, which *gitflow.Repo implements.
package radar

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// Git is what the radar needs of a repository (*gitflow.Repo).
type Git interface {
	// BranchTip returns the commit a local branch points at; ok is false
	// when there is no such branch.
	BranchTip(ctx context.Context, branch string) (commit string, ok bool, err error)
	// IsAncestor reports whether commit a is an ancestor of (or equal to) b.
	IsAncestor(ctx context.Context, a, b string) (bool, error)
	// MergeTree dry-runs merging commits a and b and returns the paths that
	// would conflict; none when the merge would be clean.
	MergeTree(ctx context.Context, a, b string) ([]string, error)
}

// Branch is a live loop's working branch.
type Branch struct {
	Loop string // the loop's id
	Name string // its git branch
}

// Conflict is a predicted conflict between a loop's branch and either the
// plan branch's tip (Other == "") or another loop's branch.
type Conflict struct {
	Loop        string
	Branch      string
	Other       string // the other loop's id; "" for the plan tip
	OtherBranch string
	Files       []string // sorted
}

// Report is one scan's answer.
type Report struct {
	Plan      string     // the plan branch
	Commit    string     // its tip
	Checked   int        // live branches with commits beyond the plan tip
	Ran       int        // dry runs git performed (cache misses)
	Skipped   int        // loop-against-loop pairs left out over MaxPairs
	Conflicts []Conflict // loop-vs-plan first for each loop, then by loop and other
}

// DefaultMaxPairs bounds the loop-against-loop dry runs of one scan.
const DefaultMaxPairs = 500

// Radar scans plans for predicted conflicts. Its cache of dry runs (by
// commit pair) is kept per plan branch and holds only the pairs the last
// scan of that plan used. Safe for concurrent use.
type Radar struct {
	git Git
	// MaxPairs bounds the loop-against-loop dry runs of one scan; 0 means
	// DefaultMaxPairs.
	MaxPairs int

	mu    sync.Mutex
	cache map[string]map[pair]result // plan branch → pair → result
}

type pair struct {
	op   byte // 'm' merge-tree, 'a' is-ancestor
	a, b string
}

type result struct {
	files    []string
	ancestor bool
}

// New returns a radar over g.
func New(g Git) *Radar {
	return &Radar{git: g, cache: map[string]map[pair]result{}}
}

// Scan dry-runs the live branches of the plan branch plan: each against
// the plan tip, then each pair of them. A branch that does not exist (yet)
// is left out. A plan branch that does not exist gives an empty report.
func (r *Radar) Scan(ctx context.Context, plan string, live []Branch) (Report, error) {
	rep := Report{Plan: plan, Conflicts: []Conflict{}}
	tip, ok, err := r.git.BranchTip(ctx, plan)
	if err != nil || !ok {
		return rep, err
	}
	rep.Commit = tip
	s := &scan{r: r, old: r.cached(plan), used: map[pair]result{}, rep: &rep}
	defer func() { r.keep(plan, s.used) }()

	live = slices.Clone(live)
	slices.SortFunc(live, func(a, b Branch) int { return cmp.Compare(a.Loop, b.Loop) })
	type ahead struct {
		Branch
		commit string
	}
	var work []ahead
	for _, b := range live {
		c, ok, err := r.git.BranchTip(ctx, b.Name)
		if err != nil {
			return rep, fmt.Errorf("radar: loop %s: %w", b.Loop, err)
		}
		if !ok {
			continue
		}
		in, err := s.isAncestor(ctx, c, tip)
		if err != nil {
			return rep, fmt.Errorf("radar: loop %s: %w", b.Loop, err)
		}
		if !in {
			work = append(work, ahead{b, c})
		}
	}
	rep.Checked = len(work)
	byLoop := make([][]Conflict, len(work))
	for i, w := range work {
		files, err := s.mergeTree(ctx, w.commit, tip)
		if err != nil {
			return rep, fmt.Errorf("radar: loop %s against %s: %w", w.Loop, plan, err)
		}
		if len(files) > 0 {
			byLoop[i] = append(byLoop[i], Conflict{Loop: w.Loop, Branch: w.Name, OtherBranch: plan, Files: files})
		}
	}
	limit := cmp.Or(r.MaxPairs, DefaultMaxPairs)
	pairs := 0
	for i, a := range work {
		for _, b := range work[i+1:] {
			if pairs >= limit {
				rep.Skipped++
				continue
			}
			pairs++
			files, err := s.mergeTree(ctx, a.commit, b.commit)
			if err != nil {
				return rep, fmt.Errorf("radar: loops %s and %s: %w", a.Loop, b.Loop, err)
			}
			if len(files) > 0 {
				byLoop[i] = append(byLoop[i], Conflict{Loop: a.Loop, Branch: a.Name, Other: b.Loop, OtherBranch: b.Name, Files: files})
			}
		}
	}
	for _, cs := range byLoop {
		rep.Conflicts = append(rep.Conflicts, cs...)
	}
	return rep, nil
}

// Of returns the conflicts that name loop id, on either side.
func (rep Report) Of(id string) []Conflict {
	var out []Conflict
	for _, c := range rep.Conflicts {
		if c.Loop == id || c.Other == id {
			out = append(out, c)
		}
	}
	return out
}

func (r *Radar) cached(plan string) map[pair]result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cache[plan]
}

// keep replaces the plan's cache with what the last scan used: the cache
// never outgrows one scan's pairs.
func (r *Radar) keep(plan string, used map[pair]result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cache[plan] = used
}

// scan is one Scan's state: the previous cache it reads, the entries it
// uses (the next cache) and its report's counters.
type scan struct {
	r    *Radar
	old  map[pair]result
	used map[pair]result
	rep  *Report
}

func (s *scan) lookup(k pair) (result, bool) {
	if v, ok := s.used[k]; ok {
		return v, true
	}
	v, ok := s.old[k]
	if ok {
		s.used[k] = v
	}
	return v, ok
}

func (s *scan) isAncestor(ctx context.Context, a, b string) (bool, error) {
	k := pair{'a', a, b}
	if v, ok := s.lookup(k); ok {
		return v.ancestor, nil
	}
	in, err := s.r.git.IsAncestor(ctx, a, b)
	if err != nil {
		return false, err
	}
	s.used[k] = result{ancestor: in}
	return in, nil
}

func (s *scan) mergeTree(ctx context.Context, a, b string) ([]string, error) {
	if b < a { // a merge is symmetric: one entry per pair
		a, b = b, a
	}
	k := pair{'m', a, b}
	if v, ok := s.lookup(k); ok {
		return v.files, nil
	}
	files, err := s.r.git.MergeTree(ctx, a, b)
	if err != nil {
		return nil, err
	}
	s.rep.Ran++
	s.used[k] = result{files: files}
	return files, nil
}
