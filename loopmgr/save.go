package loopmgr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/runner"
)

// Git work after an iteration.
//
// Committing what the agent left (and, with validate_in: clean,
// validating the commit in a fresh checkout) can take long (a huge file,
// a slow file system, a test suite), so it runs on the iteration's own
// goroutine, never on the manager's: scheduling, cancels and shutdown go
// on meanwhile. Every git command has a deadline: gitWorkTimeout
// normally, stopGitTimeout once the daemon is stopping, so a stop never
// waits on git for long. A passed loop's branch is merged later, by the
// merge queue (merge.go), once the pass is recorded.

const (
	gitWorkTimeout = 10 * time.Minute
	stopGitTimeout = 20 * time.Second
)

// saved is the outcome of the git work after one iteration.
type saved struct {
	err error // the work could not be put on the loop's branch
	// commit is the branch's tip once the work is on it: what was
	// validated, and what the merge queue merges when the iteration passed.
	commit string
	// unchanged: the iteration passed but the loop's branch holds no
	// commit past the base it was made from (require_changes: no pass).
	unchanged bool
	// merge: the loop passed and its branch is to be merged into its
	// plan's branch (the merge queue): the pass is recorded merging.
	merge bool
}

// save commits the agent's work onto the loop's branch (repairing what
// gitflow.SaveWork can) and pushes it to git.remote when set; the fence
// is checked before every push. For a passed iteration it says whether
// the branch is to be merged into a plan branch.
func (m *Manager) save(ctx context.Context, a *active, job runner.Job, res runner.Result) saved {
	l := job.Loop
	if m.o.Git == nil || !ownBranch(l.Type) || job.Workdir == "" {
		return saved{}
	}
	timeout := gitWorkTimeout
	m.mu.Lock()
	if a.stopping {
		timeout = stopGitTimeout
	}
	m.mu.Unlock()
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	msg := gitflow.CommitMessage(l.Type, l.Title, a.iteration, l.ID)
	branch, err := m.o.Git.Branch(gctx, l.ID, l.Title)
	if err != nil {
		return saved{err: err}
	}
	if _, err := m.o.Git.SaveWork(gctx, job.Workdir, branch, msg); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("git gave no answer within %s: %w", timeout, err)
		}
		return saved{err: err}
	}
	fence := m.fenceFor(l.ID, a.iteration)
	if m.o.Git.Remote != "" {
		// The next iteration may run on another machine: it continues
		// from the remote's branch. A worker fenced out pushes nothing,
		// and a push whose lease on the branch is stale (another worker
		// pushed since this iteration began) is refused.
		err := fence(gctx)
		if err == nil {
			err = m.o.Git.PushBranch(gctx, branch, a.synced)
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("git gave no answer within %s: %w", timeout, err)
			}
			return saved{err: err}
		}
	}
	sv := saved{}
	if sv.commit, err = m.o.Git.Tip(gctx, branch); err != nil {
		return saved{err: err}
	}
	if res.Outcome != runner.Passed {
		return sv
	}
	root, err := m.root(l)
	if err != nil {
		return saved{err: err}
	}
	base := "HEAD" // as worktree() made the branch
	if root.Type == loop.Plan {
		if base, err = m.o.Git.Branch(gctx, root.ID, root.Title); err != nil {
			return saved{err: err}
		}
	}
	if m.cfg().Loop(l.Type).RequireChanges {
		n, err := m.o.Git.Ahead(gctx, branch, base)
		if err != nil {
			m.log.Warn("require_changes: count the loop's commits", "loop", l.ID, "err", err)
		} else if n == 0 {
			sv.unchanged = true // nothing to merge either
			return sv
		}
	}
	sv.merge = root.Type == loop.Plan && root.ID != l.ID
	return sv
}

// fenceFor is Options.Fence for one iteration, for the git steps: nil error
// while the iteration's lease is still this process's.
func (m *Manager) fenceFor(id string, iteration int) func(context.Context) error {
	return func(ctx context.Context) error {
		if m.o.Fence == nil {
			return nil
		}
		return m.o.Fence(ctx, id, iteration)
	}
}

// checker runs validation commands: *runner.Runner, whose jail contains
// them. A Runner that is not one (tests' fakes) gets a plain runner.
type checker interface {
	RunChecks(ctx context.Context, c runner.Check) ([]loop.Evidence, *runner.CheckFailure)
}

func (m *Manager) checker() checker {
	if c, ok := m.o.Runner.(checker); ok {
		return c
	}
	return &runner.Runner{Redact: m.o.Redact}
}

// sandboxer is the runner's sandbox for checks outside an iteration.
type sandboxer interface {
	CheckSandbox(s runner.Settings, l loop.Loop, dir string, env []string) (func([]string) ([]string, error), func(), error)
}

// maxCleanLog bounds validation-clean.log.
const maxCleanLog = 1 << 20

// afterSave completes the iteration's evidence with the commit its
// validation ran on, and for a pass of a type with validate_in: clean runs
// validate again in a fresh checkout of that commit: files the agent left
// uncommitted (or ignored) cannot make it pass. A clean run that fails
// fails the iteration.
func (m *Manager) afterSave(ctx context.Context, job runner.Job, res runner.Result, sv saved) runner.Result {
	l := job.Loop
	for i := range res.Evidence {
		if res.Evidence[i].Commit == "" {
			res.Evidence[i].Commit = sv.commit
		}
	}
	ls := m.cfg().Loop(l.Type)
	if res.Outcome != runner.Passed || sv.err != nil || sv.unchanged || sv.commit == "" ||
		ls.ValidateIn != config.ValidateInClean || len(ls.Validate) == 0 {
		return res
	}
	fail := func(reason, feedback string) runner.Result {
		res.Outcome, res.Reason = runner.Failed, reason
		res.Feedback = fmt.Sprintf("Iteration %d failed: %s.\n%s", l.Iteration, reason, feedback)
		return res
	}
	dir, remove, err := m.o.Git.CleanCheckout(ctx, l.ID, sv.commit)
	if err != nil {
		return fail("validate_in: clean: "+err.Error(), "")
	}
	defer remove()
	var log bytes.Buffer
	// What the worktree's validate got (the profile's allowlist and env:,
	// no secret), told about this checkout.
	own := append(slices.Clone(job.Settings.Env), "LOOPR_LOOP_ID="+l.ID, "LOOPR_LOOP_TYPE="+l.Type,
		"LOOPR_ITERATION="+strconv.Itoa(l.Iteration), "LOOPR_WORKDIR="+dir, "LOOPR_HOME="+m.svc.Paths.Home)
	env := procenv.Set(job.Settings.Profile.Commands(os.Environ()), own...)
	// They run the agent's code: in its sandbox, as its worktree's did.
	var wrap func([]string) ([]string, error)
	if sb, ok := m.o.Runner.(sandboxer); ok {
		w, end, err := sb.CheckSandbox(job.Settings, l, dir, env)
		if err != nil {
			return fail("validate_in: clean: "+err.Error(), "")
		}
		defer end()
		wrap = w
	}
	ev, f := m.checker().RunChecks(ctx, runner.Check{
		Commands: ls.Validate, Dir: dir, Env: env, Log: limitWriter{&log, maxCleanLog}, Wrap: wrap,
		Where: loop.WhereClean, Commit: sv.commit, Started: func(pid int) { m.RecordPID(l.ID, pid) },
		Name: fmt.Sprintf("%s.%d.clean", l.ID, l.Iteration), Loop: l.ID, Home: m.svc.Paths.Home, Worktree: dir,
	})
	res.Evidence = append(res.Evidence, ev...)
	if res.Dir != "" {
		if err := safefile.WriteAtomic(filepath.Join(res.Dir, "validation-clean.log"), log.Bytes(), 0o644); err != nil {
			m.log.Warn("validation-clean.log", "loop", l.ID, "err", err)
		}
	}
	switch {
	case f == nil:
		return res
	case f.Cancelled:
		res.Outcome, res.Reason = runner.Cancelled, f.Reason
		return res
	}
	out := log.String()
	if len(out) > runner.DefaultFeedbackBytes {
		out = strings.ToValidUTF8(out[len(out)-runner.DefaultFeedbackBytes:], "")
	}
	return fail("in a clean checkout of "+loop.ShortCommit(sv.commit)+" (validate_in: clean): "+f.Reason,
		"Validation passed in your worktree but not in a fresh checkout of what was committed: it depends on files that are not committed (untracked or ignored). Commit what the change needs.\nEnd of validation-clean.log:\n"+out)
}

// limitWriter writes at most n bytes to w and drops the rest.
type limitWriter struct {
	w *bytes.Buffer
	n int
}

func (l limitWriter) Write(p []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
