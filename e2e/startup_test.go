package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/store"
)

// TestCommandWaitsForStartingDaemon: a command run while a daemon holds the
// store but does not answer yet (it is still starting) waits for the
// socket instead of failing with "store is in use".
func TestCommandWaitsForStartingDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte("storage: {disk_quota_min_gb: 0}\ngit: {worktrees: false}\n"), 0o644)
	home := filepath.Join(dir, ".loopr")
	// Stand in for the starting daemon: hold the store's lock.
	st, err := store.Open(filepath.Join(home, "loopr.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command(bin, "status", "--json")
	list.Dir = dir
	var out, errb bytes.Buffer
	list.Stdout, list.Stderr = &out, &errb
	if err := list.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the 1 s store lock timeout
	st.Close()
	ok(t, dir, "daemon", "--detach")
	t.Cleanup(func() { stopDaemon(t, dir) })
	if err := list.Wait(); err != nil {
		t.Fatalf("status while the daemon started: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), `"daemon": true`) {
		t.Errorf("status did not come from the daemon: %s", out.String())
	}
}
