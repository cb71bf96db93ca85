package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

var prefixSeq atomic.Int64

// openEtcd opens a store on a fresh prefix of srv (or on prefix, if given).
func openEtcd(t *testing.T, srv *etcdtest.Server, prefix string) *Store {
	t.Helper()
	if prefix == "" {
		prefix = fmt.Sprintf("/loopr/test%d", prefixSeq.Add(1))
	}
	s, err := OpenEtcd(EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix}, Options{})
	if err != nil {
		t.Fatalf("OpenEtcd() error: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error: %v", err)
		}
	})
	return s
}

// TestEtcdBackend runs the store's conformance suite (storeSuite, the
// same cases TestConformance runs on the bbolt file) on a real etcd,
// embedded on 127.0.0.1, and what only a shared store can show: two
// Stores on one prefix racing on one record.
func TestEtcdBackend(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	t.Run("conformance", func(t *testing.T) {
		for _, tc := range storeSuite {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				s := openEtcd(t, srv, "")
				tc.run(t, s)
				mustCheck(t, s)
			})
		}
	})
	t.Run("follow sees every commit in order", func(t *testing.T) {
		followEveryCommitInOrder(t, openEtcd(t, srv, ""))
	})
	t.Run("two stores race on one record", func(t *testing.T) {
		twoWritersRace(t, srv)
	})
	t.Run("schema version lives in etcd", func(t *testing.T) {
		prefix := "/loopr/schema"
		s := openEtcd(t, srv, prefix)
		var v int
		if err := s.View(func(tx *Tx) error {
			ok, err := tx.Meta(keySchemaVersion, &v)
			if !ok {
				return errors.New("no schema version")
			}
			return err
		}); err != nil || v != SchemaVersion {
			t.Fatalf("schema version = %d, %v; want %d", v, err, SchemaVersion)
		}
		cli := etcdClient(t, srv)
		if _, err := cli.Put(context.Background(), prefix+"/meta/"+keySchemaVersion, "99"); err != nil {
			t.Fatal(err)
		}
		_, err := OpenEtcd(EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix}, Options{})
		var se *SchemaError
		if !errors.As(err, &se) || se.Found != 99 {
			t.Fatalf("OpenEtcd(newer schema) error = %v, want a *SchemaError for 99", err)
		}
	})
	t.Run("follower reloads after compaction", func(t *testing.T) {
		followerReload(t, srv)
	})
	t.Run("etcd restarts under a following store", func(t *testing.T) {
		etcdRestart(t)
	})
	t.Run("a transaction over etcd's --max-txn-ops names the flag", func(t *testing.T) {
		small := etcdtest.Start(t, etcdtest.Options{NoFsync: true, MaxTxnOps: 128}) // etcd's default
		s := openEtcd(t, small, "")
		err := s.Update(func(tx *Tx) error {
			for i := range 40 { // ~5 writes each
				if err := tx.Create(newLoop(fmt.Sprintf("big%02d", i), loop.Pending, "")); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "start etcd with a higher --max-txn-ops") {
			t.Fatalf("Update() of 200 writes on a default etcd: error = %v, want one naming --max-txn-ops", err)
		}
		if n, _ := s.Counts(); len(n) != 0 {
			t.Errorf("after the refused transaction the store holds %v, want nothing", n)
		}
	})
	t.Run("cursor agrees with bbolt's", func(t *testing.T) {
		cursorAgreesWithBbolt(t, srv)
	})
	t.Run("bad config", func(t *testing.T) {
		for _, tc := range []struct {
			c    EtcdConfig
			want string
		}{
			{EtcdConfig{Prefix: "/loopr/x"}, "no endpoints; set store.etcd.endpoints in loopr.yml"},
			{EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "loopr"}, `prefix "loopr": must start with /`},
			{EtcdConfig{Endpoints: []string{"http://127.0.0.1:1"}, Prefix: "/loopr/x", DialTimeout: 300 * time.Millisecond},
				"not reachable within 300ms"},
		} {
			_, err := OpenEtcd(tc.c, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenEtcd(%+v) error = %v, want it to say %q", tc.c, err, tc.want)
			}
		}
	})
}

func etcdClient(t *testing.T, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: testslack.Scale(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// twoWritersRace: two Stores (two daemons) on one prefix each bump one
// record's iteration and append an event, from several goroutines at once.
// No update may be lost, every event must be stored once with its own
// sequence number, and each Store's follower must see every bump once.
func twoWritersRace(t *testing.T, srv *etcdtest.Server) {
	prefix := fmt.Sprintf("/loopr/race%d", prefixSeq.Add(1))
	a, b := openEtcd(t, srv, prefix), openEtcd(t, srv, prefix)
	mustUpdate(t, a, func(tx *Tx) error { return tx.Create(newLoop("r", loop.Pending, "")) })

	type seen struct {
		mu    sync.Mutex
		iters []int
	}
	follow := func(s *Store, into *seen) {
		if err := s.Follow(func(*Tx) error { return nil }, func(c Commit) {
			into.mu.Lock()
			defer into.mu.Unlock()
			for _, ch := range c.Changes {
				if ch.ID == "r" && !ch.Deleted {
					into.iters = append(into.iters, ch.Loop.Iteration)
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	var sa, sb seen
	follow(a, &sa)
	follow(b, &sb)

	const perWriter, writersPerStore = 15, 3
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		for range writersPerStore {
			wg.Go(func() {
				for range perWriter {
					err := s.Update(func(tx *Tx) error {
						l, err := tx.Get("r")
						if err != nil {
							return err
						}
						l.Iteration++
						if err := tx.Put(l); err != nil {
							return err
						}
						_, err = tx.AppendEvent(loop.Event{Time: t0, Loop: "r", Kind: loop.EventIteration, Iteration: l.Iteration})
						return err
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()

	const total = 2 * writersPerStore * perWriter
	got, err := b.Get("r")
	if err != nil {
		t.Fatal(err)
	}
	if got.Iteration != 1+total {
		t.Errorf("iteration = %d after %d concurrent bumps from two stores, want %d (an update was lost)", got.Iteration, total, 1+total)
	}
	var evs []loop.Event
	a.View(func(tx *Tx) (err error) { evs, err = tx.Events("r"); return err })
	reasons := map[string]int{}
	for _, ev := range evs[1:] { // after "created"
		reasons[fmt.Sprint(ev.Iteration)]++
	}
	if len(evs) != 1+total || len(reasons) != total {
		t.Errorf("%d events with %d distinct iterations, want %d of each: every event once", len(evs)-1, len(reasons), total)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Errorf("event seq %d after %d", evs[i].Seq, evs[i-1].Seq)
		}
	}
	// Each follower saw every bump, in order, once: the other store's too.
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for _, f := range []*seen{&sa, &sb} {
		for {
			f.mu.Lock()
			n := len(f.iters)
			f.mu.Unlock()
			if n >= total || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		f.mu.Lock()
		want := make([]int, total)
		for i := range want {
			want[i] = i + 2
		}
		if diff := cmp.Diff(want, f.iters); diff != "" {
			t.Errorf("a follower's iterations (-want +got):\n%s", diff)
		}
		f.mu.Unlock()
	}
	mustCheck(t, a)
}

// followerReload: a follower whose history was compacted away is brought
// to the current records by one reload (changed, new and deleted loops).
func followerReload(t *testing.T, srv *etcdtest.Server) {
	prefix := fmt.Sprintf("/loopr/reload%d", prefixSeq.Add(1))
	a, b := openEtcd(t, srv, prefix), openEtcd(t, srv, prefix)
	mustUpdate(t, a, func(tx *Tx) error {
		for _, id := range []string{"keep", "gone"} {
			if err := tx.Create(newLoop(id, loop.Pending, "")); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	model := map[string]loop.Loop{}
	err := a.Follow(func(tx *Tx) error {
		return tx.ForEach(func(l loop.Loop) bool { model[l.ID] = l; return true })
	}, func(c Commit) {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range c.Changes {
			if ch.Deleted {
				delete(model, ch.ID)
			} else {
				model[ch.ID] = ch.Loop
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fw := a.etcd.fw.Load()
	fw.mu.Lock() // hold deliveries: the watch falls behind
	mustUpdate(t, b, func(tx *Tx) error {
		if err := tx.Delete("gone"); err != nil {
			return err
		}
		return tx.Create(newLoop("new", loop.Pending, ""))
	})
	fw.ids["gone"] = struct{}{}
	fw.mu.Unlock()
	if err := fw.reload(); err != nil {
		t.Fatal(err)
	}
	want := map[string]loop.Loop{}
	b.View(func(tx *Tx) error {
		return tx.ForEach(func(l loop.Loop) bool { want[l.ID] = l; return true })
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, model); diff != "" {
		t.Errorf("after reload, follower's records differ (-store +follower):\n%s", diff)
	}
}

// etcdRestart: the only etcd member stops and starts again on the same
// data; the Store's writes go on afterwards, nothing committed is lost, and
// its follower resumes its watch from the last revision it delivered and
// sees what was written after the restart, once.
func etcdRestart(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	s := openEtcd(t, srv, "/loopr/restart")
	var mu sync.Mutex
	seen := map[string]int{}
	if err := s.Follow(func(*Tx) error { return nil }, func(c Commit) {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range c.Changes {
			seen[ch.ID]++
		}
	}); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx *Tx) error { return tx.Create(newLoop("before", loop.Pending, "")) })
	began := time.Now()
	srv.Restart(t)
	t.Logf("restart took %s", time.Since(began))
	// The first calls after the restart may meet a connection that is not
	// back yet: the store says so, and a retry succeeds.
	var err error
	for range 50 {
		if err = s.Update(func(tx *Tx) error { return tx.Create(newLoop("after", loop.Pending, "")) }); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Update() after etcd restarted: %v", err)
	}
	t.Logf("first write %s after the restart began", time.Since(began))
	for _, id := range []string{"before", "after"} {
		if _, err := s.Get(id); err != nil {
			t.Errorf("Get(%s) after the restart: %v", id, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["before"] != 1 || seen["after"] != 1 {
		t.Errorf("follower saw %v, want before and after once each", seen)
	}
}

// TestEtcdClusterMemberLoss: a store on a 3-member etcd cluster (three
// real members on 127.0.0.1) goes on writing while one member is stopped
// and started again: writers on two Stores bump one record throughout;
// every bump that returned nil is there at the end, none is applied twice
// (a bump that returned an error may or may not be: etcd may have
// committed it as the member went), and each applied bump has its event.
func TestEtcdClusterMemberLoss(t *testing.T) {
	t.Parallel()
	members := etcdtest.StartCluster(t, 3, etcdtest.Options{NoFsync: true})
	var eps []string
	for _, m := range members {
		eps = append(eps, m.Endpoint())
	}
	open := func() *Store {
		s, err := OpenEtcd(EtcdConfig{Endpoints: eps, Prefix: "/loopr/cluster"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	mustUpdate(t, a, func(tx *Tx) error { return tx.Create(newLoop("r", loop.Pending, "")) })

	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := s.Update(func(tx *Tx) error {
					l, err := tx.Get("r")
					if err != nil {
						return err
					}
					l.Iteration++
					if err := tx.Put(l); err != nil {
						return err
					}
					_, err = tx.AppendEvent(loop.Event{Time: t0, Loop: "r", Kind: loop.EventIteration, Iteration: l.Iteration})
					return err
				})
				if err == nil {
					ok.Add(1)
				} else {
					failed.Add(1) // outcome unknown: etcd may have applied it
				}
			}
		})
	}
	wait := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(testslack.Scale(20 * time.Second))
		for start := ok.Load(); ok.Load() < start+n; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d writes succeeded in 20s", ok.Load()-start)
			}
		}
	}
	wait(20)
	members[0].Stop()
	wait(20) // writes go on with two members of three
	members[0].Restart(t)
	wait(20)
	close(stop)
	wg.Wait()

	got, err := a.Get("r")
	if err != nil {
		t.Fatal(err)
	}
	bumps := int64(got.Iteration - 1)
	t.Logf("%d bumps acknowledged, %d returned an error, %d applied", ok.Load(), failed.Load(), bumps)
	if bumps < ok.Load() || bumps > ok.Load()+failed.Load() {
		t.Errorf("iteration = %d after %d acknowledged bumps (%d more of unknown outcome): an update was lost or applied twice", got.Iteration, ok.Load(), failed.Load())
	}
	var evs []loop.Event
	a.View(func(tx *Tx) (err error) { evs, err = tx.Events("r"); return err })
	if int64(len(evs)) != 1+bumps {
		t.Errorf("%d events for %d applied bumps, want one each (and created)", len(evs), bumps)
	}
	mustCheck(t, a)
}
