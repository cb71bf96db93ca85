package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loopr-dev/loopr/loop"
)

// etcdFollow feeds the store's followers on etcd from one watch of the
// loop records and the meta keys, whoever committed them: this daemon or
// another one on the same prefix. One etcd revision is one Commit; its Meta
// names the meta keys it wrote (rate limits, fairness, budgets: what a
// scheduler keeps in memory). The watch resumes from the
// last revision delivered after a disconnect; if etcd compacted that
// history away, the loop records are read again and the followers are sent
// one Commit that brings them to the new revision (every record, and a
// deletion for each loop that is gone).
type etcdFollow struct {
	e   *etcdStore
	mu  sync.Mutex // the write path's order: delivery and Follow
	fs  []etcdFollower
	ids map[string]struct{} // the loops the followers know of

	appliedMu sync.Mutex
	applied   int64         // the last revision delivered
	advanced  chan struct{} // closed (and replaced) when applied grows
	done      chan struct{}
}

type etcdFollower struct {
	f    Follower
	from int64 // deliver revisions after this one (its load's snapshot)
}

func (e *etcdStore) follow(load func(*Tx) error, f Follower) error {
	if e.fw.Load() == nil {
		fw := &etcdFollow{e: e, ids: map[string]struct{}{}, done: make(chan struct{})}
		fw.advanced = make(chan struct{})
		fw.mu.Lock()
		defer fw.mu.Unlock()
		rev, err := fw.loadIDs()
		if err != nil {
			return err
		}
		fw.applied = rev
		e.fw.Store(fw)
		go fw.run()
	} else {
		e.fw.Load().mu.Lock()
		defer e.fw.Load().mu.Unlock()
	}
	fw := e.fw.Load()
	t := e.newTx(false)
	t.rev = fw.currentRev()
	if t.rev < 0 {
		return e.wrap(etcdRPCError{errors.New("cannot read the current revision")})
	}
	if err := e.wrap(etcdGuard(func() error { return load(&Tx{kv: t, path: "etcd:" + e.prefix}) })); err != nil {
		return err
	}
	fw.fs = append(fw.fs, etcdFollower{f: f, from: t.rev})
	return nil
}

// currentRev returns etcd's revision now, or -1.
func (fw *etcdFollow) currentRev() int64 {
	t := fw.e.newTx(false)
	if err := etcdGuard(func() error { t.get(fw.e.prefix+"/meta/"+keySchemaVersion, clientv3.WithCountOnly()); return nil }); err != nil {
		return -1
	}
	return t.rev
}

// loadIDs reads the ids of every loop record at the current revision.
func (fw *etcdFollow) loadIDs() (int64, error) {
	t := fw.e.newTx(false)
	ids := map[string]struct{}{}
	err := etcdGuard(func() error {
		c := t.bucket(bucketLoops).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			ids[string(k)] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return 0, fw.e.wrap(err)
	}
	if t.rev == 0 {
		t.rev = fw.currentRev()
	}
	fw.ids = ids
	return t.rev, nil
}

// waitApplied returns once the revision rev was delivered, so that
// Update returns after its followers saw its commit, as on bbolt. It waits
// at most the store's request timeout (the watch cannot resume while etcd is away: the
// commit stands, and the followers get it when the watch is back), and
// not at all once the store closed.
func (fw *etcdFollow) waitApplied(rev int64) {
	timeout := time.NewTimer(fw.e.opTimeout)
	defer timeout.Stop()
	for {
		fw.appliedMu.Lock()
		applied, advanced := fw.applied, fw.advanced
		fw.appliedMu.Unlock()
		if applied >= rev {
			return
		}
		select {
		case <-advanced:
		case <-timeout.C:
			fw.e.log.Warn("store: etcd follower: a commit was not delivered in time; it will be when the watch resumes", "revision", rev)
			return
		case <-fw.e.ctx.Done():
			return
		}
	}
}

func (fw *etcdFollow) setApplied(rev int64) {
	fw.appliedMu.Lock()
	defer fw.appliedMu.Unlock()
	if rev > fw.applied {
		fw.applied = rev
		close(fw.advanced)
		fw.advanced = make(chan struct{})
	}
}

func (fw *etcdFollow) lastApplied() int64 {
	fw.appliedMu.Lock()
	defer fw.appliedMu.Unlock()
	return fw.applied
}

func (fw *etcdFollow) run() {
	defer close(fw.done)
	pre := fw.e.prefix + "/" + string(bucketLoops) + "/"
	meta := fw.e.prefix + "/" + string(bucketMeta) + "/"
	for fw.e.ctx.Err() == nil {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(fw.e.ctx))
		// One watch of the keys from the loop records to the end of the meta
		// keys ("loops/" < "meta/"; the few keys between are skipped), so
		// that one revision is one Commit whatever it wrote.
		wch := fw.e.cli.Watch(ctx, pre, clientv3.WithRange(clientv3.GetPrefixRangeEnd(meta)), clientv3.WithRev(fw.lastApplied()+1))
		compacted := false
		for resp := range wch {
			if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
				compacted = true
				break
			}
			if resp.Err() != nil {
				break
			}
			fw.deliverEvents(pre, meta, resp.Events)
		}
		cancel()
		if fw.e.ctx.Err() != nil {
			return
		}
		if compacted {
			if err := fw.reload(); err != nil {
				fw.e.log.Warn("store: etcd follower: reload after compaction", "err", err)
			}
			continue
		}
		select { // the watch ended (etcd unreachable): resume from the last revision
		case <-time.After(200 * time.Millisecond):
		case <-fw.e.ctx.Done():
			return
		}
	}
}

// deliverEvents sends events, grouped by revision, to the followers: the
// loop records under pre as Changes, the meta keys under meta as Meta.
func (fw *etcdFollow) deliverEvents(pre, meta string, evs []*clientv3.Event) {
	for i := 0; i < len(evs); {
		rev := evs[i].Kv.ModRevision
		var c Commit
		for ; i < len(evs) && evs[i].Kv.ModRevision == rev; i++ {
			ev := evs[i]
			if key := string(ev.Kv.Key); strings.HasPrefix(key, meta) {
				c.Meta = append(c.Meta, key[len(meta):])
				continue
			} else if !strings.HasPrefix(key, pre) {
				continue
			}
			id := string(ev.Kv.Key[len(pre):])
			if ev.Type == mvccpb.DELETE {
				c.Changes = append(c.Changes, Change{ID: id, Deleted: true})
				continue
			}
			l, err := decodeLoop([]byte(id), ev.Kv.Value)
			if err != nil {
				fw.e.log.Warn("store: etcd follower: undecodable loop record", "loop", id, "err", err)
				continue
			}
			c.Changes = append(c.Changes, Change{ID: id, Loop: utc(l)})
		}
		fw.deliver(rev, c)
	}
}

func (fw *etcdFollow) deliver(rev int64, c Commit) {
	fw.mu.Lock()
	for _, ch := range c.Changes {
		if ch.Deleted {
			delete(fw.ids, ch.ID)
		} else {
			fw.ids[ch.ID] = struct{}{}
		}
	}
	for _, f := range fw.fs {
		if rev > f.from && (len(c.Changes) > 0 || len(c.Meta) > 0) {
			f.f(c)
		}
	}
	fw.mu.Unlock()
	fw.setApplied(rev)
}

// reload brings the followers to the current revision after the history
// they needed was compacted: every loop record as it is now, a deletion
// for each loop they know of that is gone, and every meta key's name.
func (fw *etcdFollow) reload() error {
	t := fw.e.newTx(false)
	var c Commit
	seen := map[string]struct{}{}
	err := etcdGuard(func() error {
		// Any meta key may have changed in the history that is gone.
		mc := t.bucket(bucketMeta).Cursor()
		for k, _ := mc.First(); k != nil; k, _ = mc.Next() {
			c.Meta = append(c.Meta, string(k))
		}
		return (&Tx{kv: t}).ForEach(func(l loop.Loop) bool {
			seen[l.ID] = struct{}{}
			c.Changes = append(c.Changes, Change{ID: l.ID, Loop: utc(l)})
			return true
		})
	})
	if err != nil {
		return err
	}
	if t.rev == 0 {
		if t.rev = fw.currentRev(); t.rev < 0 {
			return errors.New("cannot read the current revision")
		}
	}
	fw.mu.Lock()
	for id := range fw.ids {
		if _, ok := seen[id]; !ok {
			c.Changes = append(c.Changes, Change{ID: id, Deleted: true})
		}
	}
	fw.mu.Unlock()
	fw.deliver(t.rev, c)
	return nil
}
