package store

import "github.com/loopr-dev/loopr/loop"

// ForEachHead calls fn with every loop in id order until fn returns false,
// each decoded without its long texts (task, artifact, workdir, feedback,
// reason) and its lease: every field the scheduler reads, at a fraction of
// the cost of ForEach. When full is not nil, a loop whose status full
// rejects is decoded even less: only its id, status and parent are set,
// and for a complete loop its subtree_done_at (the depends_on gate of the
// loops that name it reads that) and created_at (a root's is its tree's
// submission: the tree term's age).
// fn gets the same *loop.Loop each time, overwritten by the next record:
// copy what it keeps.
//
// It may run on another goroutine than the View that made tx (the daemon
// loads its index that way), so it guards itself: a damaged page is a
// *CorruptError here too, not a panic no one recovers.
func (tx *Tx) ForEachHead(full func(loop.Status) bool, fn func(*loop.Loop) bool) error {
	return tx.guard(func() error { return tx.forEachHead(full, fn) })
}

func (tx *Tx) forEachHead(full func(loop.Status) bool, fn func(*loop.Loop) bool) error {
	var l loop.Loop
	c := tx.bucket(bucketLoops).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		l = loop.Loop{}
		if full != nil {
			st, parent, err := peekStatusParent(k, v)
			if err != nil {
				return err
			}
			if !full(st) {
				if st == loop.Complete {
					if err := decodeRecord(k, v, &l, true, true); err != nil { // borrowed: nothing copied
						return err
					}
					l = loop.Loop{SubtreeDoneAt: l.SubtreeDoneAt, CreatedAt: l.CreatedAt}
				}
				l.ID, l.Status, l.Parent = string(k), st, parent
				if !fn(&l) {
					return nil
				}
				continue
			}
		}
		if err := decodeLoopInto(k, v, &l, true); err != nil {
			return err
		}
		if !fn(&l) {
			return nil
		}
	}
	return nil
}
