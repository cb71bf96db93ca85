package control

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// TestDiskFloor: below DiskFloorBytes the disk is full whatever the quota
// (0 included): DiskFull says so, no loop is runnable (disk_low), and the
// status reports disk_full and disk_low. Above it, only the quota counts.
func TestDiskFloor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	st, err := store.Open(paths.DB(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(st, paths, func() *config.Config { return cfg }, func() time.Time { return now })
	if _, err := s.Create(api.CreateRequest{Type: loop.Ralph, Task: "work"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		freeBytes float64
		quotaGB   float64
		full, low bool
	}{
		{"plenty", 100e9, 0, false, false},
		{"below quota", 3e9, 5, false, true},
		{"just above the floor", DiskFloorBytes + 1, 0, false, false},
		{"below the floor, quota off", DiskFloorBytes - 1, 0, true, true},
		{"empty", 0, 5, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg.Storage.DiskQuotaMinGB = tt.quotaGB
			s.disk = func(string) (float64, error) { return tt.freeBytes / 1e9, nil }
			err := s.DiskFull()
			var dfe *DiskFullError
			if got := errors.As(err, &dfe); got != tt.full {
				t.Fatalf("DiskFull() = %v, want full=%v", err, tt.full)
			}
			if tt.full && (!errors.Is(err, syscall.ENOSPC) || !strings.HasPrefix(err.Error(), "disk full: ")) {
				t.Errorf("DiskFull() = %q; want a disk full message wrapping ENOSPC", err)
			}
			_, d, err := s.Plan(now)
			if err != nil {
				t.Fatal(err)
			}
			blocked := len(d.Rows) == 1 && d.Rows[0].Has(scheduler.DiskLow)
			if blocked != tt.low {
				t.Errorf("loop blocked by disk_low = %v, want %v (%+v)", blocked, tt.low, d.Rows)
			}
			status, err := s.Status(now)
			if err != nil {
				t.Fatal(err)
			}
			if status.DiskFull != tt.full || status.DiskLow != tt.low {
				t.Errorf("status disk_full=%v disk_low=%v, want %v %v", status.DiskFull, status.DiskLow, tt.full, tt.low)
			}
		})
	}
}
