package store

import (
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RawKeys returns the raw keys that start with prefix (relative to the
// store's prefix, as Tx.Raw takes them), read in one keys-only request at
// etcd's current revision; none on the bbolt file. It is outside any
// transaction: for a cheap "which of these exist" (the scheduler's check
// of artifacts kept in the store).
func (s *Store) RawKeys(prefix string) ([]string, error) {
	if s.etcd == nil {
		return nil, nil
	}
	e := s.etcd
	full := e.prefix + "/" + strings.TrimPrefix(prefix, "/")
	ctx, cancel := e.reqCtx()
	defer cancel()
	resp, err := e.cli.Get(ctx, full, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	e.note(err)
	if err != nil {
		return nil, e.wrap(etcdRPCError{etcdErr(err)})
	}
	keys := make([]string, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		keys[i] = strings.TrimPrefix(string(kv.Key), e.prefix+"/")
	}
	return keys, nil
}
