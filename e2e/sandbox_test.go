package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/internal/fakeresponses"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/sandbox"
)

// needBwrap fails the test under CI (.ci/run installs bubblewrap) and
// skips it elsewhere when bwrap cannot make a sandbox here.
func needBwrap(t *testing.T) {
	t.Helper()
	if err := sandbox.Check(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: .ci/run installs bubblewrap; CI must run this test", err)
		}
		t.Skipf("%v: apt-get install bubblewrap to run this test", err)
	}
}

// sandboxConfig is a loopr.yml whose ralph loops run testdata/sandbox_agent.sh
// with args in a bwrap sandbox (sandbox: the YAML flow mapping).
func sandboxConfig(t *testing.T, sandbox string, args ...string) string {
	t.Helper()
	argv, _ := json.Marshal(append([]string{"sh", abs(t, "testdata/sandbox_agent.sh")}, args...))
	return fastRetries + `concurrency:
  max_loops: 4
agent:
  preset: command
  command: ` + string(argv) + `
  timeout_secs: 120
  sandbox: ` + sandbox + `
loops:
  ralph: {max_iterations: 1, validate: ["test -s done.txt"]}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`
}

// addRalph adds a ralph loop and returns its id.
func addRalph(t *testing.T, r repo, title string) string {
	t.Helper()
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", title, "--task", "try to escape", "--json"), &l)
	return string(l.ID)
}

// waitDone waits until loop id has settled and returns it.
func waitDone(t *testing.T, r repo, d *daemonProc, id string) loop.Loop {
	t.Helper()
	var l loop.Loop
	waitEvery(t, 3*time.Minute, slowPoll, "loop "+id+" to finish", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		l = show(t, r, id)
		return l.Status.Terminal()
	})
	return l
}

// TestSandboxFiles: with runner bwrap, two ralph loops run at once; each
// agent tries to write the workspace's loopr.yml (relative and absolute)
// and into the other loop's worktree, and to see the store. Nothing of it
// works: loopr.yml is unchanged, no worktree got a file, each agent saw
// only its own worktree, and both loops complete.
func TestSandboxFiles(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	cfg := sandboxConfig(t, "{runner: bwrap, network: none}", "files")
	r := newRepo(t, cfg)
	d := startDaemon(t, r)
	a, b := addRalph(t, r, "first"), addRalph(t, r, "second")
	waitFor(t, 2*time.Minute, "both agents running", func() bool {
		return strings.Contains(iterFile(r, a, 1, "agent.log"), "sandbox agent in") &&
			strings.Contains(iterFile(r, b, 1, "agent.log"), "sandbox agent in")
	})
	if err := os.WriteFile(filepath.Join(r.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a, b} {
		l := waitDone(t, r, d, id)
		log := iterFile(r, id, 1, "agent.log")
		if l.Status != loop.Complete {
			t.Errorf("loop %s is %s (%s), want complete\nagent.log:\n%s", id, l.Status, l.Reason, log)
		}
		if strings.Contains(log, "ESCAPED") {
			t.Errorf("loop %s's agent got out of its sandbox:\n%s", id, log)
		}
		if !strings.Contains(log, "siblings: "+id+" \n") {
			t.Errorf("loop %s's agent saw other worktrees (want only its own, %s):\n%s", id, id, log)
		}
		if _, err := os.Stat(filepath.Join(r.home, "worktrees", id, "pwned")); err == nil {
			t.Errorf("loop %s's worktree holds a file another agent wrote", id)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(r.dir, "loopr.yml")); string(got) != cfg {
		t.Errorf("loopr.yml changed while sandboxed agents ran:\n%s", got)
	}
	st := status(t, r)
	if len(st.Sandbox) != 1 || st.Sandbox[0].Text != "bwrap, network none" {
		t.Errorf("status sandbox = %+v, want bwrap, network none", st.Sandbox)
	}
	if out := ok(t, r.dir, "status"); !strings.Contains(out, "bwrap, network none") {
		t.Errorf("loopr status does not show the sandbox:\n%s", out)
	}
}

// TestSandboxNetwork: with network allow an agent's curl reaches a local
// fake API that allow_hosts names (through loopr's proxy) but not another
// local server, which the proxy refuses with 403 and the daemon logs;
// with network none it reaches neither.
func TestSandboxNetwork(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl not found: .ci/run installs it; CI must run this test")
		}
		t.Skip("curl not found")
	}
	t.Parallel()
	allowed := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "fake API says hi") }))
	other := serveAPI(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "should not be reached") }))
	for _, tc := range []struct {
		network, sandbox, wantAllowed, wantProxy string
	}{
		{"allow", "{runner: bwrap, network: allow, allow_hosts: [" + allowed + "]}", "allowed: fake API says hi", "other via the proxy: 403"},
		{"none", "{runner: bwrap, network: none}", "allowed: curl failed", "other via the proxy: 000"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			r := newRepo(t, sandboxConfig(t, tc.sandbox, "net", "http://"+allowed+"/", "http://"+other+"/"))
			d := startDaemon(t, r)
			id := addRalph(t, r, "network "+tc.network)
			l := waitDone(t, r, d, id)
			log := iterFile(r, id, 1, "agent.log")
			if l.Status != loop.Complete {
				t.Fatalf("loop is %s (%s), want complete\nagent.log:\n%s", l.Status, l.Reason, log)
			}
			for _, want := range []string{tc.wantAllowed, tc.wantProxy} {
				if !strings.Contains(log, want) {
					t.Errorf("agent.log lacks %q:\n%s", want, log)
				}
			}
			if strings.Contains(log, "ESCAPED") {
				t.Errorf("the agent reached a server outside allow_hosts:\n%s", log)
			}
			if tc.network == "allow" {
				waitFor(t, 30*time.Second, "the refusal in the daemon log", func() bool {
					return strings.Contains(d.output(), "sandbox proxy refused") && strings.Contains(d.output(), other)
				})
				if ev := ok(t, r.dir, "events", id); !strings.Contains(ev, "sandbox: the proxy refused "+other) {
					t.Errorf("the journal does not name the refused host:\n%s", ev)
				}
			}
		})
	}
}

// TestClaudeCodeSandboxed: the real Claude Code CLI completes a tree in a
// bwrap sandbox with network allow, offline against the fake Anthropic API
// (its ANTHROPIC_BASE_URL, a loopback address, is admitted by default and
// tunnelled by the shim); its sessions live in each loop's private home.
func TestClaudeCodeSandboxed(t *testing.T) {
	claude := claudePath(t)
	needBwrap(t)
	if inNetns(t) {
		return
	}
	logVersion(t, claude)
	claudeConfig = func(cfg string) string {
		return strings.Replace(cfg, "  preset: claude\n", "  preset: claude\n  sandbox: {runner: bwrap, network: allow}\n", 1)
	}
	t.Cleanup(func() { claudeConfig = func(cfg string) string { return cfg } })
	c := startClaudeRig(t, claude, "ANTHROPIC_API_KEY=test-key", nil)
	st := status(t, c.repo)
	api := strings.TrimPrefix(os.Getenv("ANTHROPIC_BASE_URL"), "http://")
	if len(st.Sandbox) != 1 || st.Sandbox[0].Network != "allow" || !slices.Contains(st.Sandbox[0].AllowHosts, api) {
		t.Fatalf("status sandbox = %+v, want network allow admitting the fake API", st.Sandbox)
	}
	loops := c.runTree(t)
	checkClaudeTree(t, c, loops)
	for _, l := range loops {
		projects := filepath.Join(c.repo.home, "loops", string(l.ID), "home", ".claude", "projects")
		if entries, err := os.ReadDir(projects); err != nil || len(entries) == 0 {
			t.Errorf("loop %s: no claude session in its private home (%v)", l.ID, err)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(os.Getenv("HOME"), ".claude", "projects")); len(entries) > 0 {
		t.Errorf("claude wrote sessions into the real home: %d projects", len(entries))
	}
}

// TestSandboxConfigCheck: `loopr config check` fails (exit 1) naming
// agent.sandbox.runner when bwrap is not on PATH, and passes that check
// where bwrap works.
func TestSandboxConfigCheck(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	r := newRepo(t, sandboxConfig(t, "{runner: bwrap, network: none}", "files"))
	// A PATH with git and sh but no bwrap.
	dir := t.TempDir()
	for _, prog := range []string{"git", "sh"} {
		p, err := exec.LookPath(prog)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, prog)); err != nil {
			t.Fatal(err)
		}
	}
	res := runEnv(t, r.dir, "", []string{"PATH=" + dir}, "config", "check")
	if res.code != 1 {
		t.Errorf("config check without bwrap: exit %d, want 1\n%s%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "sandbox.runner is bwrap, but bubblewrap (bwrap) is not installed") {
		t.Errorf("config check without bwrap does not say bwrap is missing:\n%s", res.stdout)
	}
	if res := run(t, r.dir, "", "config", "check"); strings.Contains(res.stdout, "sandbox.runner") {
		t.Errorf("config check with bwrap working names the sandbox:\n%s%s", res.stdout, res.stderr)
	}
}

// TestClaudeSessionCrashSandboxed: TestClaudeSessionCrash's scenario with
// the agent in a bwrap sandbox (network allow): after the daemon is
// killed with SIGKILL mid-iteration and restarted, the relaunched claude
// resumes the same session, which it kept in the loop's private home.
func TestClaudeSessionCrashSandboxed(t *testing.T) {
	claude := claudePath(t)
	needBwrap(t)
	if inNetns(t) {
		return
	}
	logVersion(t, claude)
	s := startSessionRig(t, claude, "interrupted")
	cfg, err := os.ReadFile(filepath.Join(s.repo.dir, "loopr.yml"))
	if err != nil {
		t.Fatal(err)
	}
	boxed := strings.Replace(string(cfg), "  preset: claude\n", "  preset: claude\n  sandbox: {runner: bwrap, network: allow}\n", 1)
	commitFiles(t, s.repo, map[string]string{"loopr.yml": boxed})
	s.d.stop()
	s.d = startDaemon(t, s.repo)

	l, before, _, _ := crashAndResume(t, s)
	if l.Iteration != 2 {
		t.Errorf("iteration %d after the crash, want 2 (the crash spends one)", l.Iteration)
	}
	if log := iterFile(s.repo, string(l.ID), 2, "agent.log"); !strings.Contains(log, `"session_id":"`+before.ID+`"`) {
		t.Errorf("the relaunched claude did not continue session %s:\n%s", before.ID, tail(log, 5))
	}
	files, _ := filepath.Glob(filepath.Join(s.repo.home, "loops", string(l.ID), "home", ".claude", "projects", "*", before.ID+".jsonl"))
	if len(files) == 0 {
		t.Errorf("session %s is not in the loop's private home", before.ID)
	}
	s.mu.Lock()
	seen := s.seen["crash"]
	s.mu.Unlock()
	if !strings.Contains(seen, "You were interrupted") {
		t.Errorf("no resumed call with the interrupted prompt reached the API (got %q)", seen)
	}
}

// TestCodexSandboxed: the real Codex CLI completes a tree in a bwrap
// sandbox with network allow, allow_hosts naming the fake Responses API
// (its $CODEX_HOME, under the home, reaches the sandbox as the private
// home's copy of .codex).
func TestCodexSandboxed(t *testing.T) {
	codex := agentCLI(t, "codex", "LOOPR_E2E_CODEX", "@openai/codex", "0.171.0")
	needBwrap(t)
	if inNetns(t) {
		return
	}
	logVersion(t, codex)
	api := &fakeresponses.Server{Script: func(r *fakeresponses.Request) fakeresponses.Reply {
		m := loopTypeRe.FindStringSubmatch(r.Prompt())
		switch {
		case m == nil:
			return fakeresponses.Reply{Text: "ok", Usage: codexUsage}
		case r.Turn() > 0 && m[1] == "task":
			return fakeresponses.Reply{Text: passingAnswer, Usage: codexUsage}
		case r.Turn() > 0:
			return fakeresponses.Reply{Text: "Wrote the " + m[1] + ".", Usage: codexUsage}
		case m[1] == "task":
			return fakeresponses.Reply{Command: "printf 'token bucket\\n' > limiter.txt", Usage: codexUsage}
		}
		return fakeresponses.Reply{Command: "cat > \"$LOOPR_ARTIFACT\" <<'EOF'\n" + claudeArtifacts[m[1]] + "EOF", Usage: codexUsage}
	}}
	addr := serveAPI(t, api)
	codexEnv(t, codex, addr)
	cfg := strings.Replace(agentTreeConfig, "  preset: claude\n",
		"  preset: codex\n  sandbox: {runner: bwrap, network: allow, allow_hosts: [\""+addr+"\"]}\n", 1)
	r := newRepo(t, cfg)
	d := startDaemon(t, r)
	loops := runAgentTree(t, r, d)
	checkAgentTree(t, r, loops, loop.Usage{InputTokens: codexUsage.InputTokens - codexUsage.CachedTokens,
		OutputTokens: codexUsage.OutputTokens, CacheReadTokens: codexUsage.CachedTokens}, false)
}

// TestSandboxCleanValidate: validate_in: clean runs the agent's code again
// in a fresh checkout, so it runs in the loop's sandbox too: a validate
// command that writes outside the checkout reaches nothing, in the
// worktree or in the clean checkout, and the loop still completes.
func TestSandboxCleanValidate(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	outside := t.TempDir()
	seen := filepath.Join(outside, "seen")
	cfg := strings.Replace(sandboxConfig(t, "{runner: bwrap, network: none}", "plain"),
		`ralph: {max_iterations: 1, validate: ["test -s done.txt"]}`,
		`ralph: {max_iterations: 1, validate_in: clean, validate: ["test -s done.txt && { echo \"$LOOPR_WORKDIR\" >> `+seen+` 2>/dev/null; true; }"]}`, 1)
	r := newRepo(t, cfg)
	d := startDaemon(t, r)
	id := addRalph(t, r, "clean")
	l := waitDone(t, r, d, id)
	if l.Status != loop.Complete {
		t.Fatalf("loop is %s (%s), want complete\nagent.log:\n%s", l.Status, l.Reason, iterFile(r, id, 1, "agent.log"))
	}
	if clean := iterFile(r, id, 1, "validation-clean.log"); !strings.Contains(clean, "$ test -s done.txt") {
		t.Fatalf("the clean validate did not run: validation-clean.log:\n%s", clean)
	}
	if b, err := os.ReadFile(seen); err == nil {
		t.Errorf("validate wrote outside its sandbox, from:\n%s", b)
	}
}
