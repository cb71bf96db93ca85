package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
)

// gcEvery is how often the cleaner runs a retention pass (and once at start).
const gcEvery = time.Hour

// cleaner runs a retention pass at start and every gcEvery until ctx ends.
// retention.days is read at each pass, so a hot reload applies at the next.
func (d *daemon) cleaner(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := d.gc(ctx, api.GCRequest{}); err != nil {
			d.log.Error("retention pass", "err", err)
		}
		t.Reset(gcEvery)
	}
}

// gc runs one retention pass: control.GC, then the git worktrees of the
// removed loops (failed loops keep theirs until then), a journal event and
// a poke of the streams when something went.
func (d *daemon) gc(ctx context.Context, req api.GCRequest) (api.GCResult, error) {
	done, err := d.beginWrite()
	if err != nil {
		return api.GCResult{}, err
	}
	defer done()
	var branches []api.GCBranch
	if req.Branches { // before the records go: they name the branches
		var err error
		if branches, err = d.svc.GCBranches(ctx, d.git, req.DryRun); err != nil {
			return api.GCResult{}, err
		}
		if !req.DryRun && len(branches) > 0 {
			msg := fmt.Sprintf("gc: deleted %d git branches of cancelled and invalidated loops", len(branches))
			d.log.Info(msg)
			d.event(msg)
		}
	}
	res, err := d.svc.GC(req)
	if branches != nil {
		res.Branches = branches
	}
	if req.DryRun || len(res.Removed) == 0 {
		return res, err
	}
	if d.git != nil {
		for _, l := range res.Removed {
			if _, serr := os.Stat(filepath.Join(d.paths.Worktrees(), l.ID)); serr != nil {
				continue
			}
			if werr := d.git.RemoveWorktree(context.WithoutCancel(ctx), l.ID, ""); werr != nil {
				d.log.Warn("gc: remove worktree", "loop", l.ID, "err", werr)
			}
		}
	}
	d.metrics.removed(len(res.Removed))
	msg := fmt.Sprintf("retention: removed %d loops that finished before %s (retention.days %d), %d directories, %s",
		len(res.Removed), res.Cutoff.Format(time.RFC3339), res.Days, res.Dirs, control.HumanBytes(res.Bytes))
	d.log.Info(msg)
	d.event(msg)
	return res, err
}

// postGC serves POST /v1/gc: a retention pass now.
func (d *daemon) postGC(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	var req api.GCRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	res, err := d.gc(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}
