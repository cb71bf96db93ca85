package store

import (
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Raw keys: keys of the etcd store outside the buckets, relative to the
// store's prefix ("workers/build-1", "leases/<loop id>"), for what
// several daemons on one store share beside the records — a worker's
// registration, a loop's lease, an artifact's bytes. A Raw read is
// compared at commit like every other read of the transaction, so an
// Update that read a raw key another writer changed runs again; a key
// put with an etcd lease goes when the lease does (its holder died).
// On the bbolt file there are none: Raw finds nothing and PutRaw and
// DeleteRaw fail.

// ErrFenced is what a write returns, wrapped, when the lease it was made
// under is no longer the writer's: another worker may run the loop now,
// so nothing was recorded.
var ErrFenced = errors.New("fenced: the loop's lease is no longer this worker's")

// errRawBbolt is PutRaw's and DeleteRaw's answer on the bbolt file.
var errRawBbolt = errors.New("raw keys are kept on the etcd store only (store.backend: etcd)")

// Raw returns the value of key (relative to the store's prefix) and the id
// of the etcd lease it is attached to (0: none); ok is false if the key is
// absent, and always on the bbolt file.
func (tx *Tx) Raw(key string) (value []byte, lease int64, ok bool) {
	t, isEtcd := tx.kv.(*etcdTx)
	if !isEtcd || key == "" {
		return nil, 0, false
	}
	full := t.e.prefix + "/" + strings.TrimPrefix(key, "/")
	if w, ok := t.writes[full]; ok {
		if w.del {
			return nil, 0, false
		}
		return w.v, w.lease, true
	}
	if v, ok := t.vals[full]; ok {
		if _, known := t.leases[full]; known || v == nil {
			return v, t.leases[full], v != nil
		}
	}
	resp := t.get(full)
	var v []byte
	var mod, lid int64
	if len(resp.Kvs) > 0 {
		v, mod, lid = nonNil(resp.Kvs[0].Value), resp.Kvs[0].ModRevision, resp.Kvs[0].Lease
	}
	if old, seen := t.reads[full]; !seen || old == mod {
		t.reads[full], t.vals[full] = mod, v
	}
	if t.leases == nil {
		t.leases = map[string]int64{}
	}
	t.leases[full] = lid
	return v, lid, v != nil
}

// PutRaw puts value at key (relative to the store's prefix), attached to
// the etcd lease with id lease if it is not 0: the key goes when the
// lease does. On the bbolt file it fails.
func (tx *Tx) PutRaw(key string, value []byte, lease int64) error {
	t, ok := tx.kv.(*etcdTx)
	if !ok {
		return fmt.Errorf("put %s: %w", key, errRawBbolt)
	}
	if key == "" {
		return errors.New("put raw key: key required")
	}
	return t.set(t.e.prefix+"/"+strings.TrimPrefix(key, "/"), wval{v: append([]byte{}, value...), lease: lease})
}

// DeleteRaw deletes key (relative to the store's prefix); deleting an
// absent key does nothing. On the bbolt file it fails.
func (tx *Tx) DeleteRaw(key string) error {
	t, ok := tx.kv.(*etcdTx)
	if !ok {
		return fmt.Errorf("delete %s: %w", key, errRawBbolt)
	}
	if key == "" {
		return errors.New("delete raw key: key required")
	}
	return t.set(t.e.prefix+"/"+strings.TrimPrefix(key, "/"), wval{del: true})
}

// EtcdClient returns the etcd client of a store on etcd, nil on the bbolt
// file: for what several daemons share beyond transactions (sessions,
// elections, locks; package cluster). Closing the store closes it.
func (s *Store) EtcdClient() *clientv3.Client {
	if s.etcd == nil {
		return nil
	}
	return s.etcd.cli
}

// EtcdPrefix returns the key prefix of a store on etcd (no trailing
// slash), "" on the bbolt file.
func (s *Store) EtcdPrefix() string {
	if s.etcd == nil {
		return ""
	}
	return s.etcd.prefix
}

// EtcdRequestTimeout returns how long one request to etcd may take
// (store.etcd.dial_timeout_secs), 0 on the bbolt file.
func (s *Store) EtcdRequestTimeout() time.Duration {
	if s.etcd == nil {
		return 0
	}
	return s.etcd.opTimeout
}
