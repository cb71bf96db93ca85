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

// rawExistBatch bounds the keys RawExist asks for in one request: etcd's
// default --max-txn-ops is 128.
const rawExistBatch = 100

// RawExist reports which of keys (relative to the store's prefix) exist,
// asking etcd in one count-only request per 100 keys at its current
// revision; all false on the bbolt file. For a few keys it is much
// cheaper than RawKeys over a prefix holding many.
func (s *Store) RawExist(keys []string) ([]bool, error) {
	ok := make([]bool, len(keys))
	if s.etcd == nil {
		return ok, nil
	}
	e := s.etcd
	for lo := 0; lo < len(keys); lo += rawExistBatch {
		hi := min(lo+rawExistBatch, len(keys))
		ops := make([]clientv3.Op, 0, hi-lo)
		for _, k := range keys[lo:hi] {
			ops = append(ops, clientv3.OpGet(e.prefix+"/"+strings.TrimPrefix(k, "/"), clientv3.WithCountOnly()))
		}
		ctx, cancel := e.reqCtx()
		resp, err := e.cli.Txn(ctx).Then(ops...).Commit()
		cancel()
		e.note(err)
		if err != nil {
			return nil, e.wrap(etcdRPCError{etcdErr(err)})
		}
		for i, r := range resp.Responses {
			ok[lo+i] = r.GetResponseRange().GetCount() > 0
		}
	}
	return ok, nil
}
