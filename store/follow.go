package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopr-dev/loopr/loop"
)

// Change is one loop record written or deleted by a committed transaction.
type Change struct {
	ID      string
	Loop    loop.Loop // the record as written; zero when Deleted
	Deleted bool
}

// Commit is what one committed write transaction did to the loop records,
// in the order it did it (an id may appear more than once).
type Commit struct {
	Changes []Change
	// Meta names the meta keys the transaction wrote or deleted. Only the
	// etcd backend fills it in (other daemons write the same store there);
	// on bbolt it is nil, and a commit that wrote no loop record is not
	// delivered at all.
	Meta []string
}

// Follower is told every committed change to the loop records: an
// in-memory index kept in step with the store (the scheduler's ready set).
type Follower func(Commit)

// writePath is the one way a write transaction runs (Update, Batch), so that
// followers see every commit exactly once and in commit order.
//
// A writer takes order inside the bbolt transaction (bbolt's writer lock is
// already held) and releases it only after its followers were told, or
// after a rollback. bbolt calls commit handlers after it released its
// writer lock, so without order the next writer could commit and tell the
// followers first. The lock order is always bbolt's writer lock, then
// order; followers run with order held and must not touch the store.
type writePath struct {
	order     sync.Mutex
	followers []Follower // guarded by order

	batchMu  sync.Mutex
	batch    *batch
	maxDelay time.Duration
	maxSize  int

	redact atomic.Pointer[func(string) string] // SetRedact (redact.go)
}

// Follow calls load in a read transaction that sees every commit delivered
// so far and none that is not, then calls f, in commit order, with every
// loop record change committed after it, until the store closes. f runs in
// the committing goroutine before Update or Batch returns, so it must be
// quick and must not call the store. A follower cannot be removed.
func (s *Store) Follow(load func(*Tx) error, f Follower) error {
	if s.etcd != nil {
		return s.etcd.follow(load, f)
	}
	w := s.w
	w.order.Lock()
	defer w.order.Unlock()
	if err := s.View(load); err != nil {
		return err
	}
	w.followers = append(w.followers, f)
	return nil
}

// update runs fn in one bbolt write transaction and tells the followers
// what it changed once it committed.
func (s *Store) update(fn func(*Tx) error) error {
	w := s.w
	var changes []Change
	held := false
	defer func() {
		if held {
			w.order.Unlock() // after the followers ran (commit), on rollback, or on a panic
		}
	}()
	return s.db.Update(func(btx *bolt.Tx) error {
		if !held {
			w.order.Lock()
			held = true
			if len(w.followers) > 0 {
				btx.OnCommit(func() {
					c := Commit{Changes: changes}
					for _, f := range w.followers {
						f(c)
					}
				})
			}
		}
		tx := &Tx{kv: boltTx{btx}, path: s.path}
		if len(w.followers) > 0 {
			tx.changes = &changes
		}
		return fn(tx)
	})
}

// errSolo sends a batched fn that failed back to its caller, to run alone.
var errSolo = errors.New("batch function returned an error and should be re-run solo")

type batchCall struct {
	fn  func(*Tx) error
	err chan error
}

type batch struct {
	w     *writePath
	s     *Store
	timer *time.Timer
	once  sync.Once
	calls []batchCall
}

// batched is group commit (bbolt's DB.Batch, rebuilt on update so that
// followers see batched commits too): concurrent callers' fns share one
// transaction, started when maxSize calls wait or maxDelay after the first.
// If one fn fails, the transaction rolls back, that fn is re-run alone for
// its caller and the others are retried together.
func (s *Store) batched(fn func(*Tx) error) error {
	w := s.w
	errc := make(chan error, 1)
	w.batchMu.Lock()
	if w.batch == nil || len(w.batch.calls) >= w.maxSize {
		w.batch = &batch{w: w, s: s}
		w.batch.timer = time.AfterFunc(w.maxDelay, w.batch.trigger)
	}
	w.batch.calls = append(w.batch.calls, batchCall{fn: fn, err: errc})
	if len(w.batch.calls) >= w.maxSize {
		go w.batch.trigger()
	}
	w.batchMu.Unlock()

	err := <-errc
	if err == errSolo {
		err = s.guard(func() error { return s.update(fn) })
	}
	return err
}

func (b *batch) trigger() { b.once.Do(b.run) }

func (b *batch) run() {
	b.w.batchMu.Lock()
	b.timer.Stop()
	if b.w.batch == b {
		b.w.batch = nil
	}
	b.w.batchMu.Unlock()
	for len(b.calls) > 0 {
		failed := -1
		err := b.s.guard(func() error {
			return b.s.update(func(tx *Tx) error {
				for i, c := range b.calls {
					if err := safeCall(c.fn, tx); err != nil {
						failed = i
						return err
					}
				}
				return nil
			})
		})
		if failed >= 0 {
			c := b.calls[failed]
			b.calls[failed] = b.calls[len(b.calls)-1]
			b.calls = b.calls[:len(b.calls)-1]
			c.err <- errSolo
			continue
		}
		for _, c := range b.calls {
			c.err <- err
		}
		return
	}
}

// safeCall runs fn, turning a panic into an error (as bbolt's Batch does).
func safeCall(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while running a batched transaction: %v", p)
		}
	}()
	return fn(tx)
}
