package cli

import (
	"context"
	"errors"
	"net/http"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// lookup returns the loop that ref names, like git names commits: its id,
// or a unique prefix of at least control.MinPrefix characters, or else a
// unique suffix of as many (the short id that list and branch names
// show). Through the daemon it asks GET /v1/loops?prefix= (then
// ?suffix=), else the store; an ambiguous one is an error listing the
// candidates (exit 2).
func lookup(ctx context.Context, b Backend, ref string) (loop.Loop, error) {
	l, err := b.Get(ctx, ref)
	if err == nil || !notFound(err) {
		return l, err
	}
	if len(ref) < control.MinPrefix {
		return control.Match(ref, nil)
	}
	matches, err := b.List(ctx, api.ListRequest{Prefix: ref})
	if err != nil || len(matches) > 0 {
		if err != nil {
			return loop.Loop{}, err
		}
		return control.Match(ref, matches)
	}
	if matches, err = b.List(ctx, api.ListRequest{Suffix: ref}); err != nil {
		return loop.Loop{}, err
	}
	return control.MatchSuffix(ref, matches)
}

// resolveID is lookup for commands that need only the id.
func resolveID(ctx context.Context, b Backend, ref string) (string, error) {
	l, err := lookup(ctx, b, ref)
	return l.ID, err
}

// notFound reports whether err says a loop does not exist, from the store
// or from the daemon.
func notFound(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusNotFound && ae.Code == api.CodeNotFound
	}
	return errors.Is(err, store.ErrNotFound)
}
