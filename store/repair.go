package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopr-dev/loopr/loop"
)

// RepairReport is what Repair recovered from a damaged store and what it
// could not.
type RepairReport struct {
	Loops, Events, Meta int // records copied into the new file
	// SkippedLoops are the ids of loops the damaged file names (in its
	// records or its indexes) whose record could not be read; SkippedEvents
	// counts journal events lost the same way.
	SkippedLoops  []string
	SkippedEvents int
	// DroppedIndexEntries counts index entries that named no record; the
	// new file's indexes are rebuilt from the records.
	DroppedIndexEntries int
	Backup              string // where the damaged file now is
}

// Repair rebuilds the store at path with the daemon stopped: every record
// still readable (loops, journal events, meta) is copied into a fresh file
// whose indexes are rebuilt from the records, the damaged file is kept as
// <path>.broken-<time>, and the fresh one takes its place. Walking the
// damaged file never panics: every read is guarded, so a bad page loses
// only the records on it. A running daemon (the file lock) makes it a
// *LockedError and nothing is changed.
func Repair(path string, now time.Time) (RepairReport, error) {
	var rep RepairReport
	db, err := openRaw(path, DefaultTimeout)
	if err != nil {
		return rep, err
	}
	cyclic, err := cyclicBuckets(path, db)
	if err != nil {
		db.Close()
		return rep, err
	}
	sv, err := salvage(path, db, cyclic)
	db.Close()
	if err != nil {
		return rep, err
	}
	if sv.loopsUnreadable && len(sv.loops) == 0 {
		// Replacing the file with an empty store would help no one.
		return rep, fmt.Errorf("repair: %s: no loop record is readable (the loops bucket cannot be reached); the damaged store is unchanged: restore a backup or import an export", path)
	}

	tmp := path + ".repair"
	_ = os.Remove(tmp)
	_ = os.Remove(pidPath(tmp))
	fresh, err := Open(tmp, Options{})
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	rep.SkippedLoops, rep.SkippedEvents, rep.DroppedIndexEntries = sv.skippedLoops, sv.skippedEvents, sv.dangling
	err = fresh.Update(func(tx *Tx) error {
		for _, l := range sv.loops {
			if err := tx.Put(l); err != nil {
				rep.SkippedLoops = append(rep.SkippedLoops, l.ID) // decoded but not a valid record
				continue
			}
			rep.Loops++
		}
		events := tx.bucket(bucketEvents)
		for _, ev := range sv.events {
			if err := events.Put(seqKey(ev.seq), ev.raw); err != nil {
				return err
			}
			if ev.loop != "" {
				if err := tx.bucket(bucketIdxEvents).Put(eventIndexKey(ev.loop, ev.seq), empty); err != nil {
					return err
				}
			}
			rep.Events++
		}
		// The journal's numbering goes on where it was: followers resume
		// from a sequence number.
		if err := events.SetSequence(sv.lastSeq); err != nil {
			return err
		}
		meta := tx.bucket(bucketMeta)
		for _, kv := range sv.meta {
			if err := meta.Put(kv.k, kv.v); err != nil {
				return err
			}
			rep.Meta++
		}
		return nil
	})
	if cerr := fresh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The new file must pass what `store check` checks before it
		// replaces anything.
		var problems []string
		if problems, err = CheckFile(tmp, DefaultTimeout); err == nil && len(problems) > 0 {
			err = fmt.Errorf("the rebuilt store fails its check: %s", problems[0])
		}
	}
	if err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("repair: %w (the damaged store is unchanged)", err)
	}
	slices.Sort(rep.SkippedLoops)

	rep.Backup = fmt.Sprintf("%s.broken-%s", path, now.UTC().Format("20060102T150405Z"))
	// Keep the damaged file under its new name first (a hard link), then
	// put the rebuilt one in its place in one rename: at every moment
	// path is a whole store, the old or the new, so a crash here never
	// leaves a missing file that the next command would take for a new,
	// empty store.
	if err := os.Link(path, rep.Backup); err != nil {
		if err := copyFile(path, rep.Backup); err != nil {
			os.Remove(tmp)
			return rep, fmt.Errorf("repair: keep the damaged store: %w", err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("repair: put the rebuilt store in place (the damaged one is unchanged, and copied to %s): %w", rep.Backup, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // the renames outlive a crash
		d.Close()
	}
	return rep, nil
}

type salvaged struct {
	loops  []loop.Loop
	events []rawEvent
	meta   []rawKV
	// lastSeq is the journal's sequence number to carry on from.
	lastSeq uint64
	// loopsUnreadable: the loops bucket itself could not be reached.
	loopsUnreadable         bool
	skippedLoops            []string
	skippedEvents, dangling int
}

type rawEvent struct {
	seq  uint64
	loop string
	raw  []byte
}

type rawKV struct{ k, v []byte }

// salvage reads every record it can from the damaged db. Each walk and
// each record is read under its own guard: a page bbolt panics on ends
// that walk (the indexes then name the records the walk missed) or loses
// that one record.
//
// A bucket whose page tree loops back on itself (cyclic) is not read at
// all: bbolt's descent into it would never end. Its loops are known only
// through the indexes, and counted as skipped.
func salvage(path string, db *bolt.DB, cyclic map[string]bool) (salvaged, error) {
	var sv salvaged
	err := guardPath(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			r := &salvager{path: path, tx: tx, cyclic: cyclic, sv: &sv}
			// A store of a newer loopr is not this loopr's to rewrite.
			var version int
			var verr error
			if r.try(func() { version, verr = schemaVersion(&Tx{kv: boltTx{tx}}) }) && verr == nil && version > SchemaVersion {
				return &SchemaError{Found: version, Supported: SchemaVersion}
			}
			r.loops()
			r.events()
			// Meta: everything but the schema version, which the new file has.
			r.walk(r.bucket(bucketMeta), func(k, v []byte) {
				if string(k) != keySchemaVersion && v != nil {
					sv.meta = append(sv.meta, rawKV{k, v})
				}
			})
			return nil
		})
	})
	return sv, err
}

// salvager reads what it can of one damaged file's transaction.
type salvager struct {
	path   string
	tx     *bolt.Tx
	cyclic map[string]bool
	sv     *salvaged
}

// try runs fn, turning a fault or panic on a damaged page into false.
func (r *salvager) try(fn func()) (ok bool) {
	return guardPath(r.path, func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("%v", p) // any panic here is the file's
			}
		}()
		fn()
		return nil
	}) == nil
}

// bucket opens a top-level bucket; nil when it is cyclic or unreadable.
func (r *salvager) bucket(name []byte) *bolt.Bucket {
	if r.cyclic[string(name)] {
		return nil
	}
	var b *bolt.Bucket
	r.try(func() { b = r.tx.Bucket(name) })
	return b
}

// walk calls fn with each key and value of b until the end or a damaged
// page; it reports whether it saw the whole bucket.
func (r *salvager) walk(b *bolt.Bucket, fn func(k, v []byte)) bool {
	if b == nil {
		return false
	}
	return r.try(func() {
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			fn(bytes.Clone(k), bytes.Clone(v))
		}
	})
}

// loops salvages every loop the file names, in its records or its indexes.
func (r *salvager) loops() {
	sv := r.sv
	ids := map[string]bool{}
	name := func(id []byte) {
		if loop.ValidID(string(id)) {
			ids[string(id)] = true
		}
	}
	loopsB := r.bucket(bucketLoops)
	sv.loopsUnreadable = loopsB == nil
	recs := map[string][]byte{}
	loopsWhole := r.walk(loopsB, func(k, v []byte) { name(k); recs[string(k)] = v })
	for _, idx := range [][]byte{bucketIdxStatus, bucketIdxParent, bucketIdxEvents} {
		r.walk(r.bucket(idx), func(k, _ []byte) {
			if a, b, ok := splitIndexKey(k); ok {
				if !bytes.Equal(idx, bucketIdxStatus) {
					name(a) // a parent, or the loop an event is about
				}
				if !bytes.Equal(idx, bucketIdxEvents) {
					name(b)
				}
			}
		})
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		v, seen := recs[id]
		if !seen && loopsB != nil {
			if !r.try(func() { v = bytes.Clone(loopsB.Get([]byte(id))) }) {
				sv.skippedLoops = append(sv.skippedLoops, id) // its page is damaged
				continue
			}
		}
		if v == nil {
			if loopsWhole {
				sv.dangling++ // an index entry for a loop that is not there
			} else {
				sv.skippedLoops = append(sv.skippedLoops, id)
			}
			continue
		}
		l, err := decodeLoop([]byte(id), v)
		if err != nil {
			sv.skippedLoops = append(sv.skippedLoops, id)
			continue
		}
		sv.loops = append(sv.loops, l)
	}
}

// events salvages the journal: its records, then whatever its index names
// that the walk missed.
func (r *salvager) events() {
	sv := r.sv
	eventsB := r.bucket(bucketEvents)
	evs := map[uint64][]byte{}
	bad := map[uint64]bool{}
	eventsWhole := r.walk(eventsB, func(k, v []byte) {
		if len(k) == 8 {
			evs[binary.BigEndian.Uint64(k)] = v
		}
	})
	r.walk(r.bucket(bucketIdxEvents), func(k, _ []byte) {
		_, sk, ok := splitIndexKey(k)
		if !ok || len(sk) != 8 {
			return
		}
		seq := binary.BigEndian.Uint64(sk)
		if _, have := evs[seq]; have || eventsB == nil {
			if eventsB == nil {
				bad[seq] = true
			}
			return
		}
		var v []byte
		if !r.try(func() { v = bytes.Clone(eventsB.Get(sk)) }) || (v == nil && !eventsWhole) {
			bad[seq] = true
			return
		}
		if v != nil {
			evs[seq] = v
		}
	})
	if eventsB != nil {
		r.try(func() { sv.lastSeq = eventsB.Sequence() })
	}
	for _, seq := range slices.Sorted(maps.Keys(evs)) {
		ev, err := decodeEvent(seq, evs[seq])
		if err != nil || ev.Seq != seq || (ev.Loop != "" && !loop.ValidID(ev.Loop)) {
			sv.skippedEvents++
			continue
		}
		sv.events = append(sv.events, rawEvent{seq: seq, loop: ev.Loop, raw: evs[seq]})
		sv.lastSeq = max(sv.lastSeq, seq)
	}
	sv.skippedEvents += len(bad)
}

// copyFile copies src to a new file dst and syncs it: the backup where a
// file system has no hard links.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cyclicBuckets walks the file's page trees with plain reads (pagescan.go)
// and returns the top-level buckets bbolt must not descend into. A root
// bucket that loops back leaves nothing readable: an error.
func cyclicBuckets(path string, db *bolt.DB) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	defer f.Close()
	var cyclic map[string]bool
	err = guardPath(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			ps := db.Info().PageSize
			_, _, cyclic = scanPageRefs(f, ps, uint64(tx.Cursor().Bucket().RootPage()), uint64(tx.Size())/uint64(ps))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	if cyclic[""] {
		return nil, fmt.Errorf("repair: %s: the root page tree loops back on itself, no bucket can be read; the damaged store is unchanged: restore a backup or import an export", path)
	}
	return cyclic, nil
}
