package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
)

// BenchmarkEtcdDurableTransition: one state transition (record, indexes
// and event) per Update on the etcd backend — snapshot reads, then one
// compared Txn — against etcd's own rate of single puts of a record-sized
// value, measured in the same run on the same embedded etcd, fsync on,
// in alternating rounds.
// Target: ≥ 0.5× etcd's put rate.
func BenchmarkEtcdDurableTransition(b *testing.B) {
	srv := etcdtest.Start(b, etcdtest.Options{}) // fsync on: durable
	s, err := OpenEtcd(EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: "/loopr/bench"}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for range 4 { // 4 × 100 loops: a seed transaction stays far below --max-txn-ops
		ids = append(ids, seedMore(b, s, len(ids), 100)...)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: testslack.Scale(5 * time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	// Rounds of 20 puts then 20 transitions: both see the same disk and
	// the same neighbours on a shared machine.
	var putTime, txTime time.Duration
	puts := 0
	b.ResetTimer()
	for i := 0; i < b.N; {
		began := time.Now()
		for range 20 {
			etcdPut(b, cli, puts)
			puts++
		}
		putTime += time.Since(began)
		began = time.Now()
		for end := min(i+20, b.N); i < end; i++ {
			if err := s.Update(func(tx *Tx) error { return transition(tx, ids[i%len(ids)]) }); err != nil {
				b.Fatal(err)
			}
		}
		txTime += time.Since(began)
	}
	b.StopTimer()
	rate := float64(b.N) / txTime.Seconds()
	put := float64(puts) / putTime.Seconds()
	b.ReportMetric(rate, "tx/s")
	b.ReportMetric(put, "etcd-put/s")
	b.ReportMetric(rate/put, "x-etcd-put")
}

// seedMore creates n pending loops numbered from first, in one Update.
func seedMore(b *testing.B, s *Store, first, n int) []string {
	b.Helper()
	out := make([]string, 0, n)
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := s.Update(func(tx *Tx) error {
		out = out[:0]
		for i := first; i < first+n; i++ {
			l := newLoop(fmt.Sprintf("L%08d", i), "pending", "")
			l.CreatedAt, l.UpdatedAt = now, now
			if err := tx.Create(l); err != nil {
				return err
			}
			out = append(out, l.ID)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// etcdPut is etcd's own durable write: one put of a 300-byte value (about
// a loop record), the baseline.
func etcdPut(b *testing.B, cli *clientv3.Client, i int) {
	if _, err := cli.Put(context.Background(), fmt.Sprintf("/baseline/%d", i%1000), strings.Repeat("x", 300)); err != nil {
		b.Fatal(err)
	}
}
