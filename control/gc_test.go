package control_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newService returns a Service over a fresh store whose clock reads now,
// with retention.days = days.
func newService(t *testing.T, days int) *control.Service {
	t.Helper()
	cfg := config.Default()
	cfg.Retention.Days = days
	return serviceWith(t, func() *config.Config { return cfg })
}

// serviceWith is a Service over a fresh store in a temporary workspace,
// with the configuration cfg returns, at now.
func serviceWith(t *testing.T, cfg func() *config.Config) *control.Service {
	t.Helper()
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	st, err := store.Open(paths.DB(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return control.New(st, paths, cfg, func() time.Time { return now })
}

// rec is a loop that finished ago before now (0: not finished).
func rec(id, parent string, st loop.Status, ago time.Duration) loop.Loop {
	at := now.Add(-ago)
	l := loop.Loop{ID: id, Type: loop.Ralph, Status: st, Parent: parent, Title: id, Iteration: 1, MaxIterations: 3,
		CreatedAt: at.Add(-time.Hour), UpdatedAt: at}
	if parent != "" {
		l.Depth = 1
	}
	if st.Terminal() {
		l.FinishedAt = at
	}
	return l
}

const day = 24 * time.Hour

func TestGC(t *testing.T) {
	t.Parallel()
	loops := []loop.Loop{
		rec("oldc", "", loop.Complete, 40*day),          // goes
		rec("oldf", "", loop.Failed, 31*day),            // goes: failed counts as terminal
		rec("olde", "", loop.Expired, 31*day),           // goes
		rec("newc", "", loop.Complete, 29*day),          // too recent
		rec("live", "", loop.Pending, 90*day),           // not terminal
		rec("tree", "", loop.Complete, 60*day),          // goes with its whole subtree
		rec("tree-1", "tree", loop.Cancelled, 50*day),   // goes
		rec("tree-2", "tree", loop.Invalidated, 45*day), // goes
		rec("busy", "", loop.Complete, 60*day),          // kept: a child is live
		rec("busy-1", "busy", loop.Complete, 50*day),    // goes: old and childless
		rec("busy-2", "busy", loop.Running, 0),          // live
		rec("fresh", "", loop.Complete, 60*day),         // kept: a child finished recently
		rec("fresh-1", "fresh", loop.Complete, 2*day),
		rec("cut", "", loop.Cancelled, 30*day+time.Second), // just past the cutoff: goes
	}
	tests := []struct {
		name        string
		days        int
		req         api.GCRequest
		wantRemoved []string
		wantKept    int
	}{
		{"retention 30 days", 30, api.GCRequest{},
			[]string{"busy-1", "cut", "oldc", "olde", "oldf", "tree", "tree-1", "tree-2"}, 2},
		{"dry run", 30, api.GCRequest{DryRun: true},
			[]string{"busy-1", "cut", "oldc", "olde", "oldf", "tree", "tree-1", "tree-2"}, 2},
		{"override days", 30, api.GCRequest{Days: 35},
			[]string{"busy-1", "oldc", "tree", "tree-1", "tree-2"}, 2},
		{"keep forever", 0, api.GCRequest{}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, tt.days)
			if _, err := svc.Import(loops); err != nil {
				t.Fatal(err)
			}
			for _, l := range loops {
				dir := svc.Paths.LoopDir(l.ID)
				if err := os.MkdirAll(filepath.Join(dir, "iterations", "001"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "iterations", "001", "agent.log"), []byte("12345"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			res, err := svc.GC(tt.req)
			if err != nil {
				t.Fatalf("GC() = %v", err)
			}
			var removed []string
			for _, g := range res.Removed {
				removed = append(removed, g.ID)
			}
			if diff := cmp.Diff(tt.wantRemoved, removed); diff != "" {
				t.Errorf("GC() removed mismatch (-want +got):\n%s", diff)
			}
			if res.Kept != tt.wantKept || res.Dirs != len(tt.wantRemoved) || res.Bytes != int64(5*len(tt.wantRemoved)) {
				t.Errorf("GC() kept %d dirs %d bytes %d; want %d %d %d", res.Kept, res.Dirs, res.Bytes,
					tt.wantKept, len(tt.wantRemoved), 5*len(tt.wantRemoved))
			}
			left, err := svc.List(api.ListRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range loops {
				gone := slices.Contains(removed, l.ID) && !tt.req.DryRun
				stored := slices.ContainsFunc(left, func(x loop.Loop) bool { return x.ID == l.ID })
				_, statErr := os.Stat(svc.Paths.LoopDir(l.ID))
				if stored == gone || (statErr == nil) == gone {
					t.Errorf("loop %s: stored %v, dir kept %v; want removed %v", l.ID, stored, statErr == nil, gone)
				}
			}
			if !tt.req.DryRun && len(removed) > 0 {
				err := svc.Store.View(func(tx *store.Tx) error {
					evs, err := tx.Events(removed[0])
					if len(evs) != 0 {
						t.Errorf("events of removed loop %s remain: %v", removed[0], evs)
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestGCStrayDirs: a directory no loop owns (a crash between the delete
// and the removal) goes once it is older than the cutoff.
func TestGCStrayDirs(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	old, recent := svc.Paths.LoopDir("strayold"), svc.Paths.LoopDir("strayrecent")
	for _, d := range []string{old, recent, filepath.Join(svc.Paths.Loops(), "not an id")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	longAgo := now.Add(-31 * day)
	if err := os.Chtimes(old, longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(svc.Paths.Loops(), "not an id"), longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	res, err := svc.GC(api.GCRequest{})
	if err != nil || res.Dirs != 1 {
		t.Fatalf("GC() = dirs %d, %v; want 1", res.Dirs, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old stray dir: %v; want removed", err)
	}
	for _, d := range []string{recent, filepath.Join(svc.Paths.Loops(), "not an id")} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v; want kept", d, err)
		}
	}
}

func TestGCRefusesNegativeDays(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	if _, err := svc.GC(api.GCRequest{Days: -1}); !control.IsUsage(err) {
		t.Errorf("GC(days -1) = %v; want a usage error", err)
	}
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 512: "512 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := control.HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
