package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/radar"
	"github.com/loopr-dev/loopr/store"
)

// ErrNoRadar means the conflict radar cannot run: loopr has no git flow
// here (not a git repository, or git.worktrees off).
var ErrNoRadar = errors.New("the conflict radar needs loopr's git flow: a git repository and git.worktrees on")

// Conflicts runs the conflict radar over the tree that holds loop id (any
// loop of it: its root is the plan): the branches of its live loops (not
// finished) are dry-run against the plan branch's tip and against each
// other. rad nil gives ErrNoRadar.
func (s *Service) Conflicts(ctx context.Context, rad *radar.Radar, id string) (api.Conflicts, error) {
	root, live, err := s.liveBranches(id)
	if err != nil {
		return api.Conflicts{Conflicts: []api.Conflict{}}, err
	}
	if rad == nil {
		return api.Conflicts{Conflicts: []api.Conflict{}}, ErrNoRadar
	}
	out := api.Conflicts{Plan: root.ID, Branch: root.Branch, Live: len(live), Conflicts: []api.Conflict{}}
	if root.Branch == "" {
		return out, nil
	}
	branches := make([]radar.Branch, 0, len(live))
	for _, l := range live {
		branches = append(branches, radar.Branch{Loop: l.ID, Name: l.Branch})
	}
	rep, err := rad.Scan(ctx, root.Branch, branches)
	if err != nil {
		return out, fmt.Errorf("conflicts of %s: %w", root.ID, err)
	}
	out.Commit, out.Checked, out.Ran, out.Skipped = rep.Commit, rep.Checked, rep.Ran, rep.Skipped
	titles := map[string]string{root.ID: root.Title}
	for _, l := range live {
		titles[l.ID] = l.Title
	}
	for _, c := range rep.Conflicts {
		ac := api.Conflict{Loop: c.Loop, Title: titles[c.Loop], Branch: c.Branch, With: api.ConflictWithLoop,
			Other: c.Other, OtherTitle: titles[c.Other], OtherBranch: c.OtherBranch, Files: c.Files}
		if c.Other == "" {
			ac.With, ac.Other, ac.OtherTitle = api.ConflictWithPlan, root.ID, root.Title
		}
		out.Conflicts = append(out.Conflicts, ac)
	}
	return out, nil
}

// ConflictsOf is the part of Conflicts that names loop id, for `why`; the
// error's text, when the radar could not run, is for ConflictCheck. Without
// git flow (rad nil), or for a loop that is not a live branch of a tree (a
// plan, spec or phase loop, a finished task), there is nothing to say and
// nothing runs.
func (s *Service) ConflictsOf(ctx context.Context, rad *radar.Radar, id string) ([]api.Conflict, error) {
	if rad == nil {
		return nil, nil
	}
	l, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	if l.Root() || l.Branch == "" || l.Status.Terminal() {
		return nil, nil // not a live branch of a tree: no walk, no git
	}
	all, err := s.Conflicts(ctx, rad, id)
	if err != nil {
		return nil, err
	}
	var out []api.Conflict
	for _, c := range all.Conflicts {
		if c.Loop == id || c.With == api.ConflictWithLoop && c.Other == id {
			out = append(out, c)
		}
	}
	return out, nil
}

// rootOf returns loop id and the root of its tree (the loop itself for a
// root).
func rootOf(tx *store.Tx, id string) (l, root loop.Loop, err error) {
	if l, err = tx.Get(id); err != nil {
		return l, root, err
	}
	root = l
	for hops := 0; root.Parent != ""; hops++ {
		if hops > maxHops { // a cycle in damaged records
			return l, root, fmt.Errorf("loop %s: parent chain longer than %d", id, maxHops)
		}
		if root, err = tx.Get(root.Parent); err != nil {
			return l, root, err
		}
	}
	return l, root, nil
}

// maxHops bounds a walk up a parent chain.
const maxHops = 1000

// liveBranches finds the root of id's tree and the loops under it that are
// not finished and have a branch of their own.
func (s *Service) liveBranches(id string) (loop.Loop, []loop.Loop, error) {
	var (
		root loop.Loop
		live []loop.Loop
	)
	err := s.Store.View(func(tx *store.Tx) error {
		var err error
		if _, root, err = rootOf(tx, id); err != nil {
			return err
		}
		queue := []string{root.ID}
		for len(queue) > 0 {
			kids, err := tx.Children(queue[0])
			if err != nil {
				return err
			}
			queue = queue[1:]
			for _, k := range kids {
				queue = append(queue, k.ID)
				if k.Branch != "" && !k.Status.Terminal() {
					live = append(live, k)
				}
			}
		}
		return nil
	})
	return root, live, err
}
