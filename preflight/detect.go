package preflight

import (
	"os"
	"path/filepath"
)

// Detection is one kind of project found in a workspace.
type Detection struct {
	Marker   string // the file that gave it away, e.g. "go.mod"
	Validate string // the validate command that suits it, e.g. "go test ./..."
}

// projects are the kinds Detect knows, in the order it reports them.
var projects = []struct {
	markers  []string
	validate string
}{
	{[]string{"go.mod"}, "go test ./..."},
	{[]string{"Cargo.toml"}, "cargo test"},
	{[]string{"package.json"}, "npm test"},
	{[]string{"pyproject.toml", "setup.cfg", "setup.py"}, "pytest"},
}

// DetectAll returns every kind of project whose marker file is in dir
// itself (go.mod, Cargo.toml, package.json, pyproject.toml, setup.cfg or
// setup.py), in that order.
func DetectAll(dir string) []Detection {
	var out []Detection
	for _, p := range projects {
		for _, m := range p.markers {
			if fi, err := os.Stat(filepath.Join(dir, m)); err == nil && fi.Mode().IsRegular() {
				out = append(out, Detection{Marker: m, Validate: p.validate})
				break
			}
		}
	}
	return out
}

// Detect returns the first kind of project DetectAll finds, or the zero
// Detection.
func Detect(dir string) Detection {
	if all := DetectAll(dir); len(all) > 0 {
		return all[0]
	}
	return Detection{}
}
