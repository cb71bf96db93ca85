package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkStallWatchSetup: what the stall watch costs an iteration at its
// start, for a workdir of dirs directories (files beside them do not add
// watches): the walk and one inotify watch per directory, at most
// maxWatchedDirs of them.
func BenchmarkStallWatchSetup(b *testing.B) {
	for _, dirs := range []int{10, 1000, 5000} {
		b.Run(fmt.Sprintf("dirs=%d", dirs), func(b *testing.B) {
			root := b.TempDir()
			for i := range dirs {
				d := filepath.Join(root, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("e%04d", i))
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, "f.go"), []byte("package x\n"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			a := &activity{}
			a.touch()
			b.ResetTimer()
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				watchStall(ctx, root, nil, time.Hour, a)
				cancel()
			}
		})
	}
}
