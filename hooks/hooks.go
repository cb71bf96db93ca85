// Package hooks runs the lifecycle hooks of loopr.yml (`hooks:` and
// loops.<type>.hooks) and copies worktree.copy's files into new worktrees.
// The manager (loopmgr) decides when a hook runs and what its failure
// does; this package only runs it and reports.
//
// A hook is a list of shell commands. Each runs as `sh -c COMMAND`, one
// after the other, in the hook's directory (the loop's worktree, or the
// merge worktree for before_merge), until one fails. The sh is neither a
// login nor an interactive shell, so it reads no profile (~/.profile,
// ~/.bashrc); its environment is the one the loop's validate commands get
// (Spec.Base: the allowlisted variables of the daemon's and the profile's
// env:, package procenv) without what would make a shell run code of its
// own at start (ProfileVars: BASH_ENV, ENV and exported bash functions,
// should env_pass name them), plus LOOPR_LOOP_ID, LOOPR_WORKTREE,
// LOOPR_BRANCH, LOOPR_PLAN_BRANCH, LOOPR_HOOK, LOOPR_HOME, CI=true,
// GIT_TERMINAL_PROMPT=0 and PWD naming its directory (package procenv).
//
// Each command runs in its own process group (and, where the daemon has
// them, its own cgroup: runner.RunCommand), as an agent does: when it ends,
// or at the hook's timeout (timeout_secs, for all its commands together),
// the group gets SIGTERM and, Grace later, SIGKILL; what it started ends
// with it, detached or not. A hook therefore cannot leave a service
// running behind it.
//
// The output of every command, stdout and stderr interleaved, is appended
// to the log the caller names (iterations/<NNN>/hooks/<name>.log), at most
// MaxLog bytes a run, secrets redacted (Spec.Redact); the Result carries
// its last line for the journal.
package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/contain"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/runner"
)

// Grace is how long a hook's process group has between SIGTERM and SIGKILL.
const Grace = 2 * time.Second

// MaxLog bounds the output one run of a hook writes to its log.
const MaxLog = 256 << 10

// Env is what a hook is told about its loop.
type Env struct {
	Home       string // the daemon's home (LOOPR_HOME)
	Loop       string // LOOPR_LOOP_ID
	Worktree   string // LOOPR_WORKTREE: the loop's worktree ("" when it has none)
	Branch     string // LOOPR_BRANCH: the loop's branch
	PlanBranch string // LOOPR_PLAN_BRANCH: its plan's integration branch
}

// Spec is one run of a hook.
type Spec struct {
	Name string      // after_create, before_run, …
	Hook config.Hook // its commands, timeout and on_error
	Dir  string      // where its commands run
	Log  string      // the file its output is appended to
	Env  Env
	// Base is the environment the hook starts from: its loop's profile's
	// (procenv.Profile.Commands); nil: the base set of the daemon's
	// (procenv.Allowed).
	Base []string
	Jail *contain.Jail // nil: process groups alone
	// Redact replaces secrets in the output before it is logged or kept
	// in the Result (the daemon's one Redactor). nil: token shapes only.
	Redact *redact.Redactor
}

// Result is how a run of a hook went.
type Result struct {
	Name     string
	OnError  string
	Err      error  // nil: every command exited 0
	Command  string // the command that failed
	LastLine string // the last non-empty line of the output
	Tail     string // the end of the output (4 KiB at most)
	Log      string
	Duration time.Duration
}

// Failed reports whether a command of the hook failed.
func (r Result) Failed() bool { return r.Err != nil }

// Summary words the result in one line for the journal and a gate:
// "hook before_run failed: `make db`: exit status 2 (last line: …)".
func (r Result) Summary() string {
	if r.Err == nil {
		return fmt.Sprintf("hook %s passed in %s", r.Name, r.Duration.Round(time.Millisecond))
	}
	s := fmt.Sprintf("hook %s failed: `%s`: %v", r.Name, clip(r.Command, 80), r.Err)
	if r.LastLine != "" {
		s += " (last line: " + clip(r.LastLine, 160) + ")"
	}
	return s
}

// Run runs s's commands and returns once each has ended with everything
// it started. A cancelled ctx stops the command under way as a timeout does.
func Run(ctx context.Context, s Spec) Result {
	start := time.Now()
	res := Result{Name: s.Name, OnError: s.Hook.OnError, Log: s.Log}
	defer func() { res.Duration = time.Since(start) }()
	log, err := openLog(s.Log)
	if err != nil {
		res.Err = fmt.Errorf("open its log: %w", err)
		return res
	}
	defer log.Close()
	out := &bounded{w: log, left: MaxLog}
	fmt.Fprintf(out, "== hook %s, %s, in %s\n", s.Name, start.UTC().Format(time.RFC3339), s.Dir)
	out.tail.Reset() // the header is not the hook's output
	timeout := s.Hook.Timeout()
	if timeout <= 0 {
		timeout = config.DefaultHookTimeoutSecs * time.Second
	}
	deadline := start.Add(timeout)
	base := s.Base
	if base == nil {
		base = procenv.Allowed(os.Environ())
	}
	env := Environ(base, s.Name, s.Dir, s.Env)
	for i, cmd := range s.Hook.Run {
		fmt.Fprintf(log, "$ %s\n", cmd)
		left := time.Until(deadline)
		err := errors.New("timed out before it started")
		if left > 0 {
			w := s.Redact.Writer(out)
			err = runner.RunCommand(ctx, runner.Command{
				Argv: []string{"sh", "-c", cmd}, Dir: s.Dir, Env: env,
				Timeout: left, Grace: Grace, Jail: s.Jail,
				Name: fmt.Sprintf("%s.hook.%s.%d", s.Env.Loop, s.Name, i), Home: s.Env.Home, Loop: s.Env.Loop,
			}, w)
			w.Close() // the end of an unfinished last line
			if err != nil && left < timeout && strings.HasPrefix(err.Error(), "timed out") {
				err = fmt.Errorf("timed out: the hook's timeout_secs %d ran out", s.Hook.TimeoutSecs)
			}
		}
		if err != nil {
			res.Err, res.Command, res.LastLine, res.Tail = err, cmd, out.lastLine(), out.tailText()
			fmt.Fprintf(log, "== %v\n", err)
			return res
		}
	}
	res.LastLine = out.lastLine()
	fmt.Fprintf(log, "== ok in %s\n", time.Since(start).Round(time.Millisecond))
	return res
}

// ProfileVars are the variables of the daemon's environment a hook does
// not get: those that make a non-interactive shell run code before the
// hook's own (BASH_ENV, ENV), and exported bash functions (BASH_FUNC_…).
var ProfileVars = []string{"BASH_ENV", "ENV"}

// Environ returns a hook's environment: base without ProfileVars, exported
// functions and the variables it sets, then those (LOOPR_*, CI,
// GIT_TERMINAL_PROMPT). PWD is set where the command starts.
func Environ(base []string, name, dir string, e Env) []string {
	set := []string{
		"LOOPR_HOME=" + e.Home, "LOOPR_LOOP_ID=" + e.Loop, "LOOPR_WORKTREE=" + e.Worktree,
		"LOOPR_BRANCH=" + e.Branch, "LOOPR_PLAN_BRANCH=" + e.PlanBranch, "LOOPR_HOOK=" + name,
		"CI=true", "GIT_TERMINAL_PROMPT=0",
	}
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(ProfileVars, k) && !strings.HasPrefix(k, "BASH_FUNC_") {
			out = append(out, kv)
		}
	}
	return procenv.Set(out, set...)
}

// syntaxTimeout bounds one `sh -n`.
const syntaxTimeout = 10 * time.Second

// Syntax checks cmd with `sh -n -c`: nil when sh parses it, else sh's
// message. It runs nothing of cmd.
func Syntax(ctx context.Context, cmd string) error {
	ctx, cancel := context.WithTimeout(ctx, syntaxTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-n", "-c", cmd)
	c.Env = Environ(procenv.Allowed(os.Environ()), "", "", Env{})
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			return fmt.Errorf("sh -n: %w", err)
		}
		first, _, _ := strings.Cut(msg, "\n")
		return fmt.Errorf("sh -n: %s", first)
	}
	return nil
}

// openLog opens path for appending, making its directory; a symlink at
// path is refused (O_NOFOLLOW). The directory (<iteration>/hooks) lies in
// the iteration directory the agent could write: a symbolic link or file
// it left there is removed first, so the log is never created where such
// a link points.
func openLog(path string) (*os.File, error) {
	if path == "" {
		return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		if err := os.Remove(dir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}

// bounded writes at most left bytes to w and keeps the last tailSize
// bytes written to it, for the last line.
type bounded struct {
	w    io.Writer
	left int
	cut  bool
	tail bytes.Buffer
}

const tailSize = 4 << 10

func (b *bounded) Write(p []byte) (int, error) {
	n := len(p)
	if b.left > 0 {
		k := min(len(p), b.left)
		_, _ = b.w.Write(p[:k])
		b.left -= k
	} else if !b.cut {
		b.cut = true
		_, _ = fmt.Fprintf(b.w, "\n[… output cut at %d bytes]\n", MaxLog)
	}
	if len(p) > tailSize {
		p = p[len(p)-tailSize:]
	}
	b.tail.Write(p)
	if b.tail.Len() > 2*tailSize {
		keep := append([]byte(nil), b.tail.Bytes()[b.tail.Len()-tailSize:]...)
		b.tail.Reset()
		b.tail.Write(keep)
	}
	return n, nil
}

// tailText returns the last tailSize bytes written.
func (b *bounded) tailText() string {
	t := b.tail.Bytes()
	if len(t) > tailSize {
		t = t[len(t)-tailSize:]
	}
	return strings.ToValidUTF8(string(t), "?")
}

// lastLine returns the last non-empty line written.
func (b *bounded) lastLine() string {
	lines := strings.Split(b.tailText(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
