package store

import (
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
)

// SchemaVersion is the store layout this loopr reads and writes.
const SchemaVersion = 2

// keySchemaVersion is the meta key holding the layout version as a JSON int.
// A store without it (a new one) is version 0.
const keySchemaVersion = "schema_version"

// migrations[v] upgrades a version v store to version v+1, through the
// key-value seam, so the same migrations run on every backend. Append a
// func and bump SchemaVersion to change the layout; never edit a released
// one.
var migrations = []func(*Tx) error{
	0: func(tx *Tx) error { // new store: create the buckets (etcd has none to create)
		for _, name := range allBuckets {
			if err := tx.kv.createBucket(name); err != nil {
				return err
			}
		}
		return nil
	},
	1: func(tx *Tx) error { // JSON loop records → the binary codec (loopcodec.go)
		b := tx.kv.bucket(bucketLoops)
		if b == nil {
			return fmt.Errorf("bucket %s missing", bucketLoops)
		}
		// Collect, then write: writing under a bbolt cursor can skip keys.
		type rec struct{ k, v []byte }
		var recs []rec
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if isBinary(v) {
				continue
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
func schemaVersion(tx *Tx) (int, error) {
	b := tx.kv.bucket(bucketMeta)
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
// first, so a current or newer store is never written. On etcd, daemons
// that start together may race to migrate: the transaction compares the
// version it read, so one migrates and the others see the result.
func (s *Store) migrate(readOnly bool) error {
	var found int
	if err := s.View(func(tx *Tx) (err error) {
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
	return s.Update(func(tx *Tx) error {
		// Re-read inside the write transaction: another daemon on the same
		// etcd store may have migrated meanwhile (the bbolt file is locked).
		v, err := schemaVersion(tx)
		if err != nil {
			return err
		}
		if v > SchemaVersion {
			return &SchemaError{Found: v, Supported: SchemaVersion}
		}
		for ; v < SchemaVersion; v++ {
			if err := migrations[v](tx); err != nil {
				return fmt.Errorf("migrate store from schema version %d: %w", v, err)
			}
		}
		return tx.bucket(bucketMeta).Put([]byte(keySchemaVersion), []byte(fmt.Sprint(SchemaVersion)))
	})
}
