package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// TestShowArtifactFromEtcd: `loopr show --artifact` in a workspace on an
// etcd store prints an artifact accepted on another machine (its file is
// not here) from the store's copy; without a copy it fails naming the
// file and saying the store keeps none.
func TestShowArtifactFromEtcd(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	dir := t.TempDir()
	yml := "agent:\n  command: [\"true\"]\ngit:\n  worktrees: false\nstorage:\n  disk_quota_min_gb: 0\n" +
		"store:\n  backend: etcd\n  etcd:\n    endpoints: [\"" + srv.Endpoint() + "\"]\n    prefix: /loopr/show\n"
	cfgPath := filepath.Join(dir, "loopr.yml")
	if err := os.WriteFile(cfgPath, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr"), Config: cfgPath, ConfigSet: true}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := control.OpenStore(cfg, p, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := control.New(st, p, func() *config.Config { return cfg }, time.Now)
	mk := func(path string) string {
		l, err := svc.Create(api.CreateRequest{Type: loop.Plan, Task: "P"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Update(func(tx *store.Tx) error {
			cur, err := tx.Get(l.ID)
			if err != nil {
				return err
			}
			cur.Artifact = path
			return tx.Put(cur)
		}); err != nil {
			t.Fatal(err)
		}
		return l.ID
	}
	const text = "# Plan: elsewhere\n\n## Specs\n\n### Spec 1: S\n\nMade on machine A.\n"
	there := "/srv/machine-a/.loopr/loops/X/accepted/001-plan.md"
	id := mk(there)
	if err := st.Update(func(tx *store.Tx) error { return tx.PutRaw(control.ArtifactKey(there), []byte(text), 0) }); err != nil {
		t.Fatal(err)
	}
	code, out, errs := in(p, "show", id, "--artifact")
	if code != 0 || out != text {
		t.Fatalf("show --artifact = exit %d, %q, %s; want the store's copy", code, out, errs)
	}
	code, out, errs = in(p, "show", id)
	if code != 0 || !strings.Contains(out, "artifact ("+there+"):") || !strings.Contains(out, "Made on machine A.") {
		t.Fatalf("show = exit %d:\n%s%s\nwant the artifact from the store's copy", code, out, errs)
	}

	gone := "/srv/machine-a/.loopr/loops/Y/accepted/001-plan.md"
	id2 := mk(gone)
	code, out, errs = in(p, "show", id2, "--artifact")
	if code == 0 || !strings.Contains(errs, filepath.Dir(filepath.Dir(gone))) || !strings.Contains(errs, "the store keeps no copy") {
		t.Fatalf("show --artifact without a copy = exit %d, %q, %q; want an error naming the file and the missing copy", code, out, errs)
	}
}
