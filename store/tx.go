package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/loopr-dev/loopr/loop"
)

// Tx is a store transaction, valid only inside the View, Update or Batch
// call that made it. Methods that write fail in a read-only transaction.
// Every loop and event a Tx returns is a decoded copy, safe to keep.
type Tx struct {
	kv      kvTx                // the backend's transaction (kv.go)
	path    string              // the store, for a *CorruptError
	changes *[]Change           // loop records written, for the store's followers; nil: none follow
	redact  func(string) string // applied to the text of what it writes (Store.SetRedact); nil: none
}

// empty is the value of every index entry: the key says it all.
var empty = []byte{}

func (tx *Tx) bucket(name []byte) kvBucket {
	b := tx.kv.bucket(name)
	if b == nil {
		// Open migrates before returning, so every bucket exists.
		// A bucket lost to a damaged root page is the file's fault.
		panic(corruptPanic(fmt.Sprintf("bucket %s missing", name)))
	}
	return b
}

// fillPercent packs the buckets whose keys mostly grow at the end (ULID
// loop ids, event sequence numbers): bbolt splits a full page at
// FillPercent, and with keys that only grow the left page never fills
// again, so the default 0.5 would leave the file half empty. The indexes
// take keys in the middle (a loop's next event, a status change) and keep
// the default, which leaves room for them.
var fillPercent = map[string]float64{
	string(bucketLoops): 0.9, string(bucketEvents): 0.95,
}

// Get returns the loop with id, or an error wrapping ErrNotFound.
func (tx *Tx) Get(id string) (loop.Loop, error) {
	v := tx.bucket(bucketLoops).Get([]byte(id))
	if v == nil {
		return loop.Loop{}, fmt.Errorf("loop %s: %w", id, ErrNotFound)
	}
	return decodeLoop([]byte(id), v)
}

// Exists reports whether a loop with id is stored.
func (tx *Tx) Exists(id string) bool {
	return id != "" && tx.bucket(bucketLoops).Get([]byte(id)) != nil
}

// Put inserts l or replaces the stored loop with its id, after checking
// l.Validate, and moves its status and parent index entries with it. It
// writes no event: the caller appends the one that explains the change.
func (tx *Tx) Put(l loop.Loop) error {
	l = tx.redactLoop(l)
	if err := l.Validate(); err != nil {
		return err
	}
	loops := tx.bucket(bucketLoops)
	key := []byte(l.ID)
	if old := loops.Get(key); old != nil {
		prevStatus, prevParent, err := peekStatusParent(key, old)
		if err != nil {
			return err
		}
		if prevStatus != l.Status {
			if err := tx.bucket(bucketIdxStatus).Delete(indexKey(string(prevStatus), l.ID)); err != nil {
				return err
			}
		}
		if prevParent != l.Parent && prevParent != "" {
			if err := tx.bucket(bucketIdxParent).Delete(indexKey(prevParent, l.ID)); err != nil {
				return err
			}
		}
	}
	v, err := encodeLoop(l)
	if err != nil {
		return err
	}
	if err := loops.Put(key, v); err != nil {
		return fmt.Errorf("loop %s: %w", l.ID, err)
	}
	if tx.changes != nil {
		*tx.changes = append(*tx.changes, Change{ID: l.ID, Loop: utc(l)})
	}
	if err := tx.bucket(bucketIdxStatus).Put(indexKey(string(l.Status), l.ID), empty); err != nil {
		return err
	}
	if l.Parent != "" {
		if err := tx.bucket(bucketIdxParent).Put(indexKey(l.Parent, l.ID), empty); err != nil {
			return err
		}
	}
	return nil
}

// Create stores a new loop and appends its loop.EventCreated event. It
// returns an error wrapping ErrExists if the id is taken. The parent need not
// exist: the caller decides what a tree must look like.
func (tx *Tx) Create(l loop.Loop) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if tx.Exists(l.ID) {
		return fmt.Errorf("loop %s: %w", l.ID, ErrExists)
	}
	if err := tx.Put(l); err != nil {
		return err
	}
	_, err := tx.AppendEvent(loop.Event{
		Time: l.CreatedAt, Loop: l.ID, Kind: loop.EventCreated,
		To: l.Status, Iteration: l.Iteration,
	})
	return err
}

// Delete removes the loop with id, its index entries and its events, or
// returns an error wrapping ErrNotFound. Its children are left alone and
// still name it as their parent.
func (tx *Tx) Delete(id string) error {
	loops := tx.bucket(bucketLoops)
	key := []byte(id)
	v := loops.Get(key)
	if v == nil {
		return fmt.Errorf("loop %s: %w", id, ErrNotFound)
	}
	var statusKeys, parentKeys [][]byte
	if prev, err := decodeLoop(key, v); err == nil {
		statusKeys = append(statusKeys, indexKey(string(prev.Status), id))
		if prev.Parent != "" {
			parentKeys = append(parentKeys, indexKey(prev.Parent, id))
		}
	} else {
		// An undecodable record can still be deleted: find its index
		// entries the slow way rather than leave them dangling.
		for _, st := range loop.Statuses {
			statusKeys = append(statusKeys, indexKey(string(st), id))
		}
		suffix := indexPrefix("")
		suffix = append(suffix, id...)
		c := tx.bucket(bucketIdxParent).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if bytes.HasSuffix(k, suffix) && bytes.IndexByte(k, sep) == len(k)-len(suffix) {
				parentKeys = append(parentKeys, bytes.Clone(k))
			}
		}
	}
	if err := deleteKeys(tx.bucket(bucketIdxStatus), statusKeys); err != nil {
		return err
	}
	if err := deleteKeys(tx.bucket(bucketIdxParent), parentKeys); err != nil {
		return err
	}

	// Collect, then delete: deleting under a bbolt cursor can skip keys.
	var evKeys, seqKeys [][]byte
	prefix := indexPrefix(id)
	c := tx.bucket(bucketIdxEvents).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		evKeys = append(evKeys, bytes.Clone(k))
		seqKeys = append(seqKeys, bytes.Clone(k[len(prefix):]))
	}
	if err := deleteKeys(tx.bucket(bucketEvents), seqKeys); err != nil {
		return err
	}
	if err := deleteKeys(tx.bucket(bucketIdxEvents), evKeys); err != nil {
		return err
	}
	if err := loops.Delete(key); err != nil {
		return err
	}
	if tx.changes != nil {
		*tx.changes = append(*tx.changes, Change{ID: id, Deleted: true})
	}
	return nil
}

func deleteKeys(b kvBucket, keys [][]byte) error {
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// scan calls fn with each key and value in b whose key starts with prefix, in
// key order, until fn returns false or an error. fn gets a copy of the key;
// the value is valid only until fn writes. In a writable transaction fn may
// change the bucket: scan then re-seeks past the last key after every call
// instead of trusting a cursor over modified pages.
func (tx *Tx) scan(b kvBucket, prefix []byte, fn func(k, v []byte) (bool, error)) error {
	c := b.Cursor()
	writable := tx.kv.writable()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); {
		k = bytes.Clone(k)
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
		if writable {
			var next []byte
			if next, v = c.Seek(k); next != nil && bytes.Equal(next, k) {
				next, v = c.Next()
			}
			k = next
		} else {
			k, v = c.Next()
		}
	}
	return nil
}

// byIndex calls fn with each loop listed in index b under a, in id order.
func (tx *Tx) byIndex(b []byte, a string, fn func(loop.Loop) bool) error {
	loops := tx.bucket(bucketLoops)
	prefix := indexPrefix(a)
	return tx.scan(tx.bucket(b), prefix, func(k, _ []byte) (bool, error) {
		id := k[len(prefix):]
		v := loops.Get(id)
		if v == nil {
			return false, damaged(fmt.Errorf("index %s: loop %s: no record", b, id))
		}
		l, err := decodeLoop(id, v)
		if err != nil {
			return false, err
		}
		return fn(l), nil
	})
}

// ByStatus calls fn with each loop whose status is st, in id order, until fn
// returns false. In an Update, fn may write through the same Tx; a loop it
// moves to st after the current position is visited too.
func (tx *Tx) ByStatus(st loop.Status, fn func(loop.Loop) bool) error {
	if !st.Valid() {
		return fmt.Errorf("status %q: unknown status", st)
	}
	return tx.byIndex(bucketIdxStatus, string(st), fn)
}

// RootsByStatus is ByStatus for the loops without a parent only: the
// others are skipped without decoding (a store of many finished tasks and
// few plans reads only the plans).
func (tx *Tx) RootsByStatus(st loop.Status, fn func(loop.Loop) bool) error {
	if !st.Valid() {
		return fmt.Errorf("status %q: unknown status", st)
	}
	loops := tx.bucket(bucketLoops)
	prefix := indexPrefix(string(st))
	return tx.scan(tx.bucket(bucketIdxStatus), prefix, func(k, _ []byte) (bool, error) {
		id := k[len(prefix):]
		v := loops.Get(id)
		if v == nil {
			return false, damaged(fmt.Errorf("index %s: loop %s: no record", bucketIdxStatus, id))
		}
		if _, parent, err := peekStatusParent(id, v); err != nil || parent != "" {
			return true, err
		}
		l, err := decodeLoop(id, v)
		if err != nil {
			return false, err
		}
		return fn(l), nil
	})
}

// Children returns the loops whose parent is parent, in id order.
func (tx *Tx) Children(parent string) ([]loop.Loop, error) {
	if parent == "" {
		return nil, errors.New("children: parent id required")
	}
	var out []loop.Loop
	err := tx.byIndex(bucketIdxParent, parent, func(l loop.Loop) bool {
		out = append(out, l)
		return true
	})
	return out, err
}

// ForEach calls fn with every loop in id order until fn returns false. Like
// ByStatus, fn may write through the same Tx in an Update.
func (tx *Tx) ForEach(fn func(loop.Loop) bool) error {
	return tx.scan(tx.bucket(bucketLoops), nil, func(k, v []byte) (bool, error) {
		l, err := decodeLoop(k, v)
		if err != nil {
			return false, err
		}
		return fn(l), nil
	})
}

// Count returns how many loops have status st, from the status index
// (no records are decoded).
func (tx *Tx) Count(st loop.Status) (int, error) {
	if !st.Valid() {
		return 0, fmt.Errorf("status %q: unknown status", st)
	}
	n := 0
	prefix := indexPrefix(string(st))
	c := tx.bucket(bucketIdxStatus).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n, nil
}

// Counts returns the number of loops per status, from the status index.
// Statuses no loop has are absent.
func (tx *Tx) Counts() (map[loop.Status]int, error) {
	counts := make(map[loop.Status]int)
	c := tx.bucket(bucketIdxStatus).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		st, _, ok := splitIndexKey(k)
		if !ok {
			return nil, damaged(fmt.Errorf("index %s: malformed key %q", bucketIdxStatus, k))
		}
		counts[loop.Status(st)]++
	}
	return counts, nil
}

// AppendEvent assigns ev the next global sequence number, stores it, and
// returns it. Events are never changed; Delete removes a loop's events with
// it. ev.Loop may be empty for events about the daemon.
func (tx *Tx) AppendEvent(ev loop.Event) (loop.Event, error) {
	if ev.Kind == "" {
		return ev, errors.New("event: kind required")
	}
	if ev.Loop != "" && !loop.ValidID(ev.Loop) {
		return ev, fmt.Errorf("event: loop %q: not a valid id", ev.Loop)
	}
	if tx.redact != nil {
		ev.Message = tx.redact(ev.Message)
	}
	events := tx.bucket(bucketEvents)
	seq, err := events.NextSequence()
	if err != nil {
		return ev, fmt.Errorf("event: %w", err)
	}
	ev.Seq = seq
	v, err := encodeEvent(ev)
	if err != nil {
		return ev, err
	}
	if err := events.Put(seqKey(seq), v); err != nil {
		return ev, fmt.Errorf("event %d: %w", seq, err)
	}
	if ev.Loop != "" {
		if err := tx.bucket(bucketIdxEvents).Put(eventIndexKey(ev.Loop, seq), empty); err != nil {
			return ev, fmt.Errorf("event %d: %w", seq, err)
		}
	}
	return ev, nil
}

// Events returns the events of the loop with id loopID in sequence order.
func (tx *Tx) Events(loopID string) ([]loop.Event, error) {
	events := tx.bucket(bucketEvents)
	prefix := indexPrefix(loopID)
	var out []loop.Event
	c := tx.bucket(bucketIdxEvents).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		sk := k[len(prefix):]
		if len(sk) != 8 {
			return nil, damaged(fmt.Errorf("index %s: malformed key %q", bucketIdxEvents, k))
		}
		seq := binary.BigEndian.Uint64(sk)
		v := events.Get(sk)
		if v == nil {
			return nil, damaged(fmt.Errorf("index %s: event %d of loop %s: no record", bucketIdxEvents, seq, loopID))
		}
		ev, err := decodeEvent(seq, v)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// EventsSince returns up to limit events of the global journal with a
// sequence number greater than seq, in order; limit <= 0 means all.
func (tx *Tx) EventsSince(seq uint64, limit int) ([]loop.Event, error) {
	if seq == math.MaxUint64 {
		return nil, nil
	}
	var out []loop.Event
	c := tx.bucket(bucketEvents).Cursor()
	for k, v := c.Seek(seqKey(seq + 1)); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
		ev, err := decodeEvent(binary.BigEndian.Uint64(k), v)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// LastSeq returns the sequence number of the latest event ever appended
// (0 if none), so a reader can follow the journal from now on.
func (tx *Tx) LastSeq() uint64 { return tx.bucket(bucketEvents).Sequence() }

// Meta decodes the meta value stored under key into v, and reports whether
// there was one.
func (tx *Tx) Meta(key string, v any) (bool, error) {
	if key == "" {
		return false, errors.New("meta: key required")
	}
	raw := tx.bucket(bucketMeta).Get([]byte(key))
	if raw == nil {
		return false, nil
	}
	return true, decodeMeta(key, raw, v)
}

// SetMeta stores v under key in the meta bucket. The store's own keys
// (schema_version) are refused.
func (tx *Tx) SetMeta(key string, v any) error {
	switch key {
	case "":
		return errors.New("meta: key required")
	case keySchemaVersion:
		return fmt.Errorf("meta %s: reserved for the store", key)
	}
	raw, err := encodeMeta(key, v)
	if err != nil {
		return err
	}
	if err := tx.bucket(bucketMeta).Put([]byte(key), raw); err != nil {
		return fmt.Errorf("meta %s: %w", key, err)
	}
	return nil
}

// checkIndexes verifies that every index entry points at a record that
// agrees with it, and every record and event has its index entries.
func (tx *Tx) checkIndexes() error {
	idxStatus := tx.bucket(bucketIdxStatus)
	idxParent := tx.bucket(bucketIdxParent)
	idxEvents := tx.bucket(bucketIdxEvents)
	loops := tx.bucket(bucketLoops)
	events := tx.bucket(bucketEvents)

	c := loops.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		l, err := decodeLoop(k, v)
		if err != nil {
			return err
		}
		if l.ID != string(k) {
			return fmt.Errorf("loop %s: record has id %q", k, l.ID)
		}
		if idxStatus.Get(indexKey(string(l.Status), l.ID)) == nil {
			return fmt.Errorf("loop %s: status %s: missing from %s", l.ID, l.Status, bucketIdxStatus)
		}
		if l.Parent != "" && idxParent.Get(indexKey(l.Parent, l.ID)) == nil {
			return fmt.Errorf("loop %s: parent %s: missing from %s", l.ID, l.Parent, bucketIdxParent)
		}
	}
	for _, idx := range []struct {
		name  []byte
		field func(loop.Loop) string
	}{
		{bucketIdxStatus, func(l loop.Loop) string { return string(l.Status) }},
		{bucketIdxParent, func(l loop.Loop) string { return l.Parent }},
	} {
		c := tx.bucket(idx.name).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			a, id, ok := splitIndexKey(k)
			if !ok {
				return fmt.Errorf("index %s: malformed key %q", idx.name, k)
			}
			v := loops.Get(id)
			if v == nil {
				return fmt.Errorf("index %s: loop %s: no record", idx.name, id)
			}
			l, err := decodeLoop(id, v)
			if err != nil {
				return err
			}
			if got := idx.field(l); got != string(a) {
				return fmt.Errorf("index %s: loop %s listed under %q, record has %q", idx.name, id, a, got)
			}
		}
	}
	c = events.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("events: malformed key %q", k)
		}
		seq := binary.BigEndian.Uint64(k)
		ev, err := decodeEvent(seq, v)
		if err != nil {
			return err
		}
		if ev.Seq != seq {
			return fmt.Errorf("event %d: record has seq %d", seq, ev.Seq)
		}
		if ev.Loop != "" && idxEvents.Get(eventIndexKey(ev.Loop, seq)) == nil {
			return fmt.Errorf("event %d: loop %s: missing from %s", seq, ev.Loop, bucketIdxEvents)
		}
	}
	c = idxEvents.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		id, sk, ok := splitIndexKey(k)
		if !ok || len(sk) != 8 {
			return fmt.Errorf("index %s: malformed key %q", bucketIdxEvents, k)
		}
		seq := binary.BigEndian.Uint64(sk)
		v := events.Get(sk)
		if v == nil {
			return fmt.Errorf("index %s: event %d: no record", bucketIdxEvents, seq)
		}
		ev, err := decodeEvent(seq, v)
		if err != nil {
			return err
		}
		if ev.Loop != string(id) {
			return fmt.Errorf("index %s: event %d listed under loop %s, record has %q", bucketIdxEvents, seq, id, ev.Loop)
		}
	}
	return nil
}
