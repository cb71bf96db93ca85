package control

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// gcBatch is how many loops one write transaction of a retention pass
// deletes, so the manager never waits long for the store.
const gcBatch = 256

// GC runs a retention pass (seed 003's result TTL): terminal loops —
// complete, failed, cancelled, expired, invalidated — that finished more
// than retention.days ago (req.Days overrides it) are deleted with their
// journal entries and their <home>/loops/<id> directories.
//
// A loop is removed only together with its whole subtree: never while a
// descendant is live (it would be orphaned) or finished after the cutoff.
// Failed loops count as terminal: a parked loop nobody reset for the whole
// retention period goes too (its git branch, if any, stays). Directories
// under <home>/loops that belong to no loop and were last changed before
// the cutoff (a crash between the delete and the removal) are removed too.
//
// With req.DryRun nothing changes and the result says what would go.
// Days 0 keeps everything.
func (s *Service) GC(req api.GCRequest) (api.GCResult, error) {
	if req.Days < 0 {
		return api.GCResult{}, Invalid("--days", "must be >= 0")
	}
	res := api.GCResult{DryRun: req.DryRun, Days: req.Days, Removed: []api.GCLoop{}, Branches: []api.GCBranch{}}
	if res.Days == 0 {
		res.Days = s.cfg().Retention.Days
	}
	if res.Days == 0 {
		return res, nil
	}
	now := s.Now()
	res.Cutoff = now.Add(-time.Duration(res.Days) * 24 * time.Hour)

	doomed, kept, err := s.prunable(res.Cutoff)
	if err != nil {
		return res, err
	}
	res.Kept = kept
	if req.DryRun {
		res.Removed = doomed
	} else {
		for batch := range slices.Chunk(doomed, gcBatch) {
			removed, err := s.deleteLoops(batch, res.Cutoff)
			res.Removed = append(res.Removed, removed...)
			if err != nil {
				return res, err
			}
		}
	}
	for _, l := range res.Removed {
		n, err := s.removeDir(s.Paths.LoopDir(l.ID), req.DryRun)
		if err != nil {
			return res, err
		}
		if n >= 0 {
			res.Dirs++
			res.Bytes += n
		}
	}
	if err := s.removeStrayDirs(res.Cutoff, req.DryRun, &res); err != nil {
		return res, err
	}
	slices.SortFunc(res.Removed, func(a, b api.GCLoop) int { return cmp.Compare(a.ID, b.ID) })
	return res, nil
}

// finished returns when a terminal loop ended: finished_at, or updated_at
// for records (imported, old) that lack it.
func finished(l loop.Loop) time.Time {
	if !l.FinishedAt.IsZero() {
		return l.FinishedAt
	}
	return l.UpdatedAt
}

// prunable lists the loops a pass removes, children before their parents,
// and counts the old terminal loops it keeps for a descendant's sake.
func (s *Service) prunable(cutoff time.Time) ([]api.GCLoop, int, error) {
	type node struct {
		l    loop.Loop
		kids []string
	}
	nodes := map[string]*node{}
	err := s.Store.View(func(tx *store.Tx) error {
		return tx.ForEach(func(l loop.Loop) bool {
			// Keep only what the pass needs: tasks and feedback can be large.
			nodes[l.ID] = &node{l: loop.Loop{ID: l.ID, Type: l.Type, Status: l.Status, Title: l.Title,
				Parent: l.Parent, FinishedAt: l.FinishedAt, UpdatedAt: l.UpdatedAt}}
			return true
		})
	})
	if err != nil {
		return nil, 0, err
	}
	var roots []string
	for id, n := range nodes {
		if p, ok := nodes[n.l.Parent]; ok && n.l.Parent != id {
			p.kids = append(p.kids, id)
		} else {
			roots = append(roots, id)
		}
	}
	old := func(l loop.Loop) bool { return l.Status.Terminal() && finished(l).Before(cutoff) }

	// Post-order over each tree: a loop goes when it is old and all its
	// children go. state: 0 unseen, 1 in progress (a parent cycle), 2 done.
	state := map[string]int{}
	goes := map[string]bool{}
	var out []api.GCLoop
	kept := 0
	var visit func(id string) bool
	visit = func(id string) bool {
		switch state[id] {
		case 1:
			return false // a cycle of parent links: keep it all
		case 2:
			return goes[id]
		}
		state[id] = 1
		n := nodes[id]
		slices.Sort(n.kids)
		all := true
		for _, k := range n.kids {
			if !visit(k) {
				all = false
			}
		}
		ok := old(n.l) && all
		if old(n.l) && !all {
			kept++
		}
		state[id], goes[id] = 2, ok
		if ok {
			out = append(out, api.GCLoop{ID: id, Type: n.l.Type, Status: n.l.Status, Title: n.l.Title, FinishedAt: finished(n.l)})
		}
		return ok
	}
	slices.Sort(roots)
	for _, id := range roots {
		visit(id)
	}
	for id := range nodes { // loops only reachable through a cycle
		if state[id] == 0 {
			visit(id)
		}
	}
	return out, kept, nil
}

// deleteLoops deletes batch (children before parents) in one transaction,
// re-checking each loop: it must still be terminal, finished before the
// cutoff, and have no children left. It returns what it deleted.
func (s *Service) deleteLoops(batch []api.GCLoop, cutoff time.Time) ([]api.GCLoop, error) {
	var removed []api.GCLoop
	var arts []string // the artifacts whose store copies went
	err := s.Store.Update(func(tx *store.Tx) error {
		removed, arts = removed[:0], arts[:0]
		for _, g := range batch {
			l, err := tx.Get(g.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if !l.Status.Terminal() || !finished(l).Before(cutoff) {
				continue // reset or changed since the scan
			}
			kids, err := tx.Children(l.ID)
			if err != nil {
				return err
			}
			if len(kids) > 0 {
				continue // a child was added, or stayed, since the scan
			}
			if err := tx.Delete(l.ID); err != nil {
				return err
			}
			if err := DropArtifact(tx, s.Store, l.Artifact, ""); err != nil {
				return err
			}
			arts = append(arts, l.Artifact)
			g.Status = l.Status
			removed = append(removed, g)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	s.forgetArtifacts(arts)
	return removed, nil
}

// removeDir removes dir (unless dryRun) and returns the bytes it held, or
// -1 when there was no directory.
func (s *Service) removeDir(dir string, dryRun bool) (int64, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	var size int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	if dryRun {
		return size, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return size, fmt.Errorf("gc: %w", err)
	}
	return size, nil
}

// removeStrayDirs removes the directories under <home>/loops named like a
// loop id that no loop owns and that were last changed before cutoff.
func (s *Service) removeStrayDirs(cutoff time.Time, dryRun bool, res *api.GCResult) error {
	entries, err := os.ReadDir(s.Paths.Loops())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	gone := map[string]bool{}
	for _, l := range res.Removed {
		gone[l.ID] = true
	}
	var stray []string
	err = s.Store.View(func(tx *store.Tx) error {
		for _, e := range entries {
			name := e.Name()
			if !e.IsDir() || !loop.ValidID(name) || gone[name] || tx.Exists(name) {
				continue
			}
			if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
				stray = append(stray, name)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range stray {
		n, err := s.removeDir(s.Paths.LoopDir(id), dryRun)
		if err != nil {
			return err
		}
		if n >= 0 {
			res.Dirs++
			res.Bytes += n
		}
	}
	return nil
}

// HumanBytes formats n bytes compactly for people: 512 B, 1.5 MiB.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
