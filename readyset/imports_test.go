package readyset_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPure keeps readyset a pure data structure like the scheduler it feeds
// (STYLE.md rule 3): no files, processes, network, logger or store.
func TestPure(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		switch {
		case imp == "os", imp == "os/exec", imp == "log", imp == "log/slog", strings.HasPrefix(imp, "net"),
			strings.HasPrefix(imp, "go.etcd.io/bbolt"), imp == "github.com/loopr-dev/loopr/store",
			imp == "github.com/loopr-dev/loopr/config", imp == "github.com/loopr-dev/loopr/control":
			t.Errorf("readyset imports %s: it must stay free of I/O", imp)
		}
	}
}
