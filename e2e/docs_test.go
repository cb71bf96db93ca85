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

// TestInitWritesTemplate: `loopr init` writes the template and
// `loopr config check` accepts it; a second init refuses to overwrite.
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
	if out := ok(t, dir, "config", "check"); !strings.Contains(out, "ok") {
		t.Errorf("config check: %q", out)
	}
	if r := run(t, dir, "", "init"); r.code != 2 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second init: exit %d %q", r.code, r.stderr)
	}
}
