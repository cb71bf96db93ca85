package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/config"
)

// layout makes a workspace with a repository, loopr's state directory
// under it, and a linked worktree of loop id under the state directory,
// as gitflow does: <ws>/.loopr/worktrees/<id> with its .git file naming
// <ws>/.git/worktrees/<id>.
type layout struct {
	ws, state, wt, admin, iter, cfg string
}

func newLayout(t *testing.T, id string) layout {
	t.Helper()
	ws := t.TempDir()
	l := layout{ws: ws, state: filepath.Join(ws, ".loopr"), cfg: filepath.Join(ws, "loopr.yml")}
	l.wt = filepath.Join(l.state, "worktrees", id)
	l.admin = filepath.Join(ws, ".git", "worktrees", id)
	l.iter = filepath.Join(l.state, "loops", id, "iterations", "001")
	for _, d := range []string{l.wt, l.admin, l.iter} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(l.wt, ".git"), "gitdir: "+l.admin+"\n")
	write(t, filepath.Join(l.admin, "commondir"), "../..\n")
	write(t, l.cfg, "agent: {}\n")
	return l
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mounts returns the (flag, src, dst) triples and two-argument options of a
// bwrap command line, up to the first "--".
func mounts(argv []string) (ms []string) {
	for i := 1; i < len(argv) && argv[i] != "--"; i++ {
		switch argv[i] {
		case "--ro-bind", "--bind":
			ms = append(ms, argv[i]+" "+argv[i+1]+" "+argv[i+2])
			i += 2
		case "--tmpfs", "--dir", "--remount-ro", "--chdir", "--dev", "--proc", "--cap-drop":
			ms = append(ms, argv[i]+" "+argv[i+1])
			i++
		default:
			ms = append(ms, argv[i])
		}
	}
	return ms
}

func TestCommandMounts(t *testing.T) {
	needBwrapPath(t)
	l := newLayout(t, "r1")
	home := t.TempDir()
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone}, Preset: "command",
		Workspace: l.ws, Config: l.cfg, State: l.state}
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
	argv, err := p.Command(Run{Loop: "r1", Workdir: l.wt, Env: env, Writable: []string{l.iter}}, []string{"agent", "-x"})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(argv[0]) != "bwrap" || !slices.Equal(argv[len(argv)-3:], []string{"--", "agent", "-x"}) {
		t.Fatalf("argv = %q: want bwrap ... -- agent -x", argv)
	}
	want := []string{
		"--ro-bind / /", "--dev /dev", "--proc /proc", "--tmpfs /tmp", "--unshare-pid", "--die-with-parent", "--cap-drop ALL",
		"--unshare-net",
		"--tmpfs " + otherHome(home), // the test's own home: the agent's is another (TestSandboxOtherHome)
		"--bind " + p.Home("r1") + " " + home,
		"--ro-bind " + l.ws + " " + l.ws,
		"--ro-bind " + filepath.Join(l.ws, ".git") + " " + filepath.Join(l.ws, ".git"),
		"--bind " + l.admin + " " + l.admin,
		"--ro-bind " + filepath.Join(l.admin, "commondir") + " " + filepath.Join(l.admin, "commondir"),
		"--tmpfs " + l.state,
		"--bind " + l.wt + " " + l.wt,
		"--ro-bind " + filepath.Join(l.wt, ".git") + " " + filepath.Join(l.wt, ".git"),
		"--ro-bind " + filepath.Join(l.state, "loops", "r1") + " " + filepath.Join(l.state, "loops", "r1"),
		"--bind " + l.iter + " " + l.iter,
		"--remount-ro " + l.state,
		"--ro-bind " + l.cfg + " " + l.cfg,
		"--chdir " + l.wt,
	}
	want = slices.DeleteFunc(want, func(m string) bool { return m == "--tmpfs " }) // no home of the test's own
	if diff := cmp.Diff(want, mounts(argv)); diff != "" {
		t.Errorf("Command() mounts mismatch (-want +got):\n%s", diff)
	}
}

// TestCommandWorkspaceAsWorkdir: without worktrees the agent works in the
// workspace itself; it is bound read-write before the state directory is
// hidden (else it would cover the tmpfs), and loopr.yml read-only after.
func TestCommandWorkspaceAsWorkdir(t *testing.T) {
	needBwrapPath(t)
	l := newLayout(t, "r1")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap}, Workspace: l.ws, Config: l.cfg, State: l.state}
	argv, err := p.Command(Run{Loop: "r1", Workdir: l.ws, Env: []string{"PATH=/bin"}}, []string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	ms := mounts(argv)
	rw, hide, cfg := slices.Index(ms, "--bind "+l.ws+" "+l.ws), slices.Index(ms, "--tmpfs "+l.state), slices.Index(ms, "--ro-bind "+l.cfg+" "+l.cfg)
	if rw < 0 || hide < 0 || cfg < 0 || rw >= hide || hide >= cfg {
		t.Errorf("mounts %q: want the workspace read-write, then the state hidden, then loopr.yml read-only", ms)
	}
	if slices.Contains(ms, "--unshare-net") {
		t.Errorf("network host (the default) must not unshare the network: %q", ms)
	}
}

// TestCommandTools: a PATH directory under the hidden home comes back
// read-only (its parent when it is a bin/, for an npm prefix's lib/), and
// so does an agent named by a path under /tmp.
func TestCommandTools(t *testing.T) {
	needBwrapPath(t)
	l := newLayout(t, "r1")
	home := t.TempDir()
	bin := filepath.Join(home, ".npm-global", "bin")
	other := filepath.Join(home, "tools")
	for _, d := range []string{bin, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap}, Workspace: l.ws, State: l.state}
	agent := filepath.Join(t.TempDir(), "agent.sh")
	write(t, agent, "#!/bin/sh\n")
	argv, err := p.Command(Run{Loop: "r1", Workdir: l.wt, Env: []string{"HOME=" + home, "PATH=/usr/bin:" + bin + ":" + other}}, []string{agent})
	if err != nil {
		t.Fatal(err)
	}
	ms := mounts(argv)
	for _, want := range []string{
		"--ro-bind " + filepath.Dir(bin) + " " + filepath.Dir(bin),
		"--ro-bind " + other + " " + other,
	} {
		if !slices.Contains(ms, want) {
			t.Errorf("mounts %q: want %q", ms, want)
		}
	}
	if d := filepath.Dir(agent); under(agent, "/tmp") && !slices.Contains(ms, "--ro-bind "+d+" "+d) {
		t.Errorf("mounts %q: want the agent's directory %s bound read-only", ms, d)
	}

	// A script named by an argument (sh script.sh): the file itself.
	script := filepath.Join(t.TempDir(), "run.sh")
	write(t, script, "echo hi\n")
	argv, err = p.Command(Run{Loop: "r1", Workdir: l.wt, Env: []string{"HOME=" + home, "PATH=/usr/bin:/bin"}}, []string{"sh", script, "--flag", "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	if ms := mounts(argv); under(script, "/tmp") && !slices.Contains(ms, "--ro-bind "+script+" "+script) {
		t.Errorf("mounts %q: want the script %s bound read-only", ms, script)
	}
}

func TestCommandAllowRunsTheShim(t *testing.T) {
	needBwrapPath(t)
	l := newLayout(t, "r1")
	p := Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkAllow,
		AllowHosts: []string{"api.example.com:443", "127.0.0.1:8080"}}, Workspace: l.ws, State: l.state}
	if _, err := p.Command(Run{Loop: "r1", Workdir: l.wt}, []string{"agent"}); err == nil {
		t.Error("Command() with network allow and no proxy: want an error")
	}
	argv, err := p.Command(Run{Loop: "r1", Workdir: l.wt, Proxy: "/tmp/px", Exe: "/usr/bin/loopr"}, []string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	tail := strings.Join(argv[slices.Index(argv, "--"):], " ")
	want := "-- " + innerExe + " sandbox-shim --proxy " + innerProxy + "/proxy.sock --tunnel 127.0.0.1:8080 -- agent"
	if tail != want {
		t.Errorf("after bwrap's options: %q, want %q", tail, want)
	}
	ms := mounts(argv)
	for _, m := range []string{"--unshare-net", "--ro-bind /usr/bin/loopr " + innerExe, "--ro-bind /tmp/px " + innerProxy} {
		if !slices.Contains(ms, m) {
			t.Errorf("mounts %q: want %q", ms, m)
		}
	}
}

func TestAllowList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		preset string
		hosts  []string
		env    []string
		want   []string
	}{
		{"the preset's hosts", "claude", nil, nil, []string{"api.anthropic.com:443"}},
		{"and its base URL", "claude", nil, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4000/v1"}, []string{"api.anthropic.com:443", "127.0.0.1:4000"}},
		{"a base URL without a port", "claude", nil, []string{"ANTHROPIC_BASE_URL=https://proxy.corp"}, []string{"api.anthropic.com:443", "proxy.corp:443"}},
		{"allow_hosts replace the default", "claude", []string{"x.test:443"}, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4000"}, []string{"x.test:443"}},
		{"command preset: none", "command", nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{Sandbox: config.Sandbox{Runner: "bwrap", Network: "allow", AllowHosts: tc.hosts}, Preset: tc.preset}
			if diff := cmp.Diff(tc.want, p.AllowList(tc.env)); diff != "" {
				t.Errorf("AllowList() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	cases := map[string]config.Sandbox{
		"none":                {},
		"bwrap, network host": {Runner: "bwrap"},
		"bwrap, network none": {Runner: "bwrap", Network: "none"},
		"bwrap, network allow (api.anthropic.com:443)": {Runner: "bwrap", Network: "allow"},
	}
	for want, sb := range cases {
		if got := (Policy{Sandbox: sb, Preset: "claude"}).Describe(nil); got != want {
			t.Errorf("Describe(%+v) = %q, want %q", sb, got, want)
		}
	}
}

func TestLoopback(t *testing.T) {
	t.Parallel()
	got := Loopback([]string{"api.anthropic.com:443", "127.0.0.1:80", "localhost:9", "[::1]:7", "10.0.0.1:80", "bad"})
	if diff := cmp.Diff([]string{"127.0.0.1:80", "localhost:9", "[::1]:7"}, got); diff != "" {
		t.Errorf("Loopback() mismatch (-want +got):\n%s", diff)
	}
}

// needBwrapPath skips a test of Command's arguments where bwrap is not
// installed (Command names its path); needBwrap is for tests that run it.
func needBwrapPath(t *testing.T) {
	t.Helper()
	if _, err := lookPath("bwrap", os.Getenv("PATH")); err != nil {
		t.Skip("bwrap not installed: Command needs its path")
	}
	t.Parallel()
}
