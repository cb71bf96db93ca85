package gitflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// gitError is a git command that did not exit 0. It unwraps to the
// *exec.ExitError (or the start error) and carries git's stderr.
type gitError struct {
	args   []string
	stdout string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = strings.TrimSpace(e.stdout)
	}
	if len(msg) > 2000 {
		msg = "…" + msg[len(msg)-2000:]
	}
	if msg == "" {
		return fmt.Sprintf("git %s: %v", strings.Join(e.args, " "), e.err)
	}
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.args, " "), e.err, msg)
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is the exit status of a failed git command, 0 for nil, -1 when git
// did not run to an exit.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// git runs git with args in dir and returns its stdout.
func (r *Repo) git(ctx context.Context, dir string, args ...string) (string, error) {
	return r.gitEnv(ctx, dir, nil, args...)
}

// gitEnv is git with extra environment entries, which win over inherited ones.
func (r *Repo) gitEnv(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		// No caller-given deadline: git never runs unbounded (a huge
		// file, a hung file system, a lock held forever).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout())
		defer cancel()
	}
	// core.hooksPath=/dev/null: the user's hooks never run for loopr's own
	// git work (--no-verify leaves post-commit, post-merge and
	// post-checkout running; a slow one stalled merges and shutdown).
	argv := append([]string{"-C", dir, "-c", "core.hooksPath=/dev/null"}, args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	cmd.Env = append(baseEnv(), env...)
	// git stays in the daemon's process group: the containment (package
	// contain) takes a child of the daemon outside it for an agent's
	// stray and kills it. A timeout kills git; what git started (ssh, a
	// local remote's receive-pack and its hooks) gets WaitDelay to go.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r.logger().Debug("git", "dir", dir, "args", args)
	err := cmd.Run()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			err = fmt.Errorf("%w: %w", ErrNoGit, err)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.String(), &gitError{args: args, stdout: stdout.String(), stderr: stderr.String(), err: err}
	}
	return stdout.String(), nil
}

// scrubbed are inherited variables that would point git at another
// repository or index than the -C directory (set, for example, when the
// daemon is started from a git hook).
var scrubbed = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true,
	"GIT_OBJECT_DIRECTORY": true, "GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_COMMON_DIR": true, "GIT_NAMESPACE": true, "GIT_PREFIX": true,
}

// baseEnv is the environment of every git command: the daemon's (git acts
// for the user, with their credential helpers and ssh agent; no agent's
// allowlist, package procenv, applies), without
// repository overrides, in the C locale (error texts are matched) and never
// prompting on a terminal (a push or fetch that needs a password fails
// instead of waiting for one; ssh asks on the terminal of a daemon started
// in the foreground unless an agent or BatchMode spares it).
func baseEnv() []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !scrubbed[k] {
			env = append(env, kv)
		}
	}
	// GCM_INTERACTIVE: Git Credential Manager fails instead of opening a
	// window or a device-code prompt nobody sees.
	return append(env, "LC_ALL=C", "LANGUAGE=C", "GIT_TERMINAL_PROMPT=0", "GCM_INTERACTIVE=never")
}

// DefaultTimeout bounds every git command loopr runs whose caller gave no
// deadline.
const DefaultTimeout = 10 * time.Minute

func (r *Repo) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}
