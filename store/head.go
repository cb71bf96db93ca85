package store

import "github.com/loopr-dev/loopr/loop"

// ForEachHead calls fn with every loop in id order until fn returns false,
// each decoded without its long texts (task, artifact, workdir, feedback,
// reason) and its lease: every field the scheduler reads, at a fraction of
// the cost of ForEach. fn gets the same *loop.Loop each time, overwritten
// by the next record: copy what it keeps.
func (tx *Tx) ForEachHead(fn func(*loop.Loop) bool) error {
	var l loop.Loop
	c := tx.bucket(bucketLoops).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		l = loop.Loop{}
		if err := decodeLoopInto(k, v, &l, true); err != nil {
			return err
		}
		if !fn(&l) {
			return nil
		}
	}
	return nil
}
