package control

import (
	"context"
	"fmt"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// GCBranches deletes (with dryRun only lists) the git branches of
// cancelled and invalidated loops: plans' integration branches and leaf
// loops' working branches, by their names (gitflow.Repo.Branch, which also
// finds an older loopr's loopr/<id>). Branches of failed loops stay: they
// may hold the only copy of work a reset would resume. Branches already
// gone are not listed.
func (s *Service) GCBranches(ctx context.Context, g *gitflow.Repo, dryRun bool) ([]api.GCBranch, error) {
	out := []api.GCBranch{}
	if g == nil {
		return out, nil
	}
	var dead []loop.Loop
	err := s.Store.View(func(tx *store.Tx) error {
		for _, st := range []loop.Status{loop.Cancelled, loop.Invalidated} {
			err := tx.ByStatus(st, func(l loop.Loop) bool {
				_, spawns := loop.ChildType(l.Type)
				if !spawns || l.Type == loop.Plan && l.Parent == "" {
					dead = append(dead, loop.Loop{ID: l.ID, Type: l.Type, Status: l.Status, Title: l.Title})
				}
				return true
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	for _, l := range dead {
		branch, err := g.Branch(ctx, l.ID, l.Title)
		if err != nil {
			return out, fmt.Errorf("gc: branch of %s: %w", l.ID, err)
		}
		ok, err := g.HasBranch(ctx, branch)
		if err != nil {
			return out, fmt.Errorf("gc: %w", err)
		}
		if !ok {
			continue
		}
		if !dryRun { // its worktree too, if it has one: a checked-out branch cannot go
			if err := g.RemoveWorktree(ctx, l.ID, branch); err != nil {
				return out, fmt.Errorf("gc: %w", err)
			}
		}
		out = append(out, api.GCBranch{Branch: branch, ID: l.ID, Type: l.Type, Status: l.Status, Title: l.Title})
	}
	return out, nil
}
