package control_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// TestOpenStoreRedactsTokenShapes: a store the direct CLI opens keeps no
// token shape either (an answer written without a daemon).
func TestOpenStoreRedactsTokenShapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	st, err := control.OpenStore(nil, paths, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	l := loop.Loop{ID: "a1", Type: loop.Ralph, Status: loop.Pending, Iteration: 1, MaxIterations: 3, CreatedAt: now, UpdatedAt: now,
		Title: "t", Answer: "use sk-ant-" + strings.Repeat("k", 30)}
	if err := st.Update(func(tx *store.Tx) error { return tx.Create(l) }); err != nil {
		t.Fatal(err)
	}
	var got loop.Loop
	st.View(func(tx *store.Tx) error { got, err = tx.Get("a1"); return err })
	if got.Answer != "use [redacted api_key]" {
		t.Fatalf("stored answer %q, want the key redacted", got.Answer)
	}
}
