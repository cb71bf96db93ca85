// Package sandbox runs an agent (and its loop's validate commands) inside
// bubblewrap (bwrap, the distribution's binary: loopr has no namespace code
// of its own) when a profile sets `sandbox: {runner: bwrap}`.
//
// What the sandboxed process sees, in the order the mounts are made (a
// later mount covers an earlier one):
//
//	/                     read-only (--ro-bind / /), with a fresh /dev and
//	                      /proc (its own pid namespace) and capabilities dropped
//	/tmp                  a private, empty tmpfs
//	$HOME                 the loop's private home, <state>/loops/<id>/home,
//	                      read-write and kept across iterations (a resumed
//	                      session survives); loopr copies the preset's
//	                      files into it (preset.Preset.Home) and those of
//	                      <state>/sandbox-home/ at each start
//	tools                 each PATH directory under $HOME, /tmp or <state>,
//	                      read-only (its parent when it is named bin or
//	                      .bin: an npm prefix, node_modules, ~/.local), and
//	                      so the directory of the agent's program and each
//	                      file its arguments name by absolute path
//	the workspace         read-only
//	<state>               (loopr's home, .loopr) an empty, read-only tmpfs: the store,
//	                      the daemon's socket, other loops' files and
//	                      worktrees are invisible; then, bound back:
//	the workdir           read-write (the loop's worktree)
//	its git admin dir     read-write (<repo>/.git/worktrees/<name>: index, HEAD)
//	<state>/loops/<id>    read-only, and its iteration directory read-write
//	                      ($LOOPR_ARTIFACT, $LOOPR_QUESTION_FILE)
//	the parent artifact   read-only
//	loopr.yml             read-only, last, whatever the workdir is
//
// The object store and refs of the repository stay read-only: `git add`
// and `git commit` fail inside; loopr commits what the agent leaves.
//
// Networks: host shares the host's; none is an empty network namespace
// (loopback only); allow is an empty namespace plus a CONNECT proxy loopr
// runs (Proxy) on a unix socket bound into the sandbox, reached through
// `loopr sandbox-shim` (Shim), which loopr runs inside in front of the
// agent: it listens on 127.0.0.1 for the agent's HTTP(S)_PROXY and on each
// loopback host of the allow list, and forwards both to the socket.
//
// The process stays in loopr's process group (no --new-session), so the
// runner's SIGTERM-then-SIGKILL of the group reaches everything inside;
// --unshare-pid with --die-with-parent ends every process in the sandbox
// when bwrap itself dies, and bwrap when the daemon dies (the parent
// death signal follows the OS thread that started bwrap: loopr never
// locks a goroutine to a thread, so Go does not end those threads). Without
// --new-session a sandbox shares the daemon's controlling terminal, if it
// has one: `loopr daemon` in a terminal's foreground (a detached daemon
// has none); dropped capabilities stop TIOCSTI on Linux 6.2 and later.
package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/preset"
)

// Inside the sandbox: where the shim's binary and the proxy's socket are
// bound, in the private /tmp.
const (
	innerDir    = "/tmp/.loopr-sandbox"
	innerExe    = innerDir + "/loopr"
	innerProxy  = innerDir + "/proxy"
	SocketName  = "proxy.sock"
	ShimCommand = "sandbox-shim"
)

// HomeDirName is the private home's name under <state>/loops/<id>/, and
// ExtraHomeDir the directory under <state> whose files go into every
// private home.
const (
	HomeDirName  = "home"
	ExtraHomeDir = "sandbox-home"
)

// Policy is a profile's sandbox with what it applies to: the workspace,
// its loopr.yml and loopr's state directory.
type Policy struct {
	config.Sandbox
	Preset    string // the profile's preset: its Home files and default Hosts
	Workspace string // the repository worked on: read-only
	Config    string // loopr.yml in use: read-only ("" none)
	State     string // loopr's home (.loopr): hidden, but for the loop's own files
}

// PolicyOf is the sandbox of agent profile ag in a workspace: its
// sandbox: settings and preset, the workspace and its loopr.yml
// read-only, loopr's home (state) hidden.
func PolicyOf(ag config.Agent, workspace, configFile, state string) Policy {
	return Policy{Sandbox: ag.Sandbox, Preset: ag.Preset, Workspace: workspace, Config: configFile, State: state}
}

// On reports whether p runs processes in bwrap.
func (p Policy) On() bool { return p.RunnerOrDefault() == config.SandboxBwrap }

// Run is one process to sandbox.
type Run struct {
	Loop     string   // the loop's id: its private home and its files under State
	Workdir  string   // read-write
	Writable []string // also read-write (the iteration directory)
	Readable []string // also read-only (the parent's artifact)
	Env      []string // the process's environment: HOME, PATH and TMPDIR are read
	// Proxy is the host directory holding the proxy's socket (SocketName),
	// for network allow; Exe the loopr binary run as the shim (default
	// os.Executable).
	Proxy string
	Exe   string
}

// Home returns the loop's private home directory on the host.
func (p Policy) Home(loopID string) string {
	return filepath.Join(p.State, "loops", loopID, HomeDirName)
}

// Command returns the argv that runs argv for r under p: bwrap, its
// arguments, for network allow the shim, then argv.
func (p Policy) Command(r Run, argv []string) ([]string, error) {
	if !p.On() {
		return nil, errors.New("sandbox: runner is not bwrap")
	}
	if p.State == "" || r.Workdir == "" || r.Loop == "" || len(argv) == 0 {
		return nil, errors.New("sandbox: no state directory, workdir, loop or command")
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New("sandbox: bubblewrap (bwrap) is not installed: install it (Debian: apt-get install bubblewrap) or set sandbox.runner: none")
	}
	b := &builder{args: []string{bwrap}}
	b.add("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--unshare-pid", "--die-with-parent", "--cap-drop", "ALL")
	if p.NetworkOrDefault() != config.NetworkHost {
		b.add("--unshare-net")
	}
	home := Getenv(r.Env, "HOME")
	hidden := []string{"/tmp", p.State}
	if u := otherHome(home); u != "" {
		b.add("--tmpfs", u) // yours, when env: gives the agent another HOME
		hidden = append(hidden, u)
	}
	if home != "" && home != "/" {
		b.add("--bind", p.Home(r.Loop), home)
		hidden = append(hidden, home)
	}
	if tmp := Getenv(r.Env, "TMPDIR"); tmp != "" && (under(tmp, "/tmp") || home != "" && home != "/" && under(tmp, home)) {
		b.add("--dir", tmp) // the private /tmp and home start without it
	}
	tools := toolDirs(r.Env, hidden)
	for _, d := range tools {
		b.add("--ro-bind", d, d)
	}
	for _, f := range program(argv[0], r, hidden, tools) {
		b.add("--ro-bind", f, f)
	}
	for _, f := range argFiles(argv[1:], r, hidden, p.State, tools) {
		b.add("--ro-bind", f, f)
	}
	if p.Workspace != "" {
		b.add("--ro-bind", p.Workspace, p.Workspace)
	}
	p.loopBinds(b, r)
	if p.Config != "" && exists(p.Config) {
		b.add("--ro-bind", p.Config, p.Config)
	}
	b.add("--chdir", r.Workdir)
	if p.NetworkOrDefault() == config.NetworkAllow {
		if err := b.shim(p, r); err != nil {
			return nil, err
		}
	}
	b.add("--")
	return append(b.args, argv...), nil
}

// loopBinds adds what the loop may use, bound back after the state
// directory is hidden when it lies below it (a worktree), before
// otherwise (the workspace itself as the workdir would cover the hiding
// tmpfs); then the hiding tmpfs is made read-only.
func (p Policy) loopBinds(b *builder, r Run) {
	type bind struct{ flag, path string }
	var binds []bind
	gitAdmin, gitCommon := gitDirs(r.Workdir)
	if gitCommon != "" {
		binds = append(binds, bind{"--ro-bind", gitCommon})
	}
	binds = append(binds, bind{"--bind", r.Workdir})
	if gitAdmin != "" {
		binds = append(binds, bind{"--bind", gitAdmin})
	}
	for _, f := range gitPointers(r.Workdir, gitAdmin) {
		binds = append(binds, bind{"--ro-bind", f})
	}
	if d := filepath.Join(p.State, "loops", r.Loop); exists(d) {
		binds = append(binds, bind{"--ro-bind", d})
	}
	for _, w := range r.Writable {
		binds = append(binds, bind{"--bind", w})
	}
	for _, f := range r.Readable {
		if f != "" && exists(f) {
			binds = append(binds, bind{"--ro-bind", f})
		}
	}
	for _, after := range []bool{false, true} {
		if after {
			b.add("--tmpfs", p.State)
		}
		for _, m := range binds {
			if under(m.path, p.State) == after {
				b.add(m.flag, m.path, m.path)
			}
		}
	}
	b.add("--remount-ro", p.State) // the hiding tmpfs itself, not what is bound on it
}

// shim adds the binding of loopr's binary and of the proxy's socket, and
// the shim's command line, which runs the agent after its own "--".
func (b *builder) shim(p Policy, r Run) error {
	if r.Proxy == "" {
		return errors.New("sandbox: network allow without a proxy")
	}
	exe := r.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("sandbox: the loopr binary for the shim: %w", err)
		}
	}
	b.add("--ro-bind", exe, innerExe, "--ro-bind", r.Proxy, innerProxy,
		"--", innerExe, ShimCommand, "--proxy", innerProxy+"/"+SocketName)
	for _, h := range Loopback(p.AllowList(r.Env)) {
		b.add("--tunnel", h)
	}
	return nil
}

// program lists the directory of the agent's program (and of where its
// links lead: an npm bin links into its package), as binDir widens it,
// when it lies under a hidden root and no tool directory brings it back.
func program(prog string, r Run, hidden, tools []string) []string {
	path := prog
	if !strings.ContainsRune(prog, '/') {
		var err error
		if path, err = lookPath(prog, Getenv(r.Env, "PATH")); err != nil {
			return nil
		}
	} else if !filepath.IsAbs(path) {
		path = filepath.Join(r.Workdir, path)
	}
	var out []string
	cands := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != cands[0] {
		cands = append(cands, real)
	}
	for _, f := range cands {
		if slices.ContainsFunc(tools, func(d string) bool { return under(f, d) }) || under(f, r.Workdir) {
			continue
		}
		if d := binDir(filepath.Dir(f), hidden); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// argFiles lists the arguments that name, by absolute path, a regular
// file under a hidden root but loopr's state directory (a script run by
// an interpreter, `python3 ~/agents/run.py`), unless a tool directory or
// the workdir brings it back: each is bound read-only.
func argFiles(args []string, r Run, hidden []string, state string, tools []string) []string {
	var out []string
	for _, a := range args {
		if !filepath.IsAbs(a) || under(a, state) || under(a, r.Workdir) || slices.Contains(out, a) {
			continue
		}
		if fi, err := os.Stat(a); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if slices.ContainsFunc(hidden, func(h string) bool { return under(a, h) }) &&
			!slices.ContainsFunc(tools, func(d string) bool { return under(a, d) }) {
			out = append(out, filepath.Clean(a))
		}
	}
	return out
}

// lookPath finds prog in the directories of path, as a shell would.
func lookPath(prog, path string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		f := filepath.Join(d, prog)
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", exec.ErrNotFound
}

type builder struct{ args []string }

func (b *builder) add(a ...string) { b.args = append(b.args, a...) }

// toolDirs lists what must stay reachable under the hidden roots: each
// PATH directory there, as binDir widens it.
func toolDirs(env []string, hidden []string) []string {
	var out []string
	for _, d := range filepath.SplitList(Getenv(env, "PATH")) {
		cands := []string{filepath.Clean(d)}
		if r, err := filepath.EvalSymlinks(d); err == nil {
			cands = append(cands, r)
		}
		for _, c := range cands {
			if b := binDir(c, hidden); b != "" && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}

// binDir returns directory d when it lies below one of the hidden roots
// and exists, widened to its parent when it is named bin or .bin (an npm
// prefix's lib/, node_modules, ~/.local/share); "" otherwise.
func binDir(d string, hidden []string) string {
	if !filepath.IsAbs(d) || !exists(d) {
		return ""
	}
	for _, h := range hidden {
		if !under(d, h) || d == h {
			continue
		}
		if b := filepath.Base(d); (b == "bin" || b == ".bin") && filepath.Dir(d) != h {
			d = filepath.Dir(d)
		}
		return d
	}
	return ""
}

// Hides reports whether the file at path, symbolic links resolved, is one
// the sandbox of a process with environment env hides: under its home or
// /tmp (both replaced) and neither in the repository nor in loopr's own
// prompts (<state>/prompts). loopr must not read such a file into what the
// agent gets: a prompt template naming ~/.ssh/id_ed25519, or a link in the
// repository pointing there, would hand it to the agent.
func (p Policy) Hides(path string, env []string) bool {
	if !p.On() || path == "" {
		return false
	}
	real := resolved(path)
	if p.Workspace != "" && under(real, resolved(p.Workspace)) ||
		p.State != "" && under(real, resolved(filepath.Join(p.State, "prompts"))) {
		return false
	}
	home := Getenv(env, "HOME")
	for _, h := range []string{home, otherHome(home), "/tmp"} {
		if h != "" && h != "/" && under(real, resolved(h)) {
			return true
		}
	}
	return false
}

// otherHome is the home of the user loopr runs as when it is not home
// (the agent's HOME, which a profile's env: may set elsewhere) nor below
// it: hidden too, or the sandbox would show ~/.ssh and ~/.aws read-only.
func otherHome(home string) string {
	u, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(u) || filepath.Clean(u) == "/" {
		return ""
	}
	u = filepath.Clean(u)
	if home != "" && (under(u, home) || home == u) {
		return ""
	}
	return u
}

// resolved is path with its symbolic links resolved, as clean as it is
// when that fails.
func resolved(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// gitPointers lists what tells git, run by loopr outside the sandbox in
// the workdir, where its repository and configuration are: the workdir's
// .git (a worktree's gitdir file, or the workspace's own .git directory
// with its hooks and config) and the worktree administrative directory's
// commondir, gitdir and config.worktree. They are bound read-only over
// the writable workdir and administrative directory: an agent that
// rewrote one could point loopr's next git add or commit at a
// configuration of its own (core.hooksPath, core.fsmonitor) and run
// commands outside the sandbox.
func gitPointers(workdir, admin string) []string {
	var out []string
	if f := filepath.Join(workdir, ".git"); exists(f) {
		out = append(out, f)
	}
	if admin == "" {
		return out
	}
	for _, name := range []string{"commondir", "gitdir", "config.worktree"} {
		if f := filepath.Join(admin, name); exists(f) {
			out = append(out, f)
		}
	}
	return out
}

// gitDirs reads workdir/.git when it is a file (a linked worktree) and
// returns its administrative directory and the repository's .git.
func gitDirs(workdir string) (admin, common string) {
	data, err := os.ReadFile(filepath.Join(workdir, ".git"))
	if err != nil {
		return "", ""
	}
	admin, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !ok {
		return "", ""
	}
	if !filepath.IsAbs(admin) {
		admin = filepath.Join(workdir, admin)
	}
	if !exists(admin) {
		return "", ""
	}
	common = filepath.Clean(filepath.Join(admin, "..", ".."))
	if c, err := os.ReadFile(filepath.Join(admin, "commondir")); err == nil {
		c := strings.TrimSpace(string(c))
		if !filepath.IsAbs(c) {
			c = filepath.Join(admin, c)
		}
		common = filepath.Clean(c)
	}
	return admin, common
}

// AllowList is what network allow admits: allow_hosts, or by default the
// preset's Hosts plus the host:port of its base-URL variables set in env.
func (p Policy) AllowList(env []string) []string {
	if len(p.AllowHosts) > 0 {
		return p.AllowHosts
	}
	ps, _ := preset.Get(p.Preset)
	out := slices.Clone(ps.Hosts)
	for _, name := range ps.BaseURLEnv {
		if hp := hostPort(Getenv(env, name)); hp != "" && !slices.Contains(out, hp) {
			out = append(out, hp)
		}
	}
	return out
}

// hostPort is a URL's host:port, the port from the scheme when it has
// none; "" for what is not an http(s) URL.
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	switch {
	case port != "":
	case u.Scheme == "https":
		port = "443"
	case u.Scheme == "http":
		port = "80"
	default:
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Loopback returns the entries of hosts on a loopback address (127.0.0.1,
// ::1, localhost): the shim listens on those inside the namespace.
func Loopback(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		host, _, err := net.SplitHostPort(h)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			out = append(out, h)
		}
	}
	return out
}

// Describe says in one line what sandbox p is, for `loopr status`:
// "none", "bwrap, network none", "bwrap, network allow (api.anthropic.com:443)".
func (p Policy) Describe(env []string) string {
	if !p.On() {
		return "none"
	}
	s := "bwrap, network " + p.NetworkOrDefault()
	if p.NetworkOrDefault() == config.NetworkAllow {
		s += " (" + strings.Join(p.AllowList(env), ", ") + ")"
	}
	return s
}

// Check reports whether bwrap is installed and can make its namespaces
// here: it runs `bwrap --ro-bind / / true`.
func Check() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("bubblewrap needs Linux: loopr has no sandbox on %s (it does not use sandbox-exec)", runtime.GOOS)
	}
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return errors.New("bubblewrap (bwrap) is not installed")
	}
	out, err := exec.Command(path, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("bwrap cannot create namespaces here: %s", firstLine(msg))
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Getenv is the value of name in env ("" when unset), the last one
// winning as in exec.
func Getenv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val // the last one wins, as in exec
		}
	}
	return v
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
