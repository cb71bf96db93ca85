package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// etcdHome is one daemon's home on a shared etcd store: its own Store
// client, Service and Manager, as on its own machine.
type etcdHome struct {
	t    *testing.T
	home string
	st   *store.Store
	svc  *control.Service
	mgr  *Manager
	stop context.CancelFunc
	done chan error
}

func newEtcdHome(t *testing.T, endpoint string, now func() time.Time, fn func(context.Context, runner.Job) runner.Result) *etcdHome {
	t.Helper()
	home := t.TempDir()
	st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{endpoint}, Prefix: "/loopr/art"}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	cfg.Git.Worktrees = false
	svc := control.New(st, workspace.Paths{Workspace: home, Home: home}, func() *config.Config { return cfg }, now)
	h := &etcdHome{t: t, home: home, st: st, svc: svc}
	h.mgr = New(Options{Service: svc, Runner: &fakeRunner{fn: fn}, Owner: "test " + filepath.Base(home)})
	t.Cleanup(func() { h.shutdown(); st.Close() })
	return h
}

func (h *etcdHome) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.mgr.Run(ctx) }()
}

func (h *etcdHome) shutdown() {
	if h.stop != nil {
		h.stop()
		if err := <-h.done; err != nil {
			h.t.Errorf("Run: %v", err)
		}
		h.stop = nil
	}
}

func (h *etcdHome) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(testslack.Scale(15 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *etcdHome) status(id string) loop.Status {
	l, err := h.svc.Get(id)
	if err != nil {
		h.t.Fatal(err)
	}
	return l.Status
}

// artifactGate returns the artifact_missing gate of `loopr why id`.
func artifactGate(t *testing.T, svc *control.Service, id string) api.Gate {
	t.Helper()
	w, err := svc.Why(id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range w.Gates {
		if g.Code == "artifact_missing" {
			return g
		}
	}
	t.Fatalf("why %s: no artifact_missing gate in %+v", id, w.Gates)
	return api.Gate{}
}

// storeCopies lists the artifact copies in the store.
func storeCopies(t *testing.T, st *store.Store) []string {
	t.Helper()
	keys, err := st.RawKeys("artifacts/")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestArtifactsThroughEtcd: two homes on one etcd store, as two machines.
// A plan passes in home A; its file is then gone (it was on A's machine).
// Home B approves it from the store's copy, B's scheduler finds the
// child's artifact present, B runs the child with the plan in its prompt
// and in $LOOPR_PARENT_ARTIFACT; with the copy gone too, the child waits
// with artifact_missing; retention deletes the copies with their loops.
func TestArtifactsThroughEtcd(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	const planText = "# Plan: P\n\n## Specs\n\n### Spec 1: S\n\nBuild the thing.\n"
	const specText = "# Spec: S\n\n## Phases\n\n### Phase 1: one\n\nDo it.\n"
	var clock sync.Mutex
	now := time.Now()
	clockNow := func() time.Time { clock.Lock(); defer clock.Unlock(); return now }

	a := newEtcdHome(t, srv.Endpoint(), clockNow, func(_ context.Context, j runner.Job) runner.Result {
		return writeArtifact(t, j, planText)
	})
	a.start()
	p, err := a.svc.Create(api.CreateRequest{Type: loop.Plan, Task: "P"})
	if err != nil {
		t.Fatal(err)
	}
	a.mgr.Wake()
	a.waitFor("the plan to await approval", func() bool { return a.status(p.ID) == loop.AwaitingApproval })
	a.shutdown()
	p, _ = a.svc.Get(p.ID)
	if !strings.HasPrefix(p.Artifact, a.home) {
		t.Fatalf("plan artifact %q: not under home A %s", p.Artifact, a.home)
	}
	if got := storeCopies(t, a.st); len(got) != 1 || got[0] != control.ArtifactKey(p.Artifact) {
		t.Fatalf("store copies after the pass = %v, want [%s]", got, control.ArtifactKey(p.Artifact))
	}
	// Machine A is gone with its files.
	if err := os.RemoveAll(filepath.Join(a.home, "loops")); err != nil {
		t.Fatal(err)
	}

	var specJob runner.Job
	var jobMu sync.Mutex
	b := newEtcdHome(t, srv.Endpoint(), clockNow, func(_ context.Context, j runner.Job) runner.Result {
		jobMu.Lock()
		specJob = j
		jobMu.Unlock()
		path := runner.ArtifactPath(j.Home, j.Loop)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(path, []byte(specText), 0o600); err != nil {
			t.Error(err)
		}
		return runner.Result{Outcome: runner.Passed, Artifact: path} // no Doc: no phases spawned
	})
	// Approve in B: read from the store's copy.
	text, err := b.svc.ReadArtifact(p.Artifact)
	if err != nil || string(text) != planText {
		t.Fatalf("B reads the plan's artifact = %q, %v; want the plan", text, err)
	}
	res, err := b.svc.Act(p.ID, api.ActionApprove, api.ActionRequest{})
	if err != nil {
		t.Fatalf("approve in home B: %v", err)
	}
	if res.Loop.Status != loop.Complete || len(res.Affected) != 1 {
		t.Fatalf("approve in home B: %s, %d children; want complete, 1 spec", res.Loop.Status, len(res.Affected))
	}
	specID := res.Affected[0]
	if g := artifactGate(t, b.svc, specID); !g.OK {
		t.Fatalf("B's scheduler: the spec's artifact gate fails with only the store's copy: %+v", g)
	}

	// A third home with neither the file nor (now) the copy: artifact_missing.
	c := newEtcdHome(t, srv.Endpoint(), clockNow, nil)
	if err := c.st.Update(func(tx *store.Tx) error { return tx.DeleteRaw(control.ArtifactKey(p.Artifact)) }); err != nil {
		t.Fatal(err)
	}
	if g := artifactGate(t, c.svc, specID); g.OK || !strings.Contains(g.Text, p.Artifact) {
		t.Fatalf("no file, no copy: the gate = %+v; want artifact_missing naming %s", g, p.Artifact)
	}
	if _, err := c.svc.ReadArtifact(p.Artifact); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "store keeps no copy") {
		t.Fatalf("no file, no copy: ReadArtifact err = %v; want not-exist saying the store keeps no copy", err)
	}
	// The copy comes back (as A had put it): B runs the spec.
	if err := c.st.Update(func(tx *store.Tx) error {
		return tx.PutRaw(control.ArtifactKey(p.Artifact), []byte(planText), 0)
	}); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.mgr.Wake()
	b.waitFor("the spec to complete in home B", func() bool { return b.status(specID) == loop.Complete })
	b.shutdown()
	jobMu.Lock()
	j := specJob
	jobMu.Unlock()
	if j.ParentArtifactText != planText {
		t.Errorf("spec job's parent artifact text = %q, want the plan", j.ParentArtifactText)
	}
	if !strings.HasPrefix(j.ParentArtifact, b.home) {
		t.Errorf("spec job's $LOOPR_PARENT_ARTIFACT = %q: not under home B %s", j.ParentArtifact, b.home)
	} else if got, err := os.ReadFile(j.ParentArtifact); err != nil || string(got) != planText {
		t.Errorf("B's local copy of the plan %s = %q, %v", j.ParentArtifact, got, err)
	}
	spec, _ := b.svc.Get(specID)
	if got, err := c.svc.ReadArtifact(spec.Artifact); err != nil || string(got) != specText {
		t.Errorf("the spec passed in B; C reads %q, %v", got, err)
	}
	if got := storeCopies(t, b.st); len(got) != 2 {
		t.Errorf("store copies = %v, want the plan's and the spec's", got)
	}

	// Retention, 31 days later: the tree goes, and its copies with it.
	clock.Lock()
	now = now.Add(31 * 24 * time.Hour)
	clock.Unlock()
	gc, err := b.svc.GC(api.GCRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(gc.Removed) != 2 {
		t.Fatalf("gc removed %d loops, want 2 (plan and spec): %+v", len(gc.Removed), gc.Removed)
	}
	if got := storeCopies(t, b.st); len(got) != 0 {
		t.Errorf("store copies after retention = %v, want none", got)
	}
}

// TestArtifactsOnBboltStayLocal: on the bbolt file nothing goes into the
// store; a missing file is missing (artifact_missing, a not-exist error).
func TestArtifactsOnBboltStayLocal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(_ context.Context, j runner.Job) runner.Result {
		return writeArtifact(t, j, "# Plan: P\n\n## Specs\n\n### Spec 1: S\n\nBody.\n")
	})
	h.start()
	p := h.create(api.CreateRequest{Type: loop.Plan, Task: "P"})
	h.waitFor("awaiting approval", func() bool { return h.status(p.ID) == loop.AwaitingApproval })
	res, err := h.svc.Act(p.ID, api.ActionApprove, api.ActionRequest{})
	if err != nil || len(res.Affected) != 1 {
		t.Fatalf("approve: %v, %+v", err, res)
	}
	h.shutdown()
	p = h.get(p.ID)
	if keys, err := h.st.RawKeys("artifacts/"); err != nil || len(keys) != 0 {
		t.Fatalf("bbolt RawKeys = %v, %v; want none", keys, err)
	}
	if err := h.st.Update(func(tx *store.Tx) error {
		if _, _, ok := tx.Raw(control.ArtifactKey(p.Artifact)); ok {
			t.Error("bbolt: Raw found an artifact copy")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p.Artifact); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.ReadArtifact(p.Artifact); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadArtifact of a removed file on bbolt = %v, want not exist", err)
	}
	if g := artifactGate(t, h.svc, res.Affected[0]); g.OK {
		t.Fatalf("bbolt, file removed: gate %+v, want artifact_missing", g)
	}
}

// bigPhase is a phase artifact of about size bytes in tasks of 10 KiB.
func bigPhase(size int) string {
	var b strings.Builder
	b.WriteString("# Phase: big\n\n## Tasks\n\n")
	body := strings.Repeat("Do a part of the big thing, exactly as written here.\n", 10240/53)
	for i := 1; b.Len() < size; i++ {
		fmt.Fprintf(&b, "### Task %d: part %d\n\n%s\n", i, i, body)
	}
	return b.String()
}

// TestBigArtifactOnEtcd: what docs/several-machines.md says of artifact
// sizes. The pass of a phase records its artifact and its children (each
// task's text) in one transaction, about twice the artifact's size: with
// etcd's default --max-request-bytes (1.5 MiB) a 900 KiB artifact does not
// fit, nor does one of 1020 KiB (refused by gRPC, not etcd) — nothing of
// the pass is recorded, the iteration is spent with a reason naming the
// flag; with --max-request-bytes 10485760 it passes, its copy in the store.
func TestBigArtifactOnEtcd(t *testing.T) {
	for _, c := range []struct {
		name  string
		size  int
		limit uint
		pass  bool
	}{
		{"900 KiB, default 1.5 MiB", 900 << 10, 0, false},   // etcd refuses it
		{"1020 KiB, default 1.5 MiB", 1020 << 10, 0, false}, // gRPC refuses it (over the limit + 512 KiB)
		{"1020 KiB, 10 MiB", 1020 << 10, 10 << 20, true},
	} {
		text := bigPhase(c.size)
		t.Run(c.name, func(t *testing.T) {
			srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, MaxRequestBytes: c.limit})
			h := newEtcdHome(t, srv.Endpoint(), time.Now, func(_ context.Context, j runner.Job) runner.Result {
				if j.Loop.Type != loop.Phase {
					return runner.Result{Outcome: runner.Passed}
				}
				return writeArtifact(t, j, text)
			})
			p, err := h.svc.Create(api.CreateRequest{Type: loop.Phase, Task: "big", MaxIterations: 1})
			if err != nil {
				t.Fatal(err)
			}
			h.start()
			h.mgr.Wake()
			h.waitFor("the phase to pass or fail", func() bool {
				l, _ := h.svc.Get(p.ID)
				return l.Status == loop.Failed || l.Status == loop.Complete || l.Status == loop.Running && len(storeCopies(t, h.st)) > 0
			})
			h.shutdown()
			l, _ := h.svc.Get(p.ID)
			kids, _ := h.st.List(store.Filter{Parent: p.ID})
			copies := storeCopies(t, h.st)
			t.Logf("%s (%d bytes): %s, %d children, %d store copies; reason %q",
				c.name, len(text), l.Status, len(kids), len(copies), l.Reason)
			if c.pass {
				if len(kids) == 0 || len(copies) != 1 {
					t.Fatalf("with a 10 MiB limit: %s, %d children, %d copies; want the pass recorded", l.Status, len(kids), len(copies))
				}
				return
			}
			if l.Status != loop.Failed || len(kids) != 0 || len(copies) != 0 || !strings.Contains(l.Reason, "--max-request-bytes") {
				t.Fatalf("over the default limit: %s, %d children, %d copies, reason %q; want failed naming --max-request-bytes, nothing recorded",
					l.Status, len(kids), len(copies), l.Reason)
			}
		})
	}
}
