package sandbox

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
)

// TestMain lets the test binary serve as loopr inside a sandbox: as the
// shim (sandbox-shim) and as a small client (get URL: prints the body,
// exits 1 when the request fails).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case ShimCommand:
			os.Exit(Shim(os.Args[2:], os.Stderr))
		case "get", "via-proxy":
			c := http.DefaultClient // HTTP_PROXY as the shim set it: not for loopback hosts
			if os.Args[1] == "via-proxy" {
				u, _ := url.Parse(os.Getenv("HTTP_PROXY"))
				c = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
			}
			resp, err := c.Get(os.Args[2])
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			b, _ := io.ReadAll(resp.Body)
			fmt.Printf("%d %s", resp.StatusCode, b)
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// needBwrap skips the test where bubblewrap cannot run, but fails it
// under CI (.ci/run installs bubblewrap).
func needBwrap(t *testing.T) {
	t.Helper()
	if err := Check(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: .ci/run installs bubblewrap; CI must run this test", err)
		}
		t.Skip(err)
	}
}

// sandboxed runs the shell script in the sandbox of loop r1 of l and
// returns its output and error.
func sandboxed(t *testing.T, p Policy, l layout, env []string, argv ...string) (string, error) {
	t.Helper()
	exe, _ := os.Executable() // the client "get", bound in read-only
	full, err := p.Command(Run{Loop: "r1", Workdir: l.wt, Env: env, Writable: []string{l.iter}, Readable: []string{exe}}, argv)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env, cmd.Dir = env, l.wt
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestSandboxPromises checks what docs/security.md promises, each line of
// the script one promise: it exits at the first that does not hold.
func TestSandboxPromises(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	l := newLayout(t, "r1")
	other := filepath.Join(l.state, "worktrees", "r2")
	write(t, filepath.Join(other, "file"), "theirs")
	write(t, filepath.Join(l.state, "loopr.db"), "store")
	write(t, filepath.Join(l.state, "loops", "r2", "iterations", "001", "agent.log"), "theirs")
	realHome := t.TempDir()
	write(t, filepath.Join(realHome, ".ssh", "id_ed25519"), "key")
	write(t, filepath.Join(realHome, ".claude", "settings.json"), "{}")
	hostTmp := t.TempDir() // under /tmp on the host, bound nowhere
	write(t, filepath.Join(hostTmp, "secret"), "s")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone}, Preset: "claude",
		Workspace: l.ws, Config: l.cfg, State: l.state}
	if _, err := p.PrepareHome("r1", realHome); err != nil {
		t.Fatal(err)
	}
	_, addr := hello(t) // on the host's 127.0.0.1

	script := strings.Join([]string{
		`fail() { echo "BROKEN: $*"; exit 1; }`,
		`echo hacked > "$CFG" 2>/dev/null && fail "loopr.yml is writable"`,
		`echo hacked > ../../../loopr.yml 2>/dev/null && fail "../../../loopr.yml is writable"`,
		`touch "$WS/new" 2>/dev/null && fail "the workspace is writable"`,
		`echo ok > mine || fail "the worktree is not writable"`,
		`echo ok > "$ITER/plan.md" || fail "the iteration directory is not writable"`,
		`echo ok > "$ADMIN/probe" || fail "the worktree's git directory is not writable"`,
		`touch "$WS/.git/objects/probe" 2>/dev/null && fail "the repository's objects are writable"`,
		`test -e "$OTHER/file" && fail "another loop's worktree is visible"`,
		`test -e "$STATE/loopr.db" && fail "the store is visible"`,
		`touch "$STATE/probe" 2>/dev/null && fail "loopr's state directory is writable"`,
		`test -e "$STATE/loops/r2" && fail "another loop's files are visible"`,
		`test -e "$HOSTTMP/secret" && fail "the host's /tmp is visible"`,
		`test -e "$HOME/.ssh/id_ed25519" && fail "the real home is visible"`,
		`test -f "$HOME/.claude/settings.json" || fail "the preset's home files are missing"`,
		`echo ok > "$HOME/note" || fail "the private home is not writable"`,
		`echo ok > /tmp/scratch || fail "/tmp is not writable"`,
		`echo x > /etc/loopr-probe 2>/dev/null && fail "/etc is writable"`,
		`"$GET" get "http://$ADDR/" 2>&1 | grep -q "connection refused" || fail "network none reaches the host's 127.0.0.1"`,
		`echo all held`,
	}, "\n")
	exe, _ := os.Executable()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + realHome, "CFG=" + l.cfg, "WS=" + l.ws, "ITER=" + l.iter, "ADMIN=" + l.admin,
		"OTHER=" + other, "STATE=" + l.state, "HOSTTMP=" + hostTmp, "ADDR=" + addr, "GET=" + exe}
	out, err := sandboxed(t, p, l, env, "sh", "-c", script)
	if err != nil || !strings.Contains(out, "all held") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
	if got := read(t, l.cfg); got != "agent: {}\n" {
		t.Errorf("loopr.yml = %q after the run, want it unchanged", got)
	}
	if got := read(t, filepath.Join(l.wt, "mine")); got != "ok\n" {
		t.Errorf("worktree file = %q, want the agent's write", got)
	}
	if got := read(t, filepath.Join(p.Home("r1"), "note")); got != "ok\n" {
		t.Errorf("private home file = %q, want the agent's write kept under the loop", got)
	}
}

// TestSandboxGitEscape: the agent cannot point the git that loopr runs
// outside the sandbox (git add, commit, status in the worktree) at a git
// directory or configuration of its own: a rewritten .git file, commondir
// or gitdir would make loopr's git run the agent's hooks or
// core.fsmonitor as the user, outside the sandbox. The worktree's .git
// file and its administrative directory's pointers are read-only; the rest
// of that directory (index, HEAD, logs) stays writable.
func TestSandboxGitEscape(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	l := newLayout(t, "r1")
	write(t, filepath.Join(l.admin, "gitdir"), filepath.Join(l.wt, ".git")+"\n")
	write(t, filepath.Join(l.admin, "config.worktree"), "")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
		Workspace: l.ws, Config: l.cfg, State: l.state}
	script := strings.Join([]string{
		`fail() { echo "BROKEN: $*"; exit 1; }`,
		`echo "gitdir: $PWD/.evil" > .git 2>/dev/null && fail "the worktree's .git file is writable"`,
		`rm -f .git 2>/dev/null; mv .git gone 2>/dev/null; test -f .git || fail "the worktree's .git file can be removed"`,
		`echo /evil > "$ADMIN/commondir" 2>/dev/null && fail "commondir is writable"`,
		`echo /evil > "$ADMIN/gitdir" 2>/dev/null && fail "gitdir is writable"`,
		`echo "[core] hooksPath = /evil" > "$ADMIN/config.worktree" 2>/dev/null && fail "config.worktree is writable"`,
		`echo ok > "$ADMIN/index" || fail "the worktree's index is not writable"`,
		`echo all held`,
	}, "\n")
	out, err := sandboxed(t, p, l, []string{"PATH=/usr/bin:/bin", "ADMIN=" + l.admin}, "sh", "-c", script)
	if err != nil || !strings.Contains(out, "all held") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
	if got := read(t, filepath.Join(l.wt, ".git")); got != "gitdir: "+l.admin+"\n" {
		t.Errorf(".git = %q after the run, want it unchanged", got)
	}
}

// TestSandboxWorkspaceGitReadOnly: without worktrees the workdir is the
// workspace, whose .git directory holds the hooks and config loopr's own
// git commits run with: it is read-only in the sandbox.
func TestSandboxWorkspaceGitReadOnly(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	l := newLayout(t, "r1")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
		Workspace: l.ws, Config: l.cfg, State: l.state}
	l.wt = l.ws
	out, err := sandboxed(t, p, l, []string{"PATH=/usr/bin:/bin"}, "sh", "-c", strings.Join([]string{
		`fail() { echo "BROKEN: $*"; exit 1; }`,
		`mkdir -p .git/hooks 2>/dev/null; echo evil > .git/hooks/post-commit 2>/dev/null && fail ".git/hooks is writable"`,
		`echo "[core] fsmonitor = evil" >> .git/config 2>/dev/null && fail ".git/config is writable"`,
		`echo ok > mine || fail "the workspace is not writable"`,
		`echo all held`,
	}, "\n"))
	if err != nil || !strings.Contains(out, "all held") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
}

// TestSandboxOtherHome: a profile whose env: sets HOME elsewhere gets that
// directory as its private home, and your own home stays hidden too.
func TestSandboxOtherHome(t *testing.T) {
	needBwrap(t)
	userHome, err := os.MkdirTemp("/var/tmp", "loopr-home-") // outside /tmp, which the sandbox replaces anyway
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(userHome) })
	write(t, filepath.Join(userHome, ".ssh", "id_ed25519"), "key")
	t.Setenv("HOME", userHome) // the daemon's, the user's
	l := newLayout(t, "r1")
	agentHome := filepath.Join(t.TempDir(), "agenthome")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
		Workspace: l.ws, Config: l.cfg, State: l.state}
	if _, err := p.PrepareHome("r1", agentHome); err != nil {
		t.Fatal(err)
	}
	out, err := sandboxed(t, p, l, []string{"PATH=/usr/bin:/bin", "HOME=" + agentHome, "USERHOME=" + userHome}, "sh", "-c",
		`test -e "$USERHOME/.ssh/id_ed25519" && echo "BROKEN: your home is visible"; echo ok > "$HOME/note" && echo held`)
	if err != nil || !strings.Contains(out, "held") || strings.Contains(out, "BROKEN") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
	if p.Hides(filepath.Join(l.ws, "loopr.yml"), nil) || !p.Hides(filepath.Join(userHome, ".ssh", "id_ed25519"), []string{"HOME=" + agentHome}) {
		t.Errorf("Hides: want the repository shown and your home hidden")
	}
}

// TestSandboxNetworkAllow: with network allow the agent reaches an
// allowed local API (a loopback allow_hosts entry, through the shim's
// tunnel and loopr's proxy) and nothing else: another local server is
// out of reach directly, and the proxy refuses it with 403.
func TestSandboxNetworkAllow(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	l := newLayout(t, "r1")
	_, allowed := hello(t)
	_, other := hello(t)
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkAllow, AllowHosts: []string{allowed}},
		Preset: "command", Workspace: l.ws, Config: l.cfg, State: l.state}
	var refused []string
	px := &Proxy{Allow: p.AllowList(nil), Refused: func(target string) { refused = append(refused, target) }}
	dir, stop, err := px.Listen()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	script := strings.Join([]string{
		`fail() { echo "BROKEN: $*"; exit 1; }`,
		`test -n "$HTTP_PROXY" || fail "no HTTP_PROXY"`,
		`got=$("$GET" get "http://$ALLOWED/api") ; test "$got" = "200 hello /api" || fail "the allowed API: $got"`,
		`"$GET" get "http://$OTHER/" 2>&1 | grep -q "connection refused" || fail "another local server is reachable"`,
		`got=$("$GET" via-proxy "http://$OTHER/") ; case "$got" in 403*) ;; *) fail "the proxy admitted $OTHER: $got";; esac`,
		`echo all held`,
	}, "\n")
	env := []string{"PATH=/usr/bin:/bin", "GET=" + exe, "ALLOWED=" + allowed, "OTHER=" + other}
	full, err := p.Command(Run{Loop: "r1", Workdir: l.wt, Env: env, Proxy: dir, Exe: exe, Readable: []string{exe}}, []string{"sh", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	stop()
	if err != nil || !strings.Contains(string(out), "all held") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
	if len(refused) != 1 || refused[0] != other {
		t.Errorf("the proxy refused %q, want [%s]", refused, other)
	}
}

// TestSandboxWorkspaceUnderHome: a repository under the home (~/src/proj)
// stays visible when the home is replaced, and the rest of the home does
// not.
func TestSandboxWorkspaceUnderHome(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	l := newLayout(t, "r1")
	home := filepath.Dir(l.ws) // the test's temporary directory holds the workspace
	write(t, filepath.Join(home, "secret"), "s")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
		Workspace: l.ws, Config: l.cfg, State: l.state}
	if _, err := p.PrepareHome("r1", home); err != nil {
		t.Fatal(err)
	}
	out, err := sandboxed(t, p, l, []string{"PATH=/usr/bin:/bin", "HOME=" + home, "WS=" + l.ws},
		"sh", "-c", `test -f "$WS/loopr.yml" && echo ok > mine && ! test -e "$HOME/secret" && echo held`)
	if err != nil || !strings.Contains(out, "held") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
}

// TestSandboxWorkspaceAsWorkdir: without worktrees (git.worktrees: false)
// the agent works in the workspace itself: it may write there, but not
// loopr.yml, and .loopr stays hidden.
func TestSandboxWorkspaceAsWorkdir(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	l := newLayout(t, "r1")
	write(t, filepath.Join(l.state, "loopr.db"), "store")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
		Workspace: l.ws, Config: l.cfg, State: l.state}
	l.wt = l.ws
	out, err := sandboxed(t, p, l, []string{"PATH=/usr/bin:/bin"}, "sh", "-c",
		`echo ok > mine && ! echo x >> loopr.yml 2>/dev/null && ! test -e .loopr/loopr.db && echo held`)
	if err != nil || !strings.Contains(out, "held") {
		t.Fatalf("in the sandbox: %v\n%s", err, out)
	}
	if got := read(t, filepath.Join(l.ws, "mine")); got != "ok\n" {
		t.Errorf("workspace file = %q, want the agent's write", got)
	}
	if got := read(t, l.cfg); got != "agent: {}\n" {
		t.Errorf("loopr.yml = %q, want it unchanged", got)
	}
}
