package store

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestEtcdFollowMeta: on etcd a follower is told which meta keys a commit
// wrote (Commit.Meta), whichever Store on the prefix committed it: a
// meta-only commit of this Store is delivered before its Update returns,
// another Store's reaches it through the watch, a commit of both a loop
// and a meta key is one Commit, and keys outside loops and meta (the
// journal, raw keys) are not delivered.
func TestEtcdFollowMeta(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	a := openEtcd(t, srv, "/loopr/meta")
	b := openEtcd(t, srv, "/loopr/meta")
	var mu sync.Mutex
	var got []Commit
	if err := a.Follow(func(*Tx) error { return nil }, func(c Commit) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	commits := func() []Commit {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	mustUpdate(t, a, func(tx *Tx) error { return tx.SetMeta("ratelimits", map[string]int{"x": 1}) })
	if c := commits(); len(c) != 1 || !slices.Equal(c[0].Meta, []string{"ratelimits"}) || len(c[0].Changes) != 0 {
		t.Fatalf("after this Store's meta-only commit returned: commits %+v, want one with Meta [ratelimits]", c)
	}
	mustUpdate(t, b, func(tx *Tx) error {
		if err := tx.Create(newLoop("l1", loop.Pending, "")); err != nil {
			return err
		}
		return tx.SetMeta("fairness", map[string]int{"k": 2})
	})
	mustUpdate(t, b, func(tx *Tx) error { return tx.PutRaw("artifacts/x", []byte("bytes"), 0) })
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for len(commits()) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a raw-key commit, if wrongly delivered, comes by now
	c := commits()
	if len(c) != 2 {
		t.Fatalf("commits %+v, want 2 (the raw-key commit is not delivered)", c)
	}
	if !slices.Equal(c[1].Meta, []string{"fairness"}) || len(c[1].Changes) != 1 || c[1].Changes[0].ID != "l1" {
		t.Errorf("the other Store's commit arrived as %+v, want loop l1 and Meta [fairness] in one Commit", c[1])
	}
}
