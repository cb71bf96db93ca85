package loopmgr_test

import (
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/loopmgr"
)

func TestReadyAt(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name   string
		l      loop.Loop
		parent time.Time
		want   time.Time
	}{
		{"new loop: its creation", loop.Loop{CreatedAt: at(0), UpdatedAt: at(0)}, time.Time{}, at(0)},
		{"delayed run: runnable_at", loop.Loop{CreatedAt: at(0), UpdatedAt: at(0), RunnableAt: at(600)}, time.Time{}, at(600)},
		{"retry backoff: runnable_at after the requeue", loop.Loop{CreatedAt: at(0), UpdatedAt: at(50), RunnableAt: at(54)}, time.Time{}, at(54)},
		{"requeued after a rate limit: the requeue", loop.Loop{CreatedAt: at(0), UpdatedAt: at(70), RunnableAt: at(10)}, time.Time{}, at(70)},
		{"added under a running parent: its finish", loop.Loop{CreatedAt: at(0), UpdatedAt: at(0)}, at(300), at(300)},
		{"spawned with its parent's completion", loop.Loop{CreatedAt: at(300), UpdatedAt: at(300)}, at(300), at(300)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := loopmgr.ReadyAt(tt.l, tt.parent); !got.Equal(tt.want) {
				t.Errorf("ReadyAt() = %v, want %v", got, tt.want)
			}
		})
	}
}
