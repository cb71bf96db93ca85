package preflight_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/preflight"
)

// onPath is a fake PATH holding exactly the given programs.
func onPath(progs ...string) func(string) (string, error) {
	return func(f string) (string, error) {
		if slices.Contains(progs, f) {
			return "/usr/bin/" + f, nil
		}
		return "", errors.New("not found")
	}
}

func workspace(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		name, body, _ := strings.Cut(f, "=") // "path=content"
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheck(t *testing.T) {
	t.Parallel()
	type problem struct{ Types, Key, What string }
	cases := []struct {
		name  string
		yaml  string
		files []string
		path  []string
		want  []problem
	}{
		{
			name: "defaults in a Go module with claude and go installed", files: []string{"go.mod"},
			path: []string{"claude", "go"},
		},
		{
			name: "agent missing: one problem for every type", files: []string{"go.mod"}, path: []string{"go"},
			want: []problem{{"all types", "agent.command", `agent "claude" is not on PATH`}},
		},
		{
			name: "a type's own agent profile", yaml: "agents:\n  cx: {preset: command, command: [\"codex\", \"exec\"]}\nloops:\n  ralph:\n    agent: cx\n",
			files: []string{"go.mod"}, path: []string{"claude", "go"},
			want: []problem{{"ralph", "agents.cx.command", `agent "codex" is not on PATH`}},
		},
		{
			name: "go test without a go.mod (a Python repository)", files: []string{"pyproject.toml"},
			path: []string{"claude", "go"},
			want: []problem{{"ralph", "loops.ralph.validate", `validate "go test ./..." needs a go.mod, and the workspace has none`}},
		},
		{
			name: "validate program missing", files: []string{"go.mod"}, path: []string{"claude"},
			want: []problem{{"ralph", "loops.ralph.validate", `validate "go test ./...": "go" is not on PATH`}},
		},
		{
			name:  "builtins, assignments and shell syntax are left alone",
			yaml:  "loops:\n  ralph:\n    validate: [\"cd sub && go test ./...\", \"test -f x\", \"$GO test\", \"CGO_ENABLED=0 make\", \"true\"]\n",
			files: []string{"Makefile"}, path: []string{"claude", "make"},
		},
		{
			name:  "npm, cargo and pytest need their project files",
			yaml:  "loops:\n  ralph:\n    validate: [\"npm test\", \"cargo test\", \"pytest -q\"]\n",
			path:  []string{"claude", "npm", "cargo", "pytest"},
			files: nil,
			want: []problem{
				{"ralph", "loops.ralph.validate", `validate "npm test" needs a package.json, and the workspace has none`},
				{"ralph", "loops.ralph.validate", `validate "cargo test" needs a Cargo.toml, and the workspace has none`},
				{"ralph", "loops.ralph.validate", `validate "pytest -q" needs a Python project (pyproject.toml, setup.cfg, setup.py, pytest.ini, tox.ini or tests/), and the workspace has none`},
			},
		},
		{
			name: "a relative script that is not there",
			yaml: "types:\n  review:\n    validate: [\"./ci/lint.sh\"]\nloops:\n  ralph:\n    validate: []\n",
			path: []string{"claude"},
			want: []problem{{"review", "types.review.validate", `validate "./ci/lint.sh": "./ci/lint.sh" does not exist`}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Parse([]byte(tc.yaml), "loopr.yml")
			if err != nil {
				t.Fatal(err)
			}
			ps := preflight.Check(c, preflight.Env{Workspace: workspace(t, tc.files...), LookPath: onPath(tc.path...)})
			var got []problem
			for _, p := range ps {
				got = append(got, problem{p.TypesText(c), p.Key, p.What})
				if p.Fix == "" {
					t.Errorf("problem %q has no fix", p.What)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckSuggestsTheDetectedCommand(t *testing.T) {
	t.Parallel()
	ps := preflight.Check(config.Default(), preflight.Env{Workspace: workspace(t, "setup.cfg"), LookPath: onPath("claude", "go")})
	if len(ps) != 1 {
		t.Fatalf("Check() = %+v, want one problem", ps)
	}
	if want := `change loops.ralph.validate in loopr.yml (this workspace has setup.cfg: "pytest" would suit it)`; ps[0].Fix != want {
		t.Errorf("Fix = %q, want %q", ps[0].Fix, want)
	}
}

func TestByType(t *testing.T) {
	t.Parallel()
	ps := []preflight.Problem{
		{Types: []string{"plan", "ralph"}, What: `agent "claude" is not on PATH`},
		{Types: []string{"ralph"}, What: "validate needs a go.mod"},
	}
	want := map[string]string{
		"plan":  `agent "claude" is not on PATH`,
		"ralph": `agent "claude" is not on PATH (and 1 more: run loopr config check)`,
	}
	if diff := cmp.Diff(want, preflight.ByType(ps)); diff != "" {
		t.Errorf("ByType() mismatch (-want +got):\n%s", diff)
	}
	if got := preflight.ByType(nil); got != nil {
		t.Errorf("ByType(nil) = %v, want nil", got)
	}
}

func TestDetect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files []string
		want  []preflight.Detection
	}{
		{"nothing", nil, nil},
		{"go", []string{"go.mod"}, []preflight.Detection{{Marker: "go.mod", Validate: "go test ./..."}}},
		{"python by setup.cfg", []string{"setup.cfg", "setup.py"}, []preflight.Detection{{Marker: "setup.cfg", Validate: "pytest"}}},
		{"rust", []string{"Cargo.toml"}, []preflight.Detection{{Marker: "Cargo.toml", Validate: "cargo test"}}},
		{"go with a web front end", []string{"package.json", "go.mod"},
			[]preflight.Detection{{Marker: "go.mod", Validate: "go test ./..."}, {Marker: "package.json", Validate: "npm test"}}},
		{"python, src layout, not installed", []string{"pyproject.toml=[project]\nname = \"shop\"\n", "src/shop/__init__.py", "tests/test_shop.py"},
			[]preflight.Detection{{Marker: "pyproject.toml", Validate: preflight.SrcLayoutPytest,
				Note: "the package is under src/ and not installed: its tests import it from there"}}},
		{"python, src layout, pytest's pythonpath set", []string{"pyproject.toml=[tool.pytest.ini_options]\npythonpath = [\"src\"]\n", "src/shop/__init__.py"},
			[]preflight.Detection{{Marker: "pyproject.toml", Validate: "pytest"}}},
		{"python, src layout, installed", []string{"pyproject.toml", "src/shop/__init__.py", "src/shop.egg-info/PKG-INFO"},
			[]preflight.Detection{{Marker: "pyproject.toml", Validate: "pytest"}}},
		{"python, flat layout", []string{"setup.py", "shop/__init__.py", "src/README"},
			[]preflight.Detection{{Marker: "setup.py", Validate: "pytest"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, preflight.DetectAll(workspace(t, tc.files...))); diff != "" {
				t.Errorf("DetectAll() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckRepositoryWithoutCommits: loops branch from HEAD, so a fresh
// `git init` with no commit is a problem for every type until the first
// commit (a real repository, real git).
func TestCheckRepositoryWithoutCommits(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := workspace(t, "go.mod")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	c := config.Default()
	env := preflight.Env{Workspace: dir, LookPath: func(f string) (string, error) {
		if f == "git" {
			return exec.LookPath(f)
		}
		return "/usr/bin/" + f, nil
	}}
	ps := preflight.Check(c, env)
	if len(ps) != 1 || ps[0].Key != "git.worktrees" || ps[0].TypesText(c) != "all types" ||
		ps[0].What != "the git repository has no commit yet, and loops branch from HEAD" {
		t.Fatalf("Check() without commits = %+v, want the one git problem for all types", ps)
	}
	c.Git.Worktrees = false
	if ps := preflight.Check(c, env); len(ps) != 0 {
		t.Errorf("Check() with git.worktrees false = %+v, want none", ps)
	}
	c.Git.Worktrees = true
	git("-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "--allow-empty", "-m", "first")
	if ps := preflight.Check(c, env); len(ps) != 0 {
		t.Errorf("Check() after the first commit = %+v, want none", ps)
	}
}

func TestCheckSandbox(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml string
		bwrap      error
		want       []string // TypesText, Key, What
	}{
		{"bwrap works", "agent:\n  sandbox: {runner: bwrap}\n", nil, nil},
		{"no sandbox: bwrap is not asked", "agent:\n  sandbox: {runner: none}\n", errors.New("must not be called"), nil},
		{"bwrap missing", "agent:\n  sandbox: {runner: bwrap}\n", errors.New("bubblewrap (bwrap) is not installed"),
			[]string{"all types", "agent.sandbox.runner", "sandbox.runner is bwrap, but bubblewrap (bwrap) is not installed"}},
		{"one profile's sandbox", "agents:\n  boxed: {sandbox: {runner: bwrap, network: none}}\nloops:\n  ralph: {agent: boxed}\n",
			errors.New("bwrap cannot create namespaces here: no permission"),
			[]string{"ralph", "agents.boxed.sandbox.runner", "sandbox.runner is bwrap, but bwrap cannot create namespaces here: no permission"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Parse([]byte(tc.yaml), "loopr.yml")
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			ps := preflight.Check(c, preflight.Env{Workspace: workspace(t, "go.mod"), LookPath: onPath("claude", "go"),
				Sandbox: func() error { calls++; return tc.bwrap }})
			var got []string
			for _, p := range ps {
				got = append(got, p.TypesText(c), p.Key, p.What)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check() mismatch (-want +got):\n%s", diff)
			}
			if calls > 1 {
				t.Errorf("bwrap checked %d times in one Check, want at most once", calls)
			}
		})
	}
}
