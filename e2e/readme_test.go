package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// readmeBlock returns the command lines of the first ```sh block after the
// README heading, without their comments.
func readmeBlock(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no heading %q", heading)
	}
	text = text[i:]
	start := strings.Index(text, "```sh\n")
	if start < 0 {
		t.Fatalf("README.md: no ```sh block under %q", heading)
	}
	text = text[start+len("```sh\n"):]
	text = text[:strings.Index(text, "```")]
	var cmds []string
	for _, line := range strings.Split(text, "\n") {
		if c := strings.TrimSpace(stripComment(line)); c != "" {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// stripComment drops a shell comment: a # outside quotes after a blank.
func stripComment(line string) string {
	quote := rune(0)
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// shellWords splits a command line as sh would for the simple lines of the
// README: words, and double- or single-quoted strings.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestReadmeQuickStart walks the README's quick start: the demo, exactly as
// written, from the repository's root. Its second line runs this very test
// suite, so it is checked to be what `make test` runs rather than run from
// inside itself.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the demo")
	}
	cmds := readmeBlock(t, "## Quick start")
	want := []string{"go run ./cmd/loopr demo", "go test -race -timeout 30m ./..."}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the quick start changed: %q; update this walk-through", cmds)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil || !regexp.MustCompile(`(?m)^test:\n\t\$\(GO\) test -race -timeout 30m \$\(PKGS\)$`).Match(makefile) ||
		!regexp.MustCompile(`(?m)^PKGS\s*[:?]?=\s*\./\.\.\.$`).Match(makefile) {
		t.Errorf("the Makefile's test target is not `%s` (%v)", want[1], err)
	}
	// CI runs exactly the README's command, once, as its last go test.
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, line := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "go test") {
			runs = append(runs, strings.TrimSpace(line))
		}
	}
	if len(runs) != 1 || runs[0] != want[1] {
		t.Errorf(".ci/run runs %q, want exactly the README's %q", runs, want[1])
	}

	// go run ./cmd/loopr demo: stdout is not a terminal here, so it prints
	// progress lines; its workspace goes to a temporary directory.
	cmd := exec.Command("go", "run", "./cmd/loopr", "demo")
	cmd.Dir = ".."
	tmp := t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "LOOPR_HOME=", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./cmd/loopr demo: %v\n%s", err, out)
	}
	for _, want := range []string{"loopr demo finished in", "TYPE   LOOPS", "ralph", "file(s) merged onto branch", "is removed (loopr demo --keep keeps it)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "loopr-demo-*")); len(left) > 0 {
		t.Errorf("the demo left its workspace behind: %v", left)
	}
}

// readmeAgent is the scripted agent that stands in for an LLM in the
// walk-through: one spec, one phase, two tasks, each task a Go file that
// `go test ./...` (loopr init's validate command for a Go repository)
// compiles.
const readmeAgent = `#!/bin/sh
cat >/dev/null
case "$LOOPR_LOOP_TYPE" in
plan)  printf '# Plan: OAuth login\n\nSign in with a provider.\n\n## Specs\n\n### Spec 1: Login flow\n\nThe handlers.\n' >"$LOOPR_ARTIFACT" ;;
spec)  printf '# Spec: Login flow\n\n## Phases\n\n### Phase 1: Handlers\n\nWrite them.\n' >"$LOOPR_ARTIFACT" ;;
phase) printf '# Phase: Handlers\n\n## Tasks\n\n### Task 1: Login handler\n\nAdd it.\n\n### Task 2: Callback handler\n\nAdd it.\n' >"$LOOPR_ARTIFACT" ;;
*)     n=$(printf %s "$LOOPR_LOOP_ID" | tr 'A-Z' 'a-z')
       printf 'package main\n\nfunc handler_%s() bool { return true }\n' "$n" >"handler_$n.go" ;;
esac
`

// TestReadmeWalkthrough walks "Using loopr on your repository" line by
// line, as written, on a small Go repository of the user's, with a scripted
// agent set in loopr.yml's agent.command where the README says to edit it:
// go install, init, config check, the daemon, the plan, the dashboard under
// tmux, approve, debug scheduler, why; then the tree runs to the end and
// its work is on the plan's branch, with the user's checkout untouched.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("installs loopr and runs a tree")
	}
	cmds := readmeBlock(t, "## Using loopr on your repository")
	gobin := t.TempDir()
	loopr := filepath.Join(gobin, "loopr")
	home := t.TempDir()
	myrepo := filepath.Join(home, "src", "myrepo")
	agent := filepath.Join(home, "agent.sh")
	if err := os.WriteFile(agent, []byte(readmeAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	r := repo{dir: myrepo}
	gitInit(t, myrepo, map[string]string{
		"go.mod":  "module example.com/myrepo\n\ngo 1.22\n",
		"main.go": "package main\n\nfunc main() {}\n",
	})
	headBefore := strings.TrimSpace(r.git(t, "rev-parse", "HEAD"))

	cwd := ".."
	var planID string
	sawTUI := false
	xdg := t.TempDir()
	runLoopr := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(loopr, args...)
		cmd.Dir = cwd
		// As a user's machine: no LOOPR_TRUST_ALL, a trust file of its own.
		cmd.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1", "LOOPR_TRUST_ALL=", "XDG_CONFIG_HOME="+xdg)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("loopr %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, line := range cmds {
		words := shellWords(line)
		t.Logf("$ %s", line)
		switch {
		case line == "go install ./cmd/loopr":
			cmd := exec.Command("go", "install", "./cmd/loopr")
			cmd.Dir = cwd
			cmd.Env = append(os.Environ(), "GOBIN="+gobin)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go install: %v\n%s", err, out)
			}
		case line == "cd ~/src/myrepo":
			cwd = myrepo
			t.Cleanup(func() { stopDaemon(t, myrepo) })
		case line == "$EDITOR loopr.yml":
			// What the user edits: their agent. The rest stays as init wrote it.
			path := filepath.Join(cwd, "loopr.yml")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(`(?m)^  command: .*$`)
			if !re.Match(data) {
				t.Fatalf("loopr.yml has no agent.command line to edit:\n%s", data)
			}
			data = re.ReplaceAll(data, []byte(fmt.Sprintf("  command: [%q]", agent)))
			// And, for the test machine, no free-disk floor (other tests fill it).
			data = append(data, "storage: {disk_quota_min_gb: 0}\n"...)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		case line == "loopr trust":
			// The user reads the commands and answers y (no terminal here).
			if out := runLoopr("trust", "--yes"); !strings.Contains(out, "trusted") {
				t.Fatalf("loopr trust --yes: %s", out)
			}
		case line == "loopr tui":
			sawTUI = true
			tm := newTmux(t)
			script := fmt.Sprintf("cd %q && %q tui; echo TUI-EXITED $?; sleep 30", cwd, loopr)
			tm.run("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", "-e", "NO_COLOR=1", "-e", "LOOPR_HOME=", "sh", "-c", script)
			tm.waitScreen("the dashboard shows the plan waiting for approval", "Add OAuth login", "awaiting", "your call")
			tm.keys("q")
			tm.waitScreen("the dashboard quits", "TUI-EXITED 0")
		case len(words) > 0 && words[0] == "loopr":
			args := words[1:]
			for i, a := range args {
				switch a {
				case "<plan-id>":
					args[i] = planID
				case "<id>":
					args[i] = loopID(t, cwd, "spec")
				}
			}
			if len(args) > 0 && args[0] == "approve" {
				waitStatus(t, cwd, planID, loop.AwaitingApproval)
			}
			out := runLoopr(args...)
			if len(args) > 0 && args[0] == "plan" {
				m := regexp.MustCompile(`created plan (\S+)`).FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("loopr plan printed no id: %q", out)
				}
				planID = m[1]
			}
			if len(args) > 0 && args[0] == "why" && !strings.Contains(out, "priority") {
				t.Errorf("loopr why: %q", out)
			}
		default:
			t.Fatalf("README walk-through: no step for %q; teach this test the new line", line)
		}
	}
	if planID == "" || !sawTUI {
		t.Fatalf("the walk-through lost a step: plan %q, tui %v", planID, sawTUI)
	}

	// The tree runs to the end; every loop passes.
	deadline := time.Now().Add(testslack.Scale(3 * time.Minute))
	for {
		var st api.Status
		mustJSON(t, runLoopr("status", "--json"), &st)
		if settled(st) && st.Counts[loop.Complete] >= 5 {
			if st.Counts[loop.Failed] != 0 {
				t.Fatalf("loops failed: %s", runLoopr("list"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tree did not finish:\n%s", runLoopr("list"))
		}
		time.Sleep(300 * time.Millisecond)
	}
	// The two tasks' files are on the plan's branch, not in the checkout.
	best := 0
	for _, b := range strings.Fields(r.git(t, "branch", "--list", "loopr/*", "--format=%(refname:short)")) {
		// A merged task's branch is deleted as its loop is tidied: one
		// listed a moment ago may be gone.
		files, err := exec.Command("git", "-C", r.dir, "ls-tree", "--name-only", b).Output()
		if err == nil {
			best = max(best, strings.Count(string(files), "handler_"))
		}
	}
	if best != 2 {
		t.Errorf("no loopr branch holds both tasks' files (best: %d):\n%s", best, r.git(t, "branch", "--list", "loopr/*"))
	}
	if head := strings.TrimSpace(r.git(t, "rev-parse", "HEAD")); head != headBefore {
		t.Errorf("the user's HEAD moved: %s → %s", headBefore, head)
	}
	if st := r.git(t, "status", "--porcelain", "--untracked-files=no"); strings.TrimSpace(st) != "" {
		t.Errorf("the user's checkout changed:\n%s", st)
	}
}

// gitInit makes dir a git repository with files committed.
func gitInit(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := repo{dir: dir}
	r.git(t, "init", "-q", "-b", "main")
	r.git(t, "add", "-A")
	r.git(t, "-c", "user.name=dev", "-c", "user.email=dev@localhost", "commit", "-q", "-m", "initial")
}

// waitStatus waits until loop id has status st.
func waitStatus(t *testing.T, dir, id string, st loop.Status) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("loop %s %s", id, st), func() bool {
		var l loop.Loop
		return json.Unmarshal([]byte(ok(t, dir, "show", id, "--json")), &l) == nil && l.Status == st
	})
}

// TestDocsMinimalAgent runs the minimal agent of docs/agent-contract.md, as
// printed there, through a whole tree: the contract it relies on holds.
func TestDocsMinimalAgent(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/agent-contract.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	i := strings.Index(text, "## A minimal agent")
	if i < 0 {
		t.Fatal("docs/agent-contract.md lost its minimal agent")
	}
	text = text[i:]
	start := strings.Index(text, "```sh\n")
	end := strings.Index(text[start+6:], "```")
	script := text[start+6 : start+6+end]
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("agent:\n  command: [%q]\nloops:\n  plan: {require_approval: false}\n  ralph: {validate: [\"test -s NOTES.md\"]}\n"+
		"storage: {disk_quota_min_gb: 0}\ngit: {worktrees: false}\n", agent)
	if err := os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "daemon", "--detach")
	t.Cleanup(func() { stopDaemon(t, dir) })
	ok(t, dir, "plan", "Try the contract")
	waitFor(t, time.Minute, "the minimal agent's tree", func() bool {
		var st api.Status
		mustJSON(t, ok(t, dir, "status", "--json"), &st)
		return settled(st) && st.Counts[loop.Complete] == 4
	})
	notes, err := os.ReadFile(filepath.Join(dir, "NOTES.md"))
	if err != nil || !strings.Contains(string(notes), "iteration 1") {
		t.Errorf("the ralph loop's note: %q %v", notes, err)
	}
}
