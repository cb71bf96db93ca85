package preflight

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// Detection is one kind of project found in a workspace.
type Detection struct {
	Marker   string // the file that gave it away, e.g. "go.mod"
	Validate string // the validate command that suits it, e.g. "go test ./..."
	Note     string // why Validate is not the kind's usual command, "" when it is
}

// projects are the kinds Detect knows, in the order it reports them; tune,
// when set, adjusts the detection to what else is in the directory.
var projects = []struct {
	markers  []string
	validate string
	tune     func(dir string, d *Detection)
}{
	{[]string{"go.mod"}, "go test ./...", nil},
	{[]string{"Cargo.toml"}, "cargo test", nil},
	{[]string{"package.json"}, "npm test", nil},
	{[]string{"pyproject.toml", "setup.cfg", "setup.py"}, "pytest", tunePython},
}

// SrcLayoutPytest is the validate command of a Python project with a src/
// layout that pytest cannot import from as it is: the package is not
// installed and no pytest setting puts src/ on the path.
const SrcLayoutPytest = "PYTHONPATH=src python3 -m pytest"

// tunePython makes a src/-layout project's tests find its package: with
// the package under src/, not installed in the project (no src/*.egg-info)
// and no pytest `pythonpath` setting, plain pytest fails every test on
// the import.
func tunePython(dir string, d *Detection) {
	if !srcLayout(dir) || installed(dir) || pytestPythonpath(dir) {
		return
	}
	d.Validate = SrcLayoutPytest
	d.Note = "the package is under src/ and not installed: its tests import it from there"
}

// srcLayout reports whether dir/src holds a Python package or module.
func srcLayout(dir string) bool {
	pkgs, _ := filepath.Glob(filepath.Join(dir, "src", "*", "__init__.py"))
	mods, _ := filepath.Glob(filepath.Join(dir, "src", "*.py"))
	return len(pkgs)+len(mods) > 0
}

// installed reports whether a src/ package was installed from dir (pip
// install -e leaves src/<name>.egg-info behind).
func installed(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "src", "*.egg-info"))
	return len(m) > 0
}

// pytestPythonpath reports whether pytest's configuration in dir sets
// `pythonpath` (pytest 7 and later put those directories on sys.path).
func pytestPythonpath(dir string) bool {
	for _, name := range []string{"pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		found := false
		for sc.Scan() {
			if strings.HasPrefix(strings.TrimSpace(sc.Text()), "pythonpath") {
				found = true
				break
			}
		}
		f.Close()
		if found {
			return true
		}
	}
	return false
}

// DetectAll returns every kind of project whose marker file is in dir
// itself (go.mod, Cargo.toml, package.json, pyproject.toml, setup.cfg or
// setup.py), in that order.
func DetectAll(dir string) []Detection {
	var out []Detection
	for _, p := range projects {
		for _, m := range p.markers {
			if fi, err := os.Stat(filepath.Join(dir, m)); err == nil && fi.Mode().IsRegular() {
				d := Detection{Marker: m, Validate: p.validate}
				if p.tune != nil {
					p.tune(dir, &d)
				}
				out = append(out, d)
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
