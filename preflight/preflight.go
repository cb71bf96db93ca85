// Package preflight finds, before any iteration runs, what would make every
// iteration of a loop type fail in this workspace: an agent binary that is
// not on PATH, a sandbox (runner: bwrap) that bubblewrap cannot make here,
// a validate command whose program is missing, a validate
// command that cannot work here (`go test ./...` without a go.mod, `npm
// test` without a package.json, ...), or, with git worktrees, a repository
// without a commit to branch from.
//
// `loopr config check` prints the problems and exits 1; the daemon checks
// at start, on every configuration reload and now and then (an installed
// binary clears its problem), and passes the result to the scheduler
// (scheduler.Snapshot.Preflight): loops of an affected type wait with reason
// preflight instead of spending iterations.
//
// Detect is the other half: what a workspace looks like (go.mod,
// package.json, ...) and the validate command that suits it, for `loopr
// init` and for the problems' advice.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/sandbox"
)

// sandboxFix is what to do when bubblewrap cannot run: on macOS there is
// none (RELIABILITY.md).
const sandboxFix = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; it needs Linux with user namespaces, or root), or set sandbox.runner: none"

// Problem is one thing that would fail every iteration of some loop types.
type Problem struct {
	Types []string `json:"types"` // the loop types affected, in config.Types order
	Key   string   `json:"key"`   // the configuration key at fault, e.g. loops.ralph.validate
	What  string   `json:"what"`  // e.g. `agent "claude" is not on PATH`
	Fix   string   `json:"fix"`   // what to do about it
}

// Env is what Check looks at besides the configuration.
type Env struct {
	Workspace string // the directory loops work in (validate commands run there)
	// LookPath finds a program as exec.LookPath does; nil: exec.LookPath.
	LookPath func(file string) (string, error)
	// Sandbox checks that bubblewrap works here, for profiles with
	// sandbox.runner bwrap; nil: sandbox.Check.
	Sandbox func() error
}

func (e Env) lookPath(file string) error {
	if e.LookPath != nil {
		_, err := e.LookPath(file)
		return err
	}
	_, err := exec.LookPath(file)
	return err
}

// Check returns the problems of c in env: for each loop type, its agent
// (argv[0] of agent.command, or of loops.<type>.agent), its sandbox
// (bubblewrap must work when sandbox.runner is bwrap) and each validate
// command. A problem shared by several types (the inherited agent, the
// same validate command) is reported once, with all of them.
func Check(c *config.Config, env Env) []Problem {
	var out []Problem
	index := map[string]int{} // What → position in out
	add := func(t string, p Problem) {
		if i, ok := index[p.What]; ok {
			out[i].Types = append(out[i].Types, t)
			return
		}
		p.Types = []string{t}
		index[p.What] = len(out)
		out = append(out, p)
	}
	var sandboxDone bool
	var sandboxFailed error
	sandboxErr := func() error { // once per Check: it starts a process
		if !sandboxDone {
			sandboxDone = true
			check := env.Sandbox
			if check == nil {
				check = sandbox.Check
			}
			sandboxFailed = check()
		}
		return sandboxFailed
	}
	for _, t := range c.Types() {
		ls := c.Loop(t)
		if a, ok := c.Profile(ls.Agent); ok {
			// The agent profile the type runs on ("" = agent:).
			key := "agent.command"
			if ls.Agent != "" && ls.Agent != config.DefaultProfile {
				key = "agents." + ls.Agent + ".command"
			}
			if a.Sandbox.RunnerOrDefault() == config.SandboxBwrap {
				if err := sandboxErr(); err != nil {
					add(t, Problem{Key: strings.TrimSuffix(key, "command") + "sandbox.runner", What: "sandbox.runner is bwrap, but " + err.Error(),
						Fix: sandboxFix})
				}
			}
			if argv := a.Argv(); len(argv) > 0 {
				if p, ok := checkProgram(argv[0], env); !ok {
					add(t, Problem{Key: key, What: fmt.Sprintf("agent %q %s", argv[0], p),
						Fix: "install it or put it on PATH, or set " + key + " in loopr.yml"})
				}
			}
		}
		key := typeKey(c, t) + ".validate"
		for _, cmd := range ls.Validate {
			if p, ok := checkValidate(cmd, key, env); !ok {
				add(t, p)
			}
		}
	}
	if c.Git.Worktrees && noCommits(env) {
		// Every loop gets a worktree branched from HEAD: none can start.
		for _, t := range c.Types() {
			add(t, Problem{Key: "git.worktrees", What: "the git repository has no commit yet, and loops branch from HEAD",
				Fix: "make a first commit (git commit --allow-empty -m init), or set git.worktrees: false"})
		}
	}
	return out
}

// gitTimeout bounds the one git command a check runs: a hung git (a file
// system that does not answer) must not hold the scheduler's tick forever.
const gitTimeout = 30 * time.Second

// noCommits reports whether the workspace is in a git repository (git on
// PATH, a .git above it) whose HEAD names no commit yet. A git that gives
// no answer within gitTimeout is no finding.
func noCommits(env Env) bool {
	if env.lookPath("git") != nil || !InRepo(env.Workspace) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	cmd.Dir = env.Workspace
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 1
}

// InRepo reports whether dir or a parent holds a .git entry: whether git
// would find a repository there.
func InRepo(dir string) bool {
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// ByType returns, per affected loop type, the text of its reason preflight:
// the first problem's, plus how many more there are.
func ByType(ps []Problem) map[string]string {
	if len(ps) == 0 {
		return nil
	}
	count := map[string]int{}
	first := map[string]string{}
	for _, p := range ps {
		for _, t := range p.Types {
			if count[t]++; count[t] == 1 {
				first[t] = p.What
			}
		}
	}
	out := make(map[string]string, len(first))
	for t, w := range first {
		if n := count[t] - 1; n > 0 {
			w += fmt.Sprintf(" (and %d more: run loopr config check)", n)
		}
		out[t] = w
	}
	return out
}

// TypesText names the types of p for people: "all types" when they are
// every type of c, else the names joined by ','.
func (p Problem) TypesText(c *config.Config) string {
	if all := c.Types(); len(all) > 1 && len(p.Types) == len(all) {
		return "all types"
	}
	return strings.Join(p.Types, ",")
}

// typeKey is where a type's settings live: loops.<type> or types.<type>.
func typeKey(c *config.Config, t string) string {
	if _, ok := c.UserTypes[t]; ok {
		return "types." + t
	}
	return "loops." + t
}

// checkProgram reports whether prog can run: a path must be an executable
// file (relative paths from the workspace), a name must be on PATH.
func checkProgram(prog string, env Env) (problem string, ok bool) {
	if strings.ContainsRune(prog, '/') {
		path := prog
		if !filepath.IsAbs(path) {
			path = filepath.Join(env.Workspace, path)
		}
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			return "does not exist", false
		case fi.IsDir() || fi.Mode()&0o111 == 0:
			return "is not an executable file", false
		}
		return "", true
	}
	if err := env.lookPath(prog); err != nil {
		return "is not on PATH", false
	}
	return "", true
}

// shellWords are the builtins and keywords of sh: a command starting with
// one runs whatever PATH holds, so its first word says nothing.
var shellWords = []string{
	"!", ".", ":", "[", "[[", "{", "alias", "bg", "break", "case", "cd", "command", "continue", "echo",
	"eval", "exec", "exit", "export", "false", "fc", "fg", "for", "function", "getopts", "hash", "if",
	"jobs", "kill", "local", "printf", "pwd", "read", "readonly", "return", "set", "shift", "source",
	"test", "times", "trap", "true", "type", "ulimit", "umask", "unalias", "unset", "until", "wait", "while",
}

// plainWord reports whether w is a word the shell takes literally.
func plainWord(w string) bool {
	return w != "" && !strings.ContainsAny(w, "$`'\"\\*?[]{}()<>|&;~#=")
}

// checkValidate looks at one validate command (run with sh -c): its first
// word, when plain, must be a program that exists, and a build tool must
// find its project file in the workspace.
func checkValidate(cmd, key string, env Env) (Problem, bool) {
	words := strings.Fields(cmd)
	for len(words) > 0 && isAssignment(words[0]) { // FOO=1 go test
		words = words[1:]
	}
	if len(words) == 0 || !plainWord(words[0]) || slices.Contains(shellWords, words[0]) {
		return Problem{}, true
	}
	prog := words[0]
	if p, ok := checkProgram(prog, env); !ok {
		return Problem{Key: key, What: fmt.Sprintf("validate %q: %q %s", cmd, prog, p),
			Fix: "install it or put it on PATH, or change " + key + " in loopr.yml"}, false
	}
	need := needs(words)
	if need == nil || need.found(env.Workspace) {
		return Problem{}, true
	}
	fix := "change " + key + " in loopr.yml"
	if d := Detect(env.Workspace); d.Validate != "" {
		fix += fmt.Sprintf(" (this workspace has %s: %q would suit it)", d.Marker, d.Validate)
	}
	return Problem{Key: key, What: fmt.Sprintf("validate %q needs %s, and the workspace has none", cmd, need.what), Fix: fix}, false
}

func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// need is the project file a build tool looks for.
type need struct {
	what    string   // e.g. "a go.mod"
	files   []string // any of these
	parents bool     // the tool also looks in the parent directories
}

func (n *need) found(dir string) bool {
	for {
		for _, f := range n.files {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				return true
			}
		}
		parent := filepath.Dir(dir)
		if !n.parents || parent == dir {
			return false
		}
		dir = parent
	}
}

// needs returns what the command's tool needs in the workspace, nil when
// nothing is known.
func needs(words []string) *need {
	sub := ""
	if len(words) > 1 {
		sub = words[1]
	}
	switch filepath.Base(words[0]) {
	case "go":
		switch sub {
		case "test", "build", "vet", "run", "install", "generate", "list":
			return &need{what: "a go.mod", files: []string{"go.mod", "go.work"}, parents: true}
		}
	case "npm", "yarn", "pnpm":
		switch sub {
		case "test", "t", "run", "run-script", "ci", "install", "i", "build", "lint":
			return &need{what: "a package.json", files: []string{"package.json"}, parents: true}
		}
	case "cargo":
		switch sub {
		case "test", "t", "build", "b", "check", "c", "clippy", "run", "r", "fmt", "bench":
			return &need{what: "a Cargo.toml", files: []string{"Cargo.toml"}, parents: true}
		}
	case "python", "python3":
		if len(words) < 3 || words[1] != "-m" || words[2] != "pytest" {
			return nil
		}
		fallthrough
	case "pytest", "py.test":
		return &need{what: "a Python project (pyproject.toml, setup.cfg, setup.py, pytest.ini, tox.ini or tests/)",
			files: []string{"pyproject.toml", "setup.cfg", "setup.py", "pytest.ini", "tox.ini", "conftest.py", "tests", "test"}}
	case "make":
		if !slices.ContainsFunc(words[1:], func(w string) bool {
			return w == "-f" || w == "-C" || strings.HasPrefix(w, "--file") || strings.HasPrefix(w, "--directory")
		}) {
			return &need{what: "a Makefile", files: []string{"GNUmakefile", "makefile", "Makefile"}}
		}
	}
	return nil
}
