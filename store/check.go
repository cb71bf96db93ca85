package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

// maxProblems caps the lines CheckFile returns: a file with one bad page
// deep in a big bucket can yield thousands.
const maxProblems = 200

// CheckFile checks the store file at path as `loopr store check` does,
// with the daemon stopped: bbolt's page structure (Tx.Check: every page
// reachable once, keys in order, nothing both free and used) and loopr's
// rules (every record decodes, every index entry and journal entry agrees
// with a record, every record has its index entries). It returns one line
// per problem, escaped for a terminal, or nil for a clean store. The error
// is for a file that cannot be checked at all: missing, or locked by a
// running daemon (*LockedError). Reading a damaged file never panics.
func CheckFile(path string, timeout time.Duration) ([]string, error) {
	db, err := openRaw(path, timeout)
	if errors.Is(err, ErrCorrupt) {
		return []string{"open: " + err.(*CorruptError).Detail}, nil
	}
	if err != nil {
		return nil, err
	}
	defer db.Close()
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer f.Close()
	var c checker
	err = guardPath(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			pageSize := db.Info().PageSize
			refs, unsafe, cyclic := scanPageRefs(f, pageSize, uint64(tx.Cursor().Bucket().RootPage()), uint64(tx.Size())/uint64(pageSize))
			for _, p := range refs {
				c.add("%s", p)
			}
			if unsafe {
				// bbolt's check would follow them on its own goroutine,
				// where a memory fault kills the process.
				c.add("pages: bbolt's page check skipped: the references above cannot be followed safely")
			} else {
				for err := range tx.Check() { // drain: its goroutine sends every error, recovering its own panics
					// bbolt reports a panic of its walk as "panic: …": the
					// damage it met, not a crash of loopr.
					c.add("pages: %s", strings.Replace(err.Error(), "panic: ", "unreadable: ", 1))
				}
			}
			if len(cyclic) > 0 {
				c.add("loopr's record checks skipped: a page tree loops back on itself")
				return nil
			}
			c.logical(tx)
			return nil
		})
	})
	if ce := (*CorruptError)(nil); errors.As(err, &ce) {
		c.add("read: %s", ce.Detail)
	} else if err != nil {
		return nil, err
	}
	if c.dropped > 0 {
		c.problems = append(c.problems, fmt.Sprintf("… and %d more problems", c.dropped))
	}
	return c.problems, nil
}

// openRaw opens the bbolt file read-only (a shared lock: never together
// with a daemon), turning a panic at open into a *CorruptError.
func openRaw(path string, timeout time.Duration) (*bolt.DB, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var db *bolt.DB
	err := guardPath(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: true})
		return err
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, &LockedError{Path: path, PID: readPID(pidPath(path))}
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return db, err
}

type checker struct {
	problems []string
	dropped  int
}

func (c *checker) add(format string, args ...any) {
	if len(c.problems) >= maxProblems {
		c.dropped++
		return
	}
	c.problems = append(c.problems, termsafe.Line(fmt.Sprintf(format, args...)))
}

// section runs one part of the logical check; a panic on a damaged page
// ends that part only, as one problem.
func (c *checker) section(name string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			c.add("%s: unreadable: %v", name, p)
		}
	}()
	fn()
}

// logical checks loopr's own rules, bucket by bucket.
func (c *checker) logical(tx *bolt.Tx) {
	b := map[string]*bolt.Bucket{}
	for _, name := range allBuckets {
		c.section("bucket "+string(name), func() {
			if bk := tx.Bucket(name); bk != nil {
				b[string(name)] = bk
				return
			}
			c.add("bucket %s: missing", name)
		})
	}
	if len(b) != len(allBuckets) {
		return
	}
	loops, events := b[string(bucketLoops)], b[string(bucketEvents)]
	idxStatus, idxParent, idxEvents := b[string(bucketIdxStatus)], b[string(bucketIdxParent)], b[string(bucketIdxEvents)]

	c.section("meta", func() {
		v, err := schemaVersion(&Tx{kv: boltTx{tx}})
		switch {
		case err != nil:
			c.add("meta: %v", err)
		case v != SchemaVersion:
			c.add("meta: schema version %d, this loopr uses %d", v, SchemaVersion)
		}
	})
	c.section("loops", func() { c.loopRecords(loops, idxStatus, idxParent) })
	for _, idx := range []struct {
		bucket *bolt.Bucket
		name   []byte
		field  func(loop.Loop) string
	}{
		{idxStatus, bucketIdxStatus, func(l loop.Loop) string { return string(l.Status) }},
		{idxParent, bucketIdxParent, func(l loop.Loop) string { return l.Parent }},
	} {
		c.section(string(idx.name), func() { c.loopIndex(loops, idx.bucket, idx.name, idx.field) })
	}
	c.section("events", func() { c.eventRecords(events, idxEvents) })
	c.section(string(bucketIdxEvents), func() { c.eventIndex(events, idxEvents) })
}

// loopRecords checks each loop record and that both loop indexes list it.
func (c *checker) loopRecords(loops, idxStatus, idxParent *bolt.Bucket) {
	// An index lookup that meets a damaged index page is that index's
	// problem, counted once, not the end of the walk over the records.
	unreadable := map[string]int{}
	has := func(b *bolt.Bucket, name []byte, key []byte) (found bool) {
		defer func() {
			if p := recover(); p != nil {
				unreadable[string(name)]++
				found = true
			}
		}()
		return b.Get(key) != nil
	}
	defer func() {
		for _, name := range [][]byte{bucketIdxStatus, bucketIdxParent} {
			if n := unreadable[string(name)]; n > 0 {
				c.add("index %s: %d record lookups met a damaged page", name, n)
			}
		}
	}()
	cur := loops.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		l, err := decodeLoop(k, v)
		if err != nil {
			c.add("%v", err)
			continue
		}
		if !loop.ValidID(l.ID) {
			c.add("loop %q: not a valid id", k)
			continue
		}
		if !has(idxStatus, bucketIdxStatus, indexKey(string(l.Status), l.ID)) {
			c.add("loop %s: status %s: missing from %s", l.ID, l.Status, bucketIdxStatus)
		}
		if l.Parent != "" && !has(idxParent, bucketIdxParent, indexKey(l.Parent, l.ID)) {
			c.add("loop %s: parent %s: missing from %s", l.ID, l.Parent, bucketIdxParent)
		}
	}
}

// loopIndex checks that each entry of a loop index names a record whose
// field holds what the entry says.
func (c *checker) loopIndex(loops, idx *bolt.Bucket, name []byte, field func(loop.Loop) string) {
	cur := idx.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		a, id, ok := splitIndexKey(k)
		if !ok {
			c.add("index %s: malformed key %q", name, k)
			continue
		}
		v := loops.Get(id)
		if v == nil {
			c.add("index %s: loop %s: no record", name, id)
			continue
		}
		l, err := decodeLoop(id, v)
		if err != nil {
			continue // reported with the records
		}
		if got := field(l); got != string(a) {
			c.add("index %s: loop %s listed under %q, record has %q", name, id, a, got)
		}
	}
}

// eventRecords checks each journal record and that the event index lists it.
func (c *checker) eventRecords(events, idxEvents *bolt.Bucket) {
	cur := events.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) != 8 {
			c.add("events: malformed key %q", k)
			continue
		}
		seq := binary.BigEndian.Uint64(k)
		ev, err := decodeEvent(seq, v)
		if err != nil {
			c.add("%v", err)
			continue
		}
		if ev.Seq != seq {
			c.add("event %d: record has seq %d", seq, ev.Seq)
		}
		if ev.Loop != "" && idxEvents.Get(eventIndexKey(ev.Loop, seq)) == nil {
			c.add("event %d: loop %s: missing from %s", seq, ev.Loop, bucketIdxEvents)
		}
	}
}

// eventIndex checks that each entry of the event index names a record of
// that loop.
func (c *checker) eventIndex(events, idxEvents *bolt.Bucket) {
	cur := idxEvents.Cursor()
	for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
		id, sk, ok := splitIndexKey(k)
		if !ok || len(sk) != 8 {
			c.add("index %s: malformed key %q", bucketIdxEvents, k)
			continue
		}
		seq := binary.BigEndian.Uint64(sk)
		v := events.Get(sk)
		if v == nil {
			c.add("index %s: event %d: no record", bucketIdxEvents, seq)
			continue
		}
		if ev, err := decodeEvent(seq, v); err == nil && ev.Loop != string(id) {
			c.add("index %s: event %d listed under loop %s, record has %q", bucketIdxEvents, seq, id, ev.Loop)
		}
	}
}
