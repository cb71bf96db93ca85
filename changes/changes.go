// Package changes says what a loop's work changes in the repository (`loopr
// diff`, GET /v1/loops/{id}/diff, the TUI's diff pane): it picks the two
// commits to compare from the loop's record, has real git compute the
// patch, and parses it (github.com/bluekeyes/go-gitdiff) into files, hunks
// and lines with added/removed counts.
//
// What is compared:
//
//   - A task (a loop with its own branch under a plan) before it merges:
//     its branch against the plan branch it will merge into, from where they
//     diverged — `git diff plan...task`, what merging it would bring in.
//   - A merged task (its commit is in the plan branch; its branch may be
//     deleted): the commit the merge queue merged (the record's Commit)
//     against the plan branch just before that merge, from where they
//     diverged — `git diff M^1...commit`, where M is the merge commit, so a
//     batch merged together still shows each task's own work.
//   - A plan, or a loop with a branch and no plan above it: its branch
//     against the commit it started from (the record's Base) — `git diff
//     base...branch`.
//
// Spec and phase loops have no branch of their own (they work on a
// throwaway checkout of their plan's branch): their work is in their
// plan's diff. Git runs through the Git interface, which *gitflow.Repo
// implements; a patch over Limit is cut at a hunk or file boundary.
package changes

import (
	"context"
	"fmt"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// Git is what a diff needs of the repository (*gitflow.Repo).
type Git interface {
	// Ref returns the commit a branch points at; ok is false when the
	// branch does not exist.
	Ref(ctx context.Context, branch string) (commit string, ok bool, err error)
	// Resolve returns the full id of a commit; ok is false when the
	// repository has no such commit.
	Resolve(ctx context.Context, rev string) (commit string, ok bool, err error)
	// MergeBase returns the best common ancestor of two commits.
	MergeBase(ctx context.Context, a, b string) (string, error)
	// MergedAt finds the commit of tip's first-parent line that brought
	// commit in and that commit's first parent; ok is false when tip
	// does not hold commit.
	MergedAt(ctx context.Context, commit, tip string) (merge, before string, ok bool, err error)
	// Diff returns the patch from one commit to another, cut (cut true)
	// past maxLines lines or maxBytes bytes.
	Diff(ctx context.Context, from, to string, maxLines, maxBytes int) (patch string, cut bool, err error)
}

// Limit bounds the patch read for one diff.
type Limit struct {
	Lines int // patch lines; 0: no bound
	Bytes int // patch bytes; 0: no bound
}

// DefaultLimit is the bound of `loopr diff` and the TUI's pane: a diff
// past it is cut, with a note naming the git command that shows it whole.
var DefaultLimit = Limit{Lines: 20000, Bytes: 16 << 20}

// Error says why a loop has no diff to show (no branch, a branch that is
// gone): the caller asked about the wrong loop, or too early or too late.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func noDiff(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// Of computes the diff of loop l, whose tree's root is root (l itself for
// a root) with the plan branch planBranch (the root's branch; "" when the
// root has none yet).
func Of(ctx context.Context, g Git, l, root loop.Loop, planBranch string, lim Limit) (api.Diff, error) {
	if l.ID == root.ID {
		from, to, err := rootSides(ctx, g, l)
		if err != nil {
			return api.Diff{}, err
		}
		return compute(ctx, g, l.ID, api.DiffPlan, from, to, lim)
	}
	kind, from, to, err := taskSides(ctx, g, l, root, planBranch)
	if err != nil {
		return api.Diff{}, err
	}
	return compute(ctx, g, l.ID, kind, from, to, lim)
}

// side is one side of a diff: the api ref and the commit to diff (the
// merge base, for the left side).
type side struct {
	ref  api.DiffRef
	name string // how the command names it: a branch or a short commit
}

// taskSides picks the commits to compare for l, a loop under a plan, and
// says which kind of diff that is (api.DiffTask or api.DiffMerged).
func taskSides(ctx context.Context, g Git, l, root loop.Loop, planBranch string) (kind string, from, to side, err error) {
	sid := loop.ShortID(l.ID)
	if l.Branch == "" {
		if l.Type == loop.Spec || l.Type == loop.Phase || l.Type == loop.Plan {
			return "", from, to, noDiff("loop %s is a %s loop: it has no branch of its own (its work is on its plan's branch: loopr diff %s)", sid, l.Type, loop.ShortID(root.ID))
		}
		return "", from, to, noDiff("loop %s has no branch yet: it has not run", sid)
	}
	if planBranch == "" {
		return "", from, to, noDiff("loop %s: its plan %s has no branch yet", sid, loop.ShortID(root.ID))
	}
	plan, ok, err := g.Ref(ctx, planBranch)
	if err != nil {
		return "", from, to, err
	}
	planName := planBranch // how the command names it
	if !ok {
		// Landed by a fast forward, the base branch's commit is the plan
		// branch's tip as it was.
		if root.Landed.Mode == loop.LandFastForward && root.Landed.Commit != "" {
			if plan, ok, err = g.Resolve(ctx, root.Landed.Commit); err != nil {
				return "", from, to, err
			}
		}
		if !ok {
			return "", from, to, noDiff("loop %s: its plan's branch %s is gone (deleted?): nothing to compare with (the plan's whole diff: loopr diff %s)", sid, planBranch, loop.ShortID(root.ID))
		}
		planName = loop.ShortCommit(plan)
	}
	tip, ok, err := g.Ref(ctx, l.Branch)
	if err != nil {
		return "", from, to, err
	}
	if ok {
		base, err := g.MergeBase(ctx, plan, tip)
		if err != nil {
			return "", from, to, err
		}
		if base != tip || l.Commit == "" { // not merged yet (or nothing to find)
			return api.DiffTask, side{api.DiffRef{Branch: planBranch, Commit: base}, planName}, side{api.DiffRef{Branch: l.Branch, Commit: tip}, l.Branch}, nil
		}
	}
	commit := l.Commit
	if commit == "" {
		return "", from, to, noDiff("loop %s: its branch %s is gone and it recorded no commit: nothing to show", sid, l.Branch)
	}
	full, found, err := g.Resolve(ctx, commit)
	if err != nil {
		return "", from, to, err
	}
	if !found {
		return "", from, to, noDiff("loop %s: its branch %s is gone and its commit %.12s is not in the repository", sid, l.Branch, commit)
	}
	toSide := side{api.DiffRef{Commit: full}, loop.ShortCommit(full)}
	if ok { // the branch is still there
		toSide.ref.Branch = l.Branch
	}
	_, before, merged, err := g.MergedAt(ctx, full, plan)
	if err != nil {
		return "", from, to, err
	}
	kind, onto, ontoName := api.DiffTask, plan, planName
	if merged {
		kind, onto, ontoName = api.DiffMerged, before, loop.ShortCommit(before)
	}
	base, err := g.MergeBase(ctx, onto, full)
	if err != nil {
		return "", from, to, err
	}
	return kind, side{api.DiffRef{Branch: planBranch, Commit: base}, ontoName}, toSide, nil
}

// rootSides picks the commits to compare for a root loop: its branch
// against where it started.
func rootSides(ctx context.Context, g Git, l loop.Loop) (from, to side, err error) {
	sid := loop.ShortID(l.ID)
	if l.Branch == "" {
		return from, to, noDiff("loop %s has no branch yet: it has not run (or loopr's git flow is off)", sid)
	}
	tip, ok, err := g.Ref(ctx, l.Branch)
	if err != nil {
		return from, to, err
	}
	toSide := side{api.DiffRef{Branch: l.Branch, Commit: tip}, l.Branch}
	var start string
	if !ok {
		// Landed, then deleted: what the landing brought into the base branch.
		if tip, start, ok, err = landedSides(ctx, g, l); err != nil {
			return from, to, err
		}
		if !ok {
			return from, to, noDiff("loop %s: its branch %s is gone (deleted?): nothing to show", sid, l.Branch)
		}
		toSide = side{api.DiffRef{Commit: tip}, loop.ShortCommit(tip)}
	}
	switch {
	case start != "":
	case l.Base.Commit != "":
		c, found, err := g.Resolve(ctx, l.Base.Commit)
		if err != nil {
			return from, to, err
		}
		if !found {
			return from, to, noDiff("loop %s: its base commit %.12s is not in the repository", sid, l.Base.Commit)
		}
		start = c
	case l.Base.Branch != "":
		c, found, err := g.Ref(ctx, l.Base.Branch)
		if err != nil {
			return from, to, err
		}
		if !found {
			return from, to, noDiff("loop %s: its base branch %s is gone", sid, l.Base.Branch)
		}
		start = c
	default:
		return from, to, noDiff("loop %s: no base recorded for its branch %s (made before loopr recorded one): compare by hand with git diff", sid, l.Branch)
	}
	base, err := g.MergeBase(ctx, start, tip)
	if err != nil {
		return from, to, err
	}
	return side{api.DiffRef{Branch: l.Base.Branch, Commit: base}, loop.ShortCommit(start)}, toSide, nil
}

// landedSides returns, for a root loop that landed, the commit it landed
// at and, after a merge commit, the base branch's tip it was made on
// ("" after a fast forward: the loop's base is where it started); ok is
// false when it did not land or those commits are gone.
func landedSides(ctx context.Context, g Git, l loop.Loop) (tip, start string, ok bool, err error) {
	if l.Landed.Commit == "" || (l.Landed.Mode != loop.LandFastForward && l.Landed.Mode != loop.LandMerge) {
		return "", "", false, nil
	}
	if tip, ok, err = g.Resolve(ctx, l.Landed.Commit); err != nil || !ok {
		return "", "", false, err
	}
	if l.Landed.Mode == loop.LandMerge {
		if start, ok, err = g.Resolve(ctx, l.Landed.From); err != nil || !ok {
			return "", "", false, err
		}
	}
	return tip, start, true, nil
}

// compute runs the diff and parses it.
func compute(ctx context.Context, g Git, id, kind string, from, to side, lim Limit) (api.Diff, error) {
	d := api.Diff{Loop: id, Kind: kind, From: from.ref, To: to.ref, Command: "git diff " + from.name + "..." + to.name}
	patch, cut, err := g.Diff(ctx, from.ref.Commit, to.ref.Commit, lim.Lines, lim.Bytes)
	if err != nil {
		return api.Diff{}, err
	}
	if d.Files, d.Added, d.Removed, err = Parse(patch); err != nil {
		return api.Diff{}, fmt.Errorf("%s: %w", d.Command, err)
	}
	if cut {
		d.Truncated = true
		d.Cut = lines(patch)
	}
	return d, nil
}

// lines counts the lines of s.
func lines(s string) int {
	n := 0
	for i := range len(s) {
		if s[i] == '\n' {
			n++
		}
	}
	return n
}
