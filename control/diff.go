package control

import (
	"context"
	"errors"
	"fmt"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/changes"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// ErrNoDiff means a diff cannot be computed: loopr has no git flow here.
var ErrNoDiff = errors.New("loopr diff needs loopr's git flow: a git repository, git on PATH and git.worktrees on")

// Diff computes what loop id's work changes (package changes says which
// commits it compares). g nil gives ErrNoDiff; a loop without a diff to
// show (no branch, a branch that is gone) gives an *InputError.
func (s *Service) Diff(ctx context.Context, g *gitflow.Repo, id string) (api.Diff, error) {
	var l, root loop.Loop
	err := s.Store.View(func(tx *store.Tx) error {
		var err error
		l, root, err = rootOf(tx, id)
		return err
	})
	if err != nil {
		return api.Diff{}, err
	}
	if g == nil {
		return api.Diff{}, ErrNoDiff
	}
	planBranch := root.Branch
	if planBranch == "" && root.Type == loop.Plan && root.ID != l.ID && l.Branch != "" {
		// A record from before plans recorded their branch: its name.
		if planBranch, err = g.Branch(ctx, root.ID, root.Title); err != nil {
			return api.Diff{}, err
		}
	}
	// With git.remote the branches are the remote's: fetch them first (a
	// no-op without one).
	if err := g.Fetch(ctx); err != nil {
		return api.Diff{}, fmt.Errorf("diff of %s: %w", loop.ShortID(l.ID), err)
	}
	d, err := changes.Of(ctx, g, l, root, planBranch, changes.DefaultLimit)
	var ce *changes.Error
	if errors.As(err, &ce) {
		return d, Invalid("", "%s", ce.Msg)
	}
	return d, err
}
