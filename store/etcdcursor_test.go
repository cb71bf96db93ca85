package store

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/internal/etcdtest"
)

// cursorTrace walks a bucket every way a kvCursor can — First/Next to the
// end, Last/Prev to the start, and a Seek then Next and Prev for each probe
// — and writes down what it saw.
func cursorTrace(b kvBucket, probes []string) []string {
	var out []string
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		out = append(out, fmt.Sprintf("next %q=%q", k, v))
	}
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		out = append(out, fmt.Sprintf("prev %q=%q", k, v))
	}
	for _, p := range probes {
		k, v := c.Seek([]byte(p))
		out = append(out, fmt.Sprintf("seek %q: %q=%q", p, k, v))
		if k != nil {
			k, v = c.Next()
			out = append(out, fmt.Sprintf(" next %q=%q", k, v))
			c.Seek([]byte(p))
			k, v = c.Prev()
			out = append(out, fmt.Sprintf(" prev %q=%q", k, v))
		}
	}
	return out
}

// cursorAgreesWithBbolt: random committed keys, then a transaction that
// puts and deletes more; inside it, the etcd cursor (pages of 3 keys, so
// every walk crosses pages) must see exactly what bbolt's cursor sees:
// the snapshot merged with the transaction's own writes, in key order,
// both ways.
func cursorAgreesWithBbolt(t *testing.T, srv *etcdtest.Server) {
	for seed := range uint64(8) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		key := func() []byte { return []byte{byte('a' + rnd.IntN(6)), byte('a' + rnd.IntN(6))} }
		type op struct {
			k   []byte
			v   string
			del bool
		}
		var committed, pending []op
		for range 25 {
			committed = append(committed, op{k: key(), v: fmt.Sprint(rnd.IntN(100))})
		}
		for range 15 {
			pending = append(pending, op{k: key(), v: fmt.Sprint(rnd.IntN(100)), del: rnd.IntN(3) == 0})
		}
		var probes []string
		for range 6 {
			probes = append(probes, string(key()[:1+rnd.IntN(2)]))
		}
		apply := func(b kvBucket, ops []op) error {
			for _, o := range ops {
				var err error
				if o.del {
					err = b.Delete(o.k)
				} else {
					err = b.Put(o.k, []byte(o.v))
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
		trace := func(s *Store) []string {
			mustUpdate(t, s, func(tx *Tx) error { return apply(tx.bucket(bucketMeta), committed) })
			var got []string
			err := s.Update(func(tx *Tx) error {
				b := tx.bucket(bucketMeta)
				if err := apply(b, pending); err != nil {
					return err
				}
				got = cursorTrace(b, probes)
				return errRollback
			})
			if err != errRollback {
				t.Fatal(err)
			}
			return got
		}
		want := trace(openTest(t))
		es := openEtcd(t, srv, "")
		es.etcd.page = 3
		if diff := cmp.Diff(want, trace(es)); diff != "" {
			t.Errorf("seed %d: etcd cursor differs from bbolt's (-bbolt +etcd):\n%s", seed, diff)
		}
	}
}
