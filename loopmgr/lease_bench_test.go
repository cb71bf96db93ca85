package loopmgr

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fsyncrate"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// BenchmarkTickStarts: a tick that starts 50 loops at once (a phase's
// tasks all ready), the leases written durably (fsync on) in one
// transaction, as leaseAll does; next to one transaction per start (the
// manager before) and the raw fsync rate of the same disk, all in the same
// run. Reported as transitions per second.
func BenchmarkTickStarts(b *testing.B) {
	const perTick = 50
	dir := b.TempDir()
	st, err := store.Open(filepath.Join(dir, "loopr.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cfg := config.Default()
	svc := control.New(st, workspace.Paths{Workspace: dir, Home: dir}, func() *config.Config { return cfg }, time.Now)
	m := New(Options{Service: svc, Owner: "bench"})
	pending := func(n int) []string {
		var ids []string
		err := st.Update(func(tx *store.Tx) error {
			for range n {
				l, err := svc.CreateIn(tx, api.CreateRequest{Type: loop.Ralph, Task: "t"}, svc.Now())
				if err != nil {
					return err
				}
				ids = append(ids, l.ID)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return ids
	}
	raw := rawFsync(b, dir, 200)

	// One transaction per start, measured on as many ticks.
	var oneEach time.Duration
	for range 3 {
		ids := pending(perTick)
		began := time.Now()
		for _, id := range ids {
			if ls := m.leaseAll([]string{id}, svc.Now(), &scheduler.Agents{}, nil); ls[0].err != nil {
				b.Fatal(ls[0].err)
			}
		}
		oneEach += time.Since(began)
	}
	oneEachRate := float64(3*perTick) / oneEach.Seconds()

	var took time.Duration
	for b.Loop() {
		b.StopTimer()
		ids := pending(perTick)
		b.StartTimer()
		began := time.Now()
		for i, ls := range m.leaseAll(ids, svc.Now(), &scheduler.Agents{}, nil) {
			if ls.err != nil {
				b.Fatalf("lease %s: %v", ids[i], ls.err)
			}
		}
		took += time.Since(began)
	}
	rate := float64(b.N*perTick) / took.Seconds()
	b.ReportMetric(rate, "tx/s")
	b.ReportMetric(oneEachRate, "one-tx-each/s")
	b.ReportMetric(raw, "fsync/s")
	b.ReportMetric(rate/raw, "x-raw-fsync")
}

// rawFsync is this disk's raw write+fsync rate in dir, the same-run baseline.
func rawFsync(b *testing.B, dir string, n int) float64 {
	b.Helper()
	rate, err := fsyncrate.Measure(dir, n)
	if err != nil {
		b.Fatal(err)
	}
	return rate
}
