package ratelimit_test

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportsArePure keeps the package free of I/O (STYLE.md): no store, no
// processes, no network, no files, no logger, here or in the loopr packages
// it imports.
func TestImportsArePure(t *testing.T) {
	t.Parallel()
	const module = "github.com/loopr-dev/loopr/"
	forbidden := func(path string) bool {
		switch {
		case path == "os", path == "os/exec", path == "net", strings.HasPrefix(path, "net/"),
			path == "log", path == "log/slog", path == "go.etcd.io/bbolt", path == "io/ioutil":
			return true
		}
		return false
	}
	seen := map[string]bool{}
	var walk func(dir, from string)
	walk = func(dir, from string) {
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range p.Imports {
			if forbidden(imp) {
				t.Errorf("%s imports %s", from, imp)
			}
			if rest, ok := strings.CutPrefix(imp, module); ok && !seen[rest] {
				seen[rest] = true
				walk(filepath.Join("..", rest), imp)
			}
		}
	}
	walk(".", "ratelimit")
}
