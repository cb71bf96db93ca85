package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
)

// TestReadmeConfigReference keeps the README's configuration reference equal
// to what `loopr init` writes.
func TestReadmeConfigReference(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(config.Template())+"```") {
		t.Error("README.md's configuration reference differs from config.Template(): update it")
	}
	for _, cmd := range []string{"go run ./cmd/loopr demo", "go test -race ./..."} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README.md lacks the quick-start command %q", cmd)
		}
	}
}

// TestInitWritesTemplate: `loopr init` in a directory with no project file
// writes the template and `loopr config check` accepts it (and reports, exit
// 1, that its default `go test ./...` cannot work without a go.mod); a
// second init refuses to overwrite.
func TestInitWritesTemplate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok(t, dir, "init")
	data, err := os.ReadFile(dir + "/loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(config.Template()) {
		t.Error("loopr init did not write config.Template()")
	}
	if r := run(t, dir, "", "config", "check"); r.code != 1 || !strings.Contains(r.stdout, "loopr.yml: ok") ||
		!strings.Contains(r.stdout, `validate "go test ./..." needs a go.mod, and the workspace has none`) {
		t.Errorf("config check: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, dir, "", "init"); r.code != 2 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second init: exit %d %q", r.code, r.stderr)
	}
}
