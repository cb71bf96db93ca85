package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The etcd backend keeps every bucket under one key prefix:
//
//	<prefix>/<bucket>/<key>   a bucket's key (the same bytes as in the bbolt file)
//	<prefix>/seq/<bucket>     a bucket's sequence, in decimal
//
// A transaction reads at one snapshot revision R (the first read fixes
// it), buffers its writes (read-your-writes, cursors included) and commits
// them in one etcd Txn whose If compares every key it read (ModRevision as
// seen, or CreateRevision 0 for a key that was absent) and every range its
// cursors scanned (every ModRevision ≤ R over the range). If another
// writer got there first the compare fails and the whole fn runs again at
// a new revision, up to etcdAttempts times. So no update is lost when two
// daemons race on one record. What a range compare cannot see is a key
// another writer deleted inside a range this transaction only scanned:
// every key the store's transitions depend on is read by Get (the record),
// and a record's index entries move with it, so its compare catches them.

// EtcdConfig says where the etcd store is (loopr.yml's store.etcd).
type EtcdConfig struct {
	Endpoints   []string
	Prefix      string        // "/loopr/<name>": every key of this store starts with it
	DialTimeout time.Duration // how long to wait for etcd at open, and for any one request after
	Username    string
	Password    string
	CAFile      string
	CertFile    string
	KeyFile     string
}

// DefaultEtcdDialTimeout is EtcdConfig.DialTimeout's default.
const DefaultEtcdDialTimeout = 5 * time.Second

const (
	// etcdAttempts bounds how often a conflicting transaction runs again.
	etcdAttempts = 64
	// etcdRetryTimeout bounds a request made while the last one found
	// etcd unreachable.
	etcdRetryTimeout = time.Second
	// etcdPage is how many keys a cursor fetches at once.
	etcdPage = 512
)

// ErrConflict is what an Update on etcd returns, wrapped, when other
// writers kept changing what it read through every attempt.
var ErrConflict = errors.New("transaction kept conflicting with other writers")

type etcdStore struct {
	cli    *clientv3.Client
	prefix string // with no trailing slash
	where  string // "etcd <endpoints> <prefix>", for errors
	page   int    // keys per cursor fetch: etcdPage (tests make it small)
	// opTimeout bounds every request to etcd (EtcdConfig.DialTimeout), so
	// that no store call hangs while etcd is unreachable.
	opTimeout   time.Duration
	unreachable atomic.Bool // the last request timed out: the next ones wait etcdRetryTimeout
	log         *slog.Logger

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc

	fw      atomic.Pointer[etcdFollow] // nil until the first Follow
	lastRev atomic.Int64               // the newest revision this store committed or read

	closeOnce sync.Once
	closeErr  error
}

// OpenEtcd opens the store kept in etcd under c.Prefix and migrates it to
// SchemaVersion (several daemons may open one store at once: it takes no
// lock: several daemons share it as workers, package cluster). It returns an error naming the endpoints if etcd does
// not answer within c.DialTimeout, and one line naming the setting and
// what to do for a wrong TLS file, CA, client certificate, user or
// password, an http/https mixup, or a user whose role may not read and
// write "<prefix>/" (etcdtls.go). Of opt, only Now, Log and ReadOnly
// (which keeps a store of an older schema from being migrated) apply:
// etcd has no file lock to wait for and syncs as its server is told.
func OpenEtcd(c EtcdConfig, opt Options) (*Store, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("open store: etcd: no endpoints; set store.etcd.endpoints in loopr.yml")
	}
	prefix := strings.TrimRight(c.Prefix, "/")
	if prefix == "" || !strings.HasPrefix(prefix, "/") {
		return nil, fmt.Errorf("open store: etcd: prefix %q: must start with / and name the store, such as /loopr/<name>", c.Prefix)
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultEtcdDialTimeout
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	cfg := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout,
		Username: c.Username, Password: c.Password,
		// etcd's default request limit is 1.5 MiB; a bigger transaction is
		// refused by the server with a clear error, not cut by the client.
		MaxCallSendMsgSize: 16 << 20,
		Logger:             zap.NewNop()} // errors reach the caller; the client's own retries are not the user's business
	tlsc, err := etcdTLS(c)
	if err != nil {
		return nil, err
	}
	cfg.TLS = tlsc
	where := fmt.Sprintf("etcd %s %s", strings.Join(c.Endpoints, ","), prefix)
	cli, err := clientv3.New(cfg)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.DialTimeout)
		_, err = cli.Get(ctx, prefix+"/meta/"+keySchemaVersion)
		if err == nil && !opt.ReadOnly {
			err = checkEtcdWrite(ctx, cli, prefix+"/meta/"+keySchemaVersion)
		}
		cancel()
		if err != nil {
			cli.Close()
		}
	}
	if err != nil {
		if a := etcdAuthError(c, prefix, err); a != "" {
			return nil, fmt.Errorf("open store: %s: %s", where, a)
		}
		if d := diagnoseEtcd(c, tlsc); d != "" {
			return nil, fmt.Errorf("open store: %s: %s", where, d)
		}
		return nil, fmt.Errorf("open store: %s: not reachable within %s (%v); is etcd running? (store.etcd in loopr.yml)", where, c.DialTimeout, err)
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	e := &etcdStore{cli: cli, prefix: prefix, where: where, log: opt.Log, page: etcdPage, opTimeout: c.DialTimeout}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	s := &Store{path: "etcd:" + prefix, now: opt.Now, etcd: e, w: &writePath{}}
	if err := s.migrate(opt.ReadOnly); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (e *etcdStore) close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		if fw := e.fw.Load(); fw != nil {
			<-fw.done
		}
		e.closeErr = e.cli.Close()
	})
	return e.closeErr
}

// etcdFailure carries an etcd error out of a kvBucket method (which has
// no error result) to the View or Update that runs the transaction.
type etcdFailure struct{ err error }

// etcdGuard runs fn and turns an etcdFailure panic back into its error.
func etcdGuard(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(etcdFailure)
			if !ok {
				panic(p)
			}
			err = f.err
		}
	}()
	return fn()
}

// guard runs fn, which reads through tx, on whatever goroutine: a damaged
// bbolt page or a failed etcd request is an error, never a panic.
func (tx *Tx) guard(fn func() error) error {
	if _, ok := tx.kv.(*etcdTx); ok {
		return etcdGuard(fn)
	}
	return guardPath(tx.path, fn)
}

func (e *etcdStore) view(fn func(*Tx) error) error {
	for attempt := 0; ; attempt++ {
		t := e.newTx(false)
		err := etcdGuard(func() error { return fn(&Tx{kv: t, path: "etcd:" + e.prefix}) })
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < 3 {
			continue // the snapshot was compacted away under a long read
		}
		return e.wrap(err)
	}
}

// update runs fn in a transaction and commits its writes in one etcd Txn
// that compares everything fn read; a failed compare runs fn again.
func (e *etcdStore) update(fn func(*Tx) error) error {
	for attempt := 0; attempt < etcdAttempts; attempt++ {
		if attempt > 0 {
			// Jittered backoff: two daemons that keep colliding drift apart.
			d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
			select {
			case <-time.After(d):
			case <-e.ctx.Done():
				return fmt.Errorf("store: %s: closed", e.where)
			}
		}
		t := e.newTx(true)
		t.optimistic = attempt == 0
		err := etcdGuard(func() error { return fn(&Tx{kv: t, path: "etcd:" + e.prefix}) })
		if errors.Is(err, rpctypes.ErrCompacted) {
			continue
		}
		if err != nil {
			return e.wrap(err)
		}
		rev, ok, err := t.commit()
		if err != nil {
			return e.wrap(err)
		}
		if !ok {
			continue
		}
		if fw := e.fw.Load(); t.wroteLoops && fw != nil {
			fw.waitApplied(rev)
		}
		return nil
	}
	return fmt.Errorf("store: %s: %w (%d attempts); retry later", e.where, ErrConflict, etcdAttempts)
}

// wrap names etcd in an error that came from it.
func (e *etcdStore) wrap(err error) error {
	var f etcdRPCError
	if errors.As(err, &f) {
		return fmt.Errorf("store: %s: %w", e.where, err)
	}
	return err
}

// etcdRPCError marks an error returned by an etcd request.
type etcdRPCError struct{ err error }

func (r etcdRPCError) Error() string { return r.err.Error() }
func (r etcdRPCError) Unwrap() error { return r.err }

type wval struct {
	v     []byte
	del   bool
	lease int64 // put with this etcd lease (PutRaw); 0: none
}

// etcdTx is one transaction on etcd: reads at rev, writes buffered.
type etcdTx struct {
	e     *etcdStore
	write bool
	rev   int64 // the snapshot; 0 until the first read fixes it
	// optimistic lets the first read be served by the member without a
	// round of consensus (an Update's first attempt).
	optimistic bool

	reads      map[string]int64    // key → ModRevision seen at rev (0: absent)
	prefetched map[string]prefetch // read at rev but not by fn (yet): not compared
	vals       map[string][]byte   // key → value at rev (nil: absent)
	leases     map[string]int64    // key → its lease at rev, for keys read by Raw
	ranges     []keyRange          // ranges cursors fetched, [lo, hi)

	writes map[string]wval // key → its new value or deletion
	wkeys  []string        // the keys of writes, sorted

	wroteLoops bool // set by commit (a loop record or a meta key): followers must see this one
}

type keyRange struct{ lo, hi string }

func (e *etcdStore) newTx(write bool) *etcdTx {
	return &etcdTx{e: e, write: write, reads: map[string]int64{}, vals: map[string][]byte{}, writes: map[string]wval{}}
}

func (t *etcdTx) writable() bool { return t.write }

func (t *etcdTx) bucket(name []byte) kvBucket {
	return &etcdBucket{t: t, name: string(name), pre: t.e.prefix + "/" + string(name) + "/"}
}

func (t *etcdTx) createBucket([]byte) error { return nil } // key prefixes need no creating

// rpc runs one request with a timeout; an error aborts the transaction.
func (t *etcdTx) get(key string, opts ...clientv3.OpOption) *clientv3.GetResponse {
	ctx, cancel := t.e.reqCtx()
	defer cancel()
	var resp *clientv3.GetResponse
	var err error
	switch {
	case t.rev != 0:
		// The snapshot is fixed: any member that applied it serves it
		// without a round of consensus; one that has not yet sends us to
		// a linearizable read.
		resp, err = t.e.cli.Get(ctx, key, append(opts, clientv3.WithRev(t.rev), clientv3.WithSerializable())...)
		if errors.Is(etcdErr(err), rpctypes.ErrFutureRev) {
			resp, err = t.e.cli.Get(ctx, key, append(opts, clientv3.WithRev(t.rev))...)
		}
	case t.optimistic:
		// An Update's first read: the member's latest state, unless it has
		// not applied this store's own last commit yet. A stale snapshot
		// costs only a retry: the commit compares what was read.
		resp, err = t.e.cli.Get(ctx, key, append(opts, clientv3.WithSerializable())...)
		if err == nil && resp.Header.Revision < t.e.lastRev.Load() {
			resp, err = t.e.cli.Get(ctx, key, opts...)
		}
	default:
		resp, err = t.e.cli.Get(ctx, key, opts...)
	}
	t.e.note(err)
	if err != nil {
		if err = etcdErr(err); errors.Is(err, rpctypes.ErrCompacted) {
			panic(etcdFailure{err})
		}
		panic(etcdFailure{etcdRPCError{err}})
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
		t.e.seen(t.rev)
	}
	return resp
}

// reqCtx is the context of one request: the store's request timeout, or
// a short one while the last request found etcd unreachable — so that a
// chain of calls (a daemon stopping) does not wait the whole timeout for
// each.
func (e *etcdStore) reqCtx() (context.Context, context.CancelFunc) {
	d := e.opTimeout
	if e.unreachable.Load() {
		d = min(d, etcdRetryTimeout)
	}
	return context.WithTimeout(e.ctx, d)
}

// note records whether a request reached etcd.
func (e *etcdStore) note(err error) {
	switch {
	case err == nil:
		e.unreachable.Store(false)
	case errors.Is(err, context.DeadlineExceeded):
		e.unreachable.Store(true)
	}
}

// etcdErr turns a gRPC status error from etcd into its rpctypes value, so
// that errors.Is(err, rpctypes.ErrCompacted) and the like hold.
func etcdErr(err error) error {
	if _, ok := err.(rpctypes.EtcdError); ok || err == nil {
		return err
	}
	return rpctypes.Error(err)
}

// seen notes a revision this store read or wrote.
func (e *etcdStore) seen(rev int64) {
	for {
		cur := e.lastRev.Load()
		if rev <= cur || e.lastRev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// value returns key's value as the transaction sees it: its own write, or
// the snapshot's.
func (t *etcdTx) value(key string) []byte {
	if w, ok := t.writes[key]; ok {
		if w.del {
			return nil
		}
		return w.v
	}
	if v, ok := t.vals[key]; ok {
		return v
	}
	if p, ok := t.prefetched[key]; ok {
		delete(t.prefetched, key)
		t.reads[key], t.vals[key] = p.mod, p.v
		return p.v
	}
	if t.rev == 0 && t.write && t.optimistic {
		return t.firstValue(key)
	}
	resp := t.get(key)
	var v []byte
	var mod int64
	if len(resp.Kvs) > 0 {
		v, mod = nonNil(resp.Kvs[0].Value), resp.Kvs[0].ModRevision
	}
	t.reads[key], t.vals[key] = mod, v
	return v
}

type prefetch struct {
	v   []byte
	mod int64
}

// firstValue is an Update's first point read: in the same request it
// fetches the event sequence, which nearly every Update then reads to
// append its event, and keeps it aside (it joins the compared reads only
// if the transaction reads it). One round trip instead of two.
func (t *etcdTx) firstValue(key string) []byte {
	seq := t.e.prefix + "/seq/" + string(bucketEvents)
	ctx, cancel := t.e.reqCtx()
	defer cancel()
	resp, err := t.e.cli.Txn(ctx).Then(
		clientv3.OpGet(key, clientv3.WithSerializable()),
		clientv3.OpGet(seq, clientv3.WithSerializable())).Commit()
	if err == nil && resp.Header.Revision < t.e.lastRev.Load() {
		// This member has not applied this store's last commit yet.
		resp, err = t.e.cli.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(seq)).Commit()
	}
	t.e.note(err)
	if err != nil {
		panic(etcdFailure{etcdRPCError{err}})
	}
	t.rev = resp.Header.Revision
	t.e.seen(t.rev)
	got := func(i int) prefetch {
		kvs := resp.Responses[i].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return prefetch{}
		}
		return prefetch{nonNil(kvs[0].Value), kvs[0].ModRevision}
	}
	first := got(0)
	t.reads[key], t.vals[key] = first.mod, first.v
	if key != seq {
		t.prefetched = map[string]prefetch{seq: got(1)}
	}
	return first.v
}

// nonNil keeps a present key with an empty value apart from an absent one
// (protobuf decodes empty bytes as nil).
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

func (t *etcdTx) set(key string, w wval) error {
	if !t.write {
		return errors.New("store: write in a read-only transaction")
	}
	if _, ok := t.writes[key]; !ok {
		i, _ := slices.BinarySearch(t.wkeys, key)
		t.wkeys = slices.Insert(t.wkeys, i, key)
	}
	t.writes[key] = w
	return nil
}

// commit sends the writes in one Txn guarded by the reads; ok is false if
// another writer changed what this transaction read.
func (t *etcdTx) commit() (rev int64, ok bool, err error) {
	if len(t.wkeys) == 0 {
		return t.rev, true, nil
	}
	cmps := make([]clientv3.Cmp, 0, len(t.reads)+len(t.ranges))
	for _, k := range slices.Sorted(maps.Keys(t.reads)) {
		if mod := t.reads[k]; mod == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", mod))
		}
	}
	for _, r := range mergeRanges(t.ranges) {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(r.lo), "<", t.rev+1).WithRange(r.hi))
	}
	ops := make([]clientv3.Op, 0, len(t.wkeys))
	loops := t.e.prefix + "/" + string(bucketLoops) + "/"
	meta := t.e.prefix + "/" + string(bucketMeta) + "/"
	for _, k := range t.wkeys {
		w := t.writes[k]
		if w.del {
			ops = append(ops, clientv3.OpDelete(k))
		} else if w.lease != 0 {
			ops = append(ops, clientv3.OpPut(k, string(w.v), clientv3.WithLease(clientv3.LeaseID(w.lease))))
		} else {
			ops = append(ops, clientv3.OpPut(k, string(w.v)))
		}
		if strings.HasPrefix(k, loops) || strings.HasPrefix(k, meta) {
			t.wroteLoops = true
		}
	}
	ctx, cancel := t.e.reqCtx()
	defer cancel()
	resp, err := t.e.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	t.e.note(err)
	if err != nil {
		err = etcdErr(err)
		if errors.Is(err, rpctypes.ErrTooManyOps) {
			return 0, false, fmt.Errorf("transaction of %d compares and %d writes: %w; start etcd with a higher --max-txn-ops (see docs/several-machines.md)", len(cmps), len(ops), etcdRPCError{err})
		}
		// Over --max-request-bytes etcd refuses the request; over that
		// plus its gRPC allowance (512 KiB) gRPC refuses it before etcd
		// sees it. Either way the flag is the fix.
		if errors.Is(err, rpctypes.ErrRequestTooLarge) || strings.Contains(err.Error(), "received message larger than max") {
			return 0, false, fmt.Errorf("transaction of %d writes: %w; start etcd with a higher --max-request-bytes (see docs/several-machines.md)", len(ops), etcdRPCError{err})
		}
		return 0, false, etcdRPCError{err}
	}
	t.e.seen(resp.Header.Revision)
	return resp.Header.Revision, resp.Succeeded, nil
}

// mergeRanges joins overlapping and touching ranges: a forward scan fetched
// page by page is one compare.
func mergeRanges(rs []keyRange) []keyRange {
	if len(rs) < 2 {
		return rs
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b keyRange) int { return strings.Compare(a.lo, b.lo) })
	out := rs[:1]
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.lo <= last.hi {
			last.hi = max(last.hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// etcdBucket is one bucket's keys, through its transaction.
type etcdBucket struct {
	t    *etcdTx
	name string
	pre  string // "<prefix>/<bucket>/"
}

func (b *etcdBucket) Get(key []byte) []byte { return b.t.value(b.pre + string(key)) }

func (b *etcdBucket) Put(key, value []byte) error {
	if len(key) == 0 {
		return errors.New("key required")
	}
	return b.t.set(b.pre+string(key), wval{v: bytes.Clone(nonNil(value))})
}

func (b *etcdBucket) Delete(key []byte) error {
	return b.t.set(b.pre+string(key), wval{del: true})
}

func (b *etcdBucket) seqKey() string { return b.t.e.prefix + "/seq/" + b.name }

func (b *etcdBucket) Sequence() uint64 {
	v := b.t.value(b.seqKey())
	if v == nil {
		return 0
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		panic(etcdFailure{damaged(fmt.Errorf("bucket %s: sequence %q: not a number", b.name, v))})
	}
	return n
}

func (b *etcdBucket) NextSequence() (uint64, error) {
	n := b.Sequence() + 1
	return n, b.SetSequence(n)
}

func (b *etcdBucket) SetSequence(v uint64) error {
	return b.t.set(b.seqKey(), wval{v: strconv.AppendUint(nil, v, 10)})
}

func (b *etcdBucket) Cursor() kvCursor {
	return &etcdCursor{t: b.t, lo: b.pre, hi: b.pre[:len(b.pre)-1] + "0"} // '0' follows '/'
}

type kvPair struct {
	k string
	v []byte
}

// etcdCursor merges the snapshot's keys, fetched a page at a time and kept
// (the snapshot never changes), with the transaction's own writes.
type etcdCursor struct {
	t      *etcdTx
	lo, hi string // the bucket's keys: [lo, hi)

	page           []kvPair // snapshot keys in [pageLo, pageHi), all of them
	pageLo, pageHi string
	havePage       bool

	cur string // the current key; "" at either end
}

func (c *etcdCursor) First() ([]byte, []byte) { return c.geq(c.lo) }
func (c *etcdCursor) Last() ([]byte, []byte)  { return c.lt(c.hi) }

func (c *etcdCursor) Seek(seek []byte) ([]byte, []byte) { return c.geq(c.lo + string(seek)) }

func (c *etcdCursor) Next() ([]byte, []byte) {
	if c.cur == "" {
		return nil, nil
	}
	return c.geq(c.cur + "\x00")
}

func (c *etcdCursor) Prev() ([]byte, []byte) {
	if c.cur == "" {
		return nil, nil
	}
	return c.lt(c.cur)
}

// geq moves to the first visible key ≥ k.
func (c *etcdCursor) geq(k string) ([]byte, []byte) { return c.move(k, true) }

// lt moves to the last visible key < k.
func (c *etcdCursor) lt(k string) ([]byte, []byte) { return c.move(k, false) }

// move moves to the nearest visible key from k on, forward (≥ k) or back
// (< k): the nearer of the snapshot's key and the transaction's own
// write, skipping keys the transaction deleted.
func (c *etcdCursor) move(k string, forward bool) ([]byte, []byte) {
	for {
		var s kvPair
		var o string
		var sok, ook bool
		if forward {
			s, sok = c.snapGE(k)
			o, ook = c.overlayGE(k)
		} else {
			s, sok = c.snapLT(k)
			o, ook = c.overlayLT(k)
		}
		m := o
		switch {
		case sok && ook && forward:
			m = min(s.k, o)
		case sok && ook:
			m = max(s.k, o)
		case sok:
			m = s.k
		case !ook:
			c.cur = ""
			return nil, nil
		}
		v, hidden := c.visible(m, s)
		if !hidden {
			c.cur = m
			return []byte(m[len(c.lo):]), v
		}
		if k = m; forward {
			k = m + "\x00"
		}
	}
}

// visible returns key m's value, the transaction's write over the
// snapshot's, or hidden if the transaction deleted it.
func (c *etcdCursor) visible(m string, s kvPair) ([]byte, bool) {
	if w, ok := c.t.writes[m]; ok {
		return w.v, w.del
	}
	return s.v, false
}

func (c *etcdCursor) overlayGE(k string) (string, bool) {
	i, _ := slices.BinarySearch(c.t.wkeys, k)
	if i < len(c.t.wkeys) && c.t.wkeys[i] < c.hi && c.t.wkeys[i] >= c.lo {
		return c.t.wkeys[i], true
	}
	return "", false
}

func (c *etcdCursor) overlayLT(k string) (string, bool) {
	i, _ := slices.BinarySearch(c.t.wkeys, k)
	if i > 0 && c.t.wkeys[i-1] >= c.lo && c.t.wkeys[i-1] < c.hi {
		return c.t.wkeys[i-1], true
	}
	return "", false
}

// snapGE returns the first snapshot key ≥ k, from the page when it covers
// k, else from a new page fetched from k.
func (c *etcdCursor) snapGE(k string) (kvPair, bool) {
	if k < c.lo {
		k = c.lo
	}
	if k >= c.hi {
		return kvPair{}, false
	}
	if !c.havePage || k < c.pageLo || k >= c.pageHi {
		c.fetch(k)
	}
	i := sort.Search(len(c.page), func(i int) bool { return c.page[i].k >= k })
	if i < len(c.page) {
		return c.page[i], true
	}
	return kvPair{}, false // the page covers up to the bucket's end
}

// fetch reads the next page of snapshot keys from k on.
func (c *etcdCursor) fetch(k string) {
	resp := c.t.get(k, clientv3.WithRange(c.hi), clientv3.WithLimit(int64(c.t.e.page)))
	c.page = c.page[:0]
	for _, kv := range resp.Kvs {
		c.page = append(c.page, kvPair{string(kv.Key), nonNil(kv.Value)})
	}
	c.pageLo, c.pageHi, c.havePage = k, c.hi, true
	if resp.More && len(c.page) > 0 {
		c.pageHi = c.page[len(c.page)-1].k + "\x00"
	}
	c.t.ranges = append(c.t.ranges, keyRange{c.pageLo, c.pageHi})
}

// snapLT returns the last snapshot key < k.
func (c *etcdCursor) snapLT(k string) (kvPair, bool) {
	if k > c.hi {
		k = c.hi
	}
	if k <= c.lo {
		return kvPair{}, false
	}
	if c.havePage && k > c.pageLo && k <= c.pageHi {
		i := sort.Search(len(c.page), func(i int) bool { return c.page[i].k >= k })
		if i > 0 {
			return c.page[i-1], true
		}
	}
	resp := c.t.get(c.lo, clientv3.WithRange(k), clientv3.WithLimit(1),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if len(resp.Kvs) == 0 {
		c.t.ranges = append(c.t.ranges, keyRange{c.lo, k})
		return kvPair{}, false
	}
	kv := resp.Kvs[0]
	c.t.ranges = append(c.t.ranges, keyRange{string(kv.Key), k})
	return kvPair{string(kv.Key), nonNil(kv.Value)}, true
}
