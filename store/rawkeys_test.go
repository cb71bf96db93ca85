package store

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
)

// TestRawKeysAndExist: the keys-only listing of a raw prefix and the
// count-only existence check (over more keys than one request takes), on
// a real etcd; nothing on the bbolt file.
func TestRawKeysAndExist(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	s := openEtcd(t, srv, "")
	var want, ask []string
	if err := s.Update(func(tx *Tx) error {
		for i := range 150 {
			k := fmt.Sprintf("artifacts/%03d", i)
			if i%2 == 0 {
				want = append(want, k)
				if err := tx.PutRaw(k, []byte("x"), 0); err != nil {
					return err
				}
			}
			ask = append(ask, k)
		}
		return tx.PutRaw("workers/a", []byte("w"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	keys, err := s.RawKeys("artifacts/")
	if err != nil || !slices.Equal(keys, want) {
		t.Fatalf("RawKeys(artifacts/) = %d keys %v, %v; want the %d put", len(keys), keys, err, len(want))
	}
	there, err := s.RawExist(ask)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range there {
		if ok != (i%2 == 0) {
			t.Errorf("RawExist(%s) = %v, want %v", ask[i], ok, i%2 == 0)
		}
	}

	b, err := Open(filepath.Join(t.TempDir(), "loopr.db"), Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if keys, err := b.RawKeys("artifacts/"); err != nil || len(keys) != 0 {
		t.Errorf("bbolt RawKeys = %v, %v; want none", keys, err)
	}
	if there, err := b.RawExist([]string{"a"}); err != nil || there[0] {
		t.Errorf("bbolt RawExist = %v, %v; want false", there, err)
	}
}
