package control

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Done means done. A loop's subtree is done when it and every loop below it
// are complete or cancelled (loop.Status.Settled); the transaction that
// finishes the last of them records it on each loop whose subtree it
// completes, walking up (subtree_done_at). The depends_on gate then reads
// one record per dependency, and a plan whose subtree is done fires
// tree_complete — whether its last loop completed (loopmgr) or was
// cancelled (CancelTree): both call Settle.
//
// For a ralph (or user type) loop in a plan, complete means merged into
// the plan branch: its pass is recorded only after its branch merged. A
// phase's subtree is done when its tasks are, a spec's when its phases'
// are: all their work is on the plan branch.

// maxSettleDepth bounds the walks up and down a tree, like the other walks
// (a damaged store could hold a parent cycle).
const maxSettleDepth = 1000

// Settle records, in tx, what finishing loop id (complete or cancelled in
// tx) finished: its subtree when nothing below it is
// left, then each ancestor's whose subtree that completes. When it
// completes the tree of a root plan that is complete, it writes
// tree_complete on the plan, naming its cancelled loops and, with git,
// its branch. A loop that is not settled, or has loops below it not done,
// changes nothing; nor does an id with no record.
//
// A finished sibling or child without subtree_done_at (a record from
// before it existed, or one whose subtree is not done) is looked into, so
// the marks heal themselves; the usual completion costs one children scan
// of its parent.
func Settle(tx *store.Tx, id string, now time.Time, git bool) error {
	cur, err := tx.Get(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for range maxSettleDepth {
		done, marked, err := settle(tx, &cur, now, 0)
		if err != nil || !done {
			return err
		}
		if cur.Parent == "" {
			if marked {
				return treeComplete(tx, cur, now, git)
			}
			return nil
		}
		p, err := tx.Get(cur.Parent)
		if errors.Is(err, store.ErrNotFound) {
			return nil // an orphan: no tree above it to finish
		}
		if err != nil {
			return err
		}
		cur = p
	}
	return nil
}

// settle reports whether l's subtree is done, recording subtree_done_at on
// l (marked) and on the loops below it found done on the way when not yet
// recorded.
func settle(tx *store.Tx, l *loop.Loop, now time.Time, depth int) (done, marked bool, err error) {
	if !l.SubtreeDoneAt.IsZero() {
		return true, false, nil
	}
	if !l.Status.Settled() || depth > maxSettleDepth {
		return false, false, nil
	}
	kids, err := tx.Children(l.ID)
	if err != nil {
		return false, false, err
	}
	for i := range kids {
		if ok, _, err := settle(tx, &kids[i], now, depth+1); err != nil || !ok {
			return false, false, err
		}
	}
	l.SubtreeDoneAt = now
	return true, true, tx.Put(*l)
}

// Unsettle clears subtree_done_at on l and the ancestors that have it, in
// tx: l's subtree is not done any more (a line comment re-opened l, a
// finished loop). When the loop finishes again, Settle marks them again.
func Unsettle(tx *store.Tx, l loop.Loop) error { return unsettle(tx, l) }

// unsettle clears subtree_done_at on l and the ancestors that have it: a
// loop was added below l (`loopr add --parent`), so its subtree is not
// done any more.
func unsettle(tx *store.Tx, l loop.Loop) error {
	for range maxSettleDepth {
		if l.SubtreeDoneAt.IsZero() {
			return nil
		}
		l.SubtreeDoneAt = time.Time{}
		if err := tx.Put(l); err != nil || l.Parent == "" {
			return err
		}
		p, err := tx.Get(l.Parent)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		l = p
	}
	return nil
}

// maxCancelledNamed is how many cancelled loops tree_complete names.
const maxCancelledNamed = 10

// treeComplete writes tree_complete on root, a root whose subtree was just
// found done, when it is a complete plan with loops below it.
func treeComplete(tx *store.Tx, root loop.Loop, now time.Time, git bool) error {
	if root.Type != loop.Plan || root.Status != loop.Complete {
		return nil // a cancelled plan was given up, not done
	}
	desc, err := Descendants(tx, root.ID)
	if err != nil || len(desc) == 0 {
		return err // a plan whose children are not spawned yet
	}
	var cancelled []string
	for _, d := range desc {
		if d.Status == loop.Cancelled {
			cancelled = append(cancelled, fmt.Sprintf("%s %q", d.ID, d.Title))
		}
	}
	msg := fmt.Sprintf("plan %s done: all %d loops of its tree are complete", root.ID, len(desc)+1)
	if n := len(cancelled); n > 0 {
		if n > maxCancelledNamed {
			cancelled = append(cancelled[:maxCancelledNamed], fmt.Sprintf("and %d more", n-maxCancelledNamed))
		}
		msg = fmt.Sprintf("plan %s done: all %d loops of its tree are complete or cancelled (%d cancelled: %s)",
			root.ID, len(desc)+1, n, strings.Join(cancelled, ", "))
	}
	if git {
		branch := root.Branch
		if branch == "" {
			branch = gitflow.BranchName(root.ID, root.Title)
		}
		msg += "; branch " + branch + " is ready to land: loopr land " + loop.ShortID(root.ID)
	}
	_, err = tx.AppendEvent(loop.Event{Time: now, Loop: root.ID, Kind: loop.EventTreeComplete, Iteration: root.Iteration, Message: msg})
	return err
}
