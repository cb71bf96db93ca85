// Package fsyncrate measures a disk's raw durable-write rate — write one
// 4 KiB page and fsync it — the baseline every durability benchmark in loopr
// is reported against, measured in the same run as the figure it judges.
package fsyncrate

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Measure writes and fsyncs one 4 KiB page n times in a scratch file in dir
// and returns the rate per second.
func Measure(dir string, n int) (float64, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.fsync"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, fmt.Errorf("fsync rate: %w", err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	began := time.Now()
	for i := range n {
		page[0] = byte(i)
		if _, err := f.WriteAt(page, int64(i%64)*4096); err != nil {
			return 0, fmt.Errorf("fsync rate: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("fsync rate: %w", err)
		}
	}
	return float64(n) / time.Since(began).Seconds(), nil
}
