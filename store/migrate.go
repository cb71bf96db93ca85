package store

import (
	"bytes"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the store layout this loopr reads and writes.
const SchemaVersion = 2

// keySchemaVersion is the meta key holding the layout version as a JSON int.
// A file without it (a new file) is version 0.
const keySchemaVersion = "schema_version"

// migrations[v] upgrades a version v store to version v+1. Append a func
// and bump SchemaVersion to change the layout; never edit a released one.
var migrations = []func(*bolt.Tx) error{
	0: func(tx *bolt.Tx) error { // new store: create the buckets
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	},
	1: func(tx *bolt.Tx) error { // JSON loop records → the binary codec (loopcodec.go)
		b := tx.Bucket(bucketLoops)
		if b == nil {
			return fmt.Errorf("bucket %s missing", bucketLoops)
		}
		// Collect, then write: writing under a bbolt cursor can skip keys.
		type rec struct{ k, v []byte }
		var recs []rec
		err := b.ForEach(func(k, v []byte) error {
			if isBinary(v) {
				return nil
			}
			l, err := decodeLoop(k, v)
			if err != nil {
				return err
			}
			nv, err := encodeLoop(l)
			if err != nil {
				return err
			}
			recs = append(recs, rec{bytes.Clone(k), nv})
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := b.Put(r.k, r.v); err != nil {
				return err
			}
		}
		return nil
	},
}

func init() {
	if len(migrations) != SchemaVersion {
		panic(fmt.Sprintf("store: %d migrations for schema version %d", len(migrations), SchemaVersion))
	}
}

// schemaVersion reads the stored layout version.
func schemaVersion(tx *bolt.Tx) (int, error) {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0, nil
	}
	raw := b.Get([]byte(keySchemaVersion))
	if raw == nil {
		return 0, nil
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
		return 0, fmt.Errorf("store schema version %q: not a version number", raw)
	}
	return v, nil
}

// migrate brings the store to SchemaVersion in one transaction. It reads
// first, so a current or newer store is never written.
func migrate(db *bolt.DB, readOnly bool) error {
	var found int
	if err := db.View(func(tx *bolt.Tx) (err error) {
		found, err = schemaVersion(tx)
		return err
	}); err != nil {
		return err
	}
	switch {
	case found == SchemaVersion:
		return nil
	case found > SchemaVersion || readOnly:
		return &SchemaError{Found: found, Supported: SchemaVersion}
	}
	return db.Update(func(tx *bolt.Tx) error {
		// Re-read under the write lock: the version cannot have changed
		// (we hold the file lock), but the check is free.
		v, err := schemaVersion(tx)
		if err != nil {
			return err
		}
		for ; v < SchemaVersion; v++ {
			if err := migrations[v](tx); err != nil {
				return fmt.Errorf("migrate store from schema version %d: %w", v, err)
			}
		}
		b, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put([]byte(keySchemaVersion), []byte(fmt.Sprint(SchemaVersion)))
	})
}
