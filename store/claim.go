package store

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Claim makes this Store the one daemon's store: on etcd, a key under the
// prefix held with a lease of ttl that the client keeps alive, so a second
// daemon on the same store gets a *LockedError naming the first, and the
// key goes ttl after its holder dies. On the bbolt file Open's lock already
// does this and Claim does nothing. lost is closed if the claim is lost
// (etcd unreachable for longer than ttl); on bbolt it is never closed.
func (s *Store) Claim(holder string, ttl time.Duration) (lost <-chan struct{}, err error) {
	if s.etcd == nil {
		return make(chan struct{}), nil
	}
	return s.etcd.claim(holder, ttl)
}

func (e *etcdStore) claim(holder string, ttl time.Duration) (<-chan struct{}, error) {
	sess, err := concurrency.NewSession(e.cli, concurrency.WithTTL(max(int(ttl/time.Second), 1)), concurrency.WithContext(e.ctx))
	if err != nil {
		return nil, fmt.Errorf("store: %s: claim: %w", e.where, err)
	}
	key := e.prefix + "/daemon"
	ctx, cancel := context.WithTimeout(e.ctx, e.opTimeout)
	defer cancel()
	resp, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, holder, clientv3.WithLease(sess.Lease()))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("store: %s: claim: %w", e.where, err)
	}
	if !resp.Succeeded {
		sess.Close()
		by := "another daemon"
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			by = string(kvs[0].Value)
		}
		return nil, &LockedError{Path: e.where, Holder: by}
	}
	e.session = sess
	return sess.Done(), nil
}

// WaitUnclaimed returns once no daemon claims the store (at once if none
// does, and on the bbolt file), or when ctx ends: a standby daemon waits
// here for the claim of the one it stands by for to go.
func (s *Store) WaitUnclaimed(ctx context.Context) error {
	if s.etcd == nil {
		return nil
	}
	e := s.etcd
	key := e.prefix + "/daemon"
	for {
		gctx, cancel := context.WithTimeout(ctx, e.opTimeout)
		resp, err := e.cli.Get(gctx, key)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(time.Second) // etcd unreachable: ask again
			continue
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range e.cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					wcancel()
					return nil
				}
			}
		}
		wcancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
