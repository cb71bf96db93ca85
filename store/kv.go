package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The key-value seam: every record, index entry, event and meta value the
// store reads or writes goes through these interfaces, so the same Tx code
// runs on the bbolt file (boltTx, below) and on etcd (etcd.go). Tools that
// read bbolt's pages themselves — check, repair, pagescan, the corruption
// guard — and Batch's group commit are bbolt-only.

// kvTx is one transaction of a backend.
type kvTx interface {
	// bucket returns the named bucket, or nil if it does not exist.
	bucket(name []byte) kvBucket
	// createBucket makes the named bucket exist (migration 0).
	createBucket(name []byte) error
	writable() bool
}

// kvBucket is a bucket-like key space: what bbolt's *bolt.Bucket offers
// and the store uses. Get returns nil for an absent key and a non-nil
// (possibly empty) slice for a present one; the slices it and the cursor
// return are valid until the transaction ends, and must not be changed.
type kvBucket interface {
	Get(key []byte) []byte
	Put(key, value []byte) error
	Delete(key []byte) error
	Cursor() kvCursor
	// Sequence is the bucket's counter, NextSequence increments it and
	// returns the new value, SetSequence sets it.
	Sequence() uint64
	NextSequence() (uint64, error)
	SetSequence(v uint64) error
}

// kvCursor walks a bucket in key order. Every method returns a nil key at
// either end.
type kvCursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
}

// boltTx is the bbolt backend: the real buckets of the file.
type boltTx struct{ tx *bolt.Tx }

// boltBucket adds the seam's Cursor to a *bolt.Bucket; every other method
// is bbolt's own.
type boltBucket struct{ *bolt.Bucket }

func (b boltBucket) Cursor() kvCursor { return b.Bucket.Cursor() }

func (t boltTx) bucket(name []byte) kvBucket {
	b := t.tx.Bucket(name)
	if b == nil {
		return nil
	}
	if fill, ok := fillPercent[string(name)]; ok {
		b.FillPercent = fill
	}
	return boltBucket{b}
}

func (t boltTx) createBucket(name []byte) error {
	if _, err := t.tx.CreateBucketIfNotExists(name); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

func (t boltTx) writable() bool { return t.tx.Writable() }

// boltTxOf returns the bbolt transaction under tx, or nil on another backend.
func boltTxOf(tx *Tx) *bolt.Tx {
	if b, ok := tx.kv.(boltTx); ok {
		return b.tx
	}
	return nil
}
