package tui

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the architecture visible (STYLE.md): the dashboard talks
// to the daemon only through its Client, so it never links the store, the
// manager, the control service, the daemon or bbolt.
func TestImports(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{
			"github.com/loopr-dev/loopr/store", "github.com/loopr-dev/loopr/loopmgr",
			"github.com/loopr-dev/loopr/control", "github.com/loopr-dev/loopr/daemon",
			"go.etcd.io/bbolt",
		} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("tui depends on %s", dep)
			}
		}
	}
}
