package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
)

// TestRawKeys checks the raw keys on a real etcd: read-your-writes, a raw
// read compared at commit (another writer's change runs the fn again), a
// key put with a lease gone with the lease, and the bbolt file refusing.
func TestRawKeys(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	t.Run("put, read back, delete", func(t *testing.T) {
		t.Parallel()
		s := openEtcd(t, srv, "")
		if err := s.Update(func(tx *Tx) error {
			if _, _, ok := tx.Raw("workers/a"); ok {
				t.Error("Raw(workers/a) found a key before any put")
			}
			if err := tx.PutRaw("workers/a", []byte("one"), 0); err != nil {
				return err
			}
			if v, _, ok := tx.Raw("workers/a"); !ok || string(v) != "one" {
				t.Errorf("Raw after PutRaw in the same tx = %q, %v; want one, true", v, ok)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := s.View(func(tx *Tx) error {
			v, lease, ok := tx.Raw("workers/a")
			if !ok || lease != 0 {
				t.Errorf("Raw(workers/a) = %q, lease %d, %v; want a key without lease", v, lease, ok)
			}
			got = string(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got != "one" {
			t.Fatalf("Raw(workers/a) = %q; want one", got)
		}
		if err := s.Update(func(tx *Tx) error { return tx.DeleteRaw("workers/a") }); err != nil {
			t.Fatal(err)
		}
		_ = s.View(func(tx *Tx) error {
			if _, _, ok := tx.Raw("workers/a"); ok {
				t.Error("Raw(workers/a) found a deleted key")
			}
			return nil
		})
	})
	t.Run("a raw read changed by another writer runs the fn again", func(t *testing.T) {
		t.Parallel()
		prefix := "/loopr/rawrace"
		a, b := openEtcd(t, srv, prefix), openEtcd(t, srv, prefix)
		if err := a.Update(func(tx *Tx) error { return tx.PutRaw("leases/x", []byte("w1"), 0) }); err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		var seen []string
		err := a.Update(func(tx *Tx) error {
			v, _, _ := tx.Raw("leases/x")
			seen = append(seen, string(v))
			if runs.Add(1) == 1 {
				// Another daemon moves the lease between our read and our commit.
				if err := b.Update(func(tx *Tx) error { return tx.PutRaw("leases/x", []byte("w2"), 0) }); err != nil {
					return err
				}
			}
			if string(v) != "w1" {
				return ErrFenced
			}
			return tx.PutRaw("leases/x", []byte("w1-done"), 0)
		})
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("Update error = %v; want ErrFenced on the second run (seen %q)", err, seen)
		}
		if runs.Load() != 2 {
			t.Fatalf("fn ran %d times; want 2 (the commit's compare failed once)", runs.Load())
		}
		_ = a.View(func(tx *Tx) error {
			if v, _, _ := tx.Raw("leases/x"); string(v) != "w2" {
				t.Errorf("leases/x = %q; want w2 (the fenced writer recorded nothing)", v)
			}
			return nil
		})
	})
	t.Run("a key put with a lease goes when the lease is revoked", func(t *testing.T) {
		t.Parallel()
		s := openEtcd(t, srv, "")
		cli := s.EtcdClient()
		ctx := context.Background()
		g, err := cli.Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Update(func(tx *Tx) error { return tx.PutRaw("leases/y", []byte("v"), int64(g.ID)) }); err != nil {
			t.Fatal(err)
		}
		_ = s.View(func(tx *Tx) error {
			if _, lease, ok := tx.Raw("leases/y"); !ok || lease != int64(g.ID) {
				t.Errorf("Raw(leases/y) lease = %x, %v; want %x", lease, ok, g.ID)
			}
			return nil
		})
		if _, err := cli.Revoke(ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		_ = s.View(func(tx *Tx) error {
			if _, _, ok := tx.Raw("leases/y"); ok {
				t.Error("Raw(leases/y) still found after its lease was revoked")
			}
			return nil
		})
		if s.EtcdPrefix() == "" || s.EtcdRequestTimeout() <= 0 {
			t.Errorf("EtcdPrefix() = %q, EtcdRequestTimeout() = %v; want set on etcd", s.EtcdPrefix(), s.EtcdRequestTimeout())
		}
	})
}

func TestRawKeysOnBbolt(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "loopr.db"), Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(func(tx *Tx) error {
		if _, _, ok := tx.Raw("workers/a"); ok {
			t.Error("Raw found a key on bbolt")
		}
		return tx.PutRaw("workers/a", []byte("x"), 0)
	})
	if err == nil || !errors.Is(err, errRawBbolt) {
		t.Fatalf("PutRaw on bbolt error = %v; want one saying etcd only", err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.DeleteRaw("workers/a") }); !errors.Is(err, errRawBbolt) {
		t.Fatalf("DeleteRaw on bbolt error = %v; want one saying etcd only", err)
	}
	if s.EtcdClient() != nil || s.EtcdPrefix() != "" {
		t.Error("EtcdClient/EtcdPrefix set on bbolt")
	}
}
