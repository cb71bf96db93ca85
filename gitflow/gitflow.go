// Package gitflow gives loops their own git branches and worktrees, by running
// the real git binary (argv only, never a shell).
//
// The flow (SPEC §6 "Git flow"): a plan gets an integration branch
// loopr/<slug>-<short-id> (names.go) taken from the user's HEAD; each ralph
// loop works on its own branch of that form in its own worktree
// <home>/worktrees/<id>; plan, spec and phase
// loops get a detached worktree of the plan branch whose changes are thrown
// away. A finished ralph branch is merged into the plan branch inside a
// dedicated integration worktree, so the user's checkout — current branch,
// index and working tree — is never touched: every command that runs in the
// user's repository only reads, creates refs or administers worktrees.
//
// With Repo.Remote (git.remote), workers on several machines share the
// branches through one remote: loop branches are fetched before a loop
// starts and pushed after each iteration, and merges into a plan branch
// happen on the remote under a lock every worker shares (remote.go).
//
// Every id and branch that becomes a path or a ref is checked first; nothing a
// caller passes can escape <home>/worktrees.
package gitflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/internal/safefile"
)

var (
	// ErrNotRepo means the directory is not inside a git working tree.
	ErrNotRepo = errors.New("not a git repository")
	// ErrNoGit means no git binary is on PATH.
	ErrNoGit = errors.New("git not found")
	// ErrNoCommits means the repository has no commit to branch from yet.
	ErrNoCommits = errors.New("repository has no commits yet")
	// ErrInvalidID means an id or branch name is not safe to use as a path
	// element or ref.
	ErrInvalidID = errors.New("invalid name")
)

// ConflictError reports a merge that stopped on conflicts. The merge has been
// aborted: the target branch and the integration worktree are clean.
type ConflictError struct {
	Branch string   // the branch being merged, e.g. loopr/<id>
	Into   string   // the target branch, e.g. loopr/<plan>
	Files  []string // conflicting paths, sorted
	Output string   // what git merge printed
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merge of %s into %s conflicts in %s", e.Branch, e.Into, strings.Join(e.Files, ", "))
}

// Repo is a git repository loopr works on. Use it through a pointer; its
// methods are safe for concurrent use by one process.
type Repo struct {
	Root string       // top level of the user's working tree
	Home string       // loopr's home, normally <workspace>/.loopr
	Log  *slog.Logger // nil logs nothing
	// Timeout bounds each git command whose context has no deadline;
	// 0 means DefaultTimeout.
	Timeout time.Duration
	// Remote names the git remote (git.remote, e.g. origin) that workers
	// on several machines share: loop branches are fetched from it and
	// pushed to it, and merges into a plan branch happen on it (remote.go).
	// "" = this repository only, as on one machine.
	Remote string
	// Lock serializes merges into one plan branch across every worker
	// sharing Remote (an etcd mutex); it is taken with the branch's name,
	// after this process's own lock. nil = this process's lock only.
	Lock Locker

	admin sync.Mutex // serializes worktree add, remove and prune (lockAdmin)

	commonOnce sync.Once // finds the common git directory, for lockAdmin
	common     string
	commonErr  error

	mu      sync.Mutex
	targets map[string]chan struct{} // one-slot semaphores: merges per target branch

	remoteMu sync.Mutex // serializes fetches and pushes (they write the same refs)
	fetch    fetchState // shares fetches among the callers of Fetch
}

// Open finds the repository that holds dir. home is loopr's home directory
// ("" means <root>/.loopr). When the home lies inside the working tree, Open
// adds it to .git/info/exclude (once) so it never shows as untracked.
func Open(dir, home string, log *slog.Logger) (*Repo, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGit, err)
	}
	r := &Repo{Log: log}
	ctx := context.Background()
	out, err := r.git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && (strings.Contains(ge.stderr, "not a git repository") ||
			strings.Contains(ge.stderr, "must be run in a work tree")) {
			return nil, fmt.Errorf("%s: %w", dir, ErrNotRepo)
		}
		return nil, err
	}
	r.Root = filepath.FromSlash(strings.TrimSpace(out))
	if home == "" {
		home = filepath.Join(r.Root, ".loopr")
	}
	if r.Home, err = filepath.Abs(home); err != nil {
		return nil, fmt.Errorf("home %s: %w", home, err)
	}
	if err := r.excludeHome(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// EnsurePlanBranch creates a plan's integration branch (Branch) at the
// current HEAD unless it exists. It uses `git branch`, never checkout: the
// user's current branch and working tree stay as they are. With Remote, the
// branch is the remote's: fetched when it is there, else created and pushed
// (a concurrent create that loses takes the remote's); the local branch
// follows when that loses nothing.
func (r *Repo) EnsurePlanBranch(ctx context.Context, branch string) error {
	if err := checkOurs(branch); err != nil {
		return err
	}
	if r.Remote != "" {
		return r.ensureRemotePlan(ctx, branch)
	}
	if ok, err := r.branchExists(ctx, branch); err != nil || ok {
		return err
	}
	head, err := r.resolve(ctx, "HEAD")
	if err != nil {
		return fmt.Errorf("plan branch %s: %w: make a first commit, then start the plan again", branch, ErrNoCommits)
	}
	if _, err := r.git(ctx, r.Root, "branch", "--no-track", branch, head); err != nil {
		// Lost a race with another caller? Then the branch is there now.
		if ok, err2 := r.branchExists(ctx, branch); err2 == nil && ok {
			return nil
		}
		return fmt.Errorf("create plan branch %s: %w", branch, err)
	}
	r.logger().Info("created plan branch", "branch", branch, "from", head)
	return nil
}

// CommitAll stages everything in the worktree dir and commits it with
// message, as the fixed identity loopr <loopr@localhost> with hooks and
// signing off, so it works on machines without a git identity. It reports
// whether a commit was made. dir must be a worktree under <home>/worktrees:
// CommitAll refuses to commit in the user's own checkout.
func (r *Repo) CommitAll(ctx context.Context, dir, message string) (committed bool, err error) {
	if strings.TrimSpace(message) == "" {
		return false, errors.New("commit in " + dir + ": empty message")
	}
	if err := r.checkOwnWorktree(ctx, dir); err != nil {
		return false, err
	}
	if _, err := r.git(ctx, dir, "add", "-A"); err != nil {
		return false, err
	}
	_, err = r.git(ctx, dir, "diff", "--cached", "--quiet")
	switch code := exitCode(err); {
	case err == nil:
		return false, nil // nothing staged
	case code != 1:
		return false, err
	}
	args := append(identityArgs(), "commit", "--no-verify", "--quiet", "-m", message)
	if _, err := r.gitEnv(ctx, dir, identityEnv, args...); err != nil {
		return false, err
	}
	return true, nil
}

// identityArgs are the -c flags that make commits work without a configured
// identity and never block on signing or rerere.
func identityArgs() []string {
	return []string{
		"-c", "user.name=loopr", "-c", "user.email=loopr@localhost",
		"-c", "commit.gpgsign=false", "-c", "rerere.enabled=false",
	}
}

// identityEnv overrides GIT_AUTHOR_*/GIT_COMMITTER_* that the daemon may have
// inherited; they would win over the -c flags.
var identityEnv = []string{
	"GIT_AUTHOR_NAME=loopr", "GIT_AUTHOR_EMAIL=loopr@localhost",
	"GIT_COMMITTER_NAME=loopr", "GIT_COMMITTER_EMAIL=loopr@localhost",
}

func (r *Repo) logger() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// excludeHome keeps the home out of `git status` when it lies inside the
// working tree, through .git/info/exclude rather than the user's .gitignore.
func (r *Repo) excludeHome(ctx context.Context) error {
	rel, err := filepath.Rel(canon(r.Root), canon(r.Home))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil // home is outside the working tree
	}
	pattern := "/" + escapePattern(filepath.ToSlash(rel)) + "/"
	out, err := r.git(ctx, r.Root, "rev-parse", "--git-path", "info/exclude")
	if err != nil {
		return err
	}
	path := filepath.FromSlash(strings.TrimSpace(out))
	if !filepath.IsAbs(path) {
		path = filepath.Join(r.Root, path)
	}
	data, err := safefile.ReadFollow(path, 1<<20) // a planted FIFO must not hang the start
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read exclude file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if strings.TrimSpace(line) == pattern {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("exclude home: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("exclude home: %w", err)
	}
	var b strings.Builder
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		b.WriteString("\n")
	}
	b.WriteString("# loopr's home (worktrees, database, logs)\n" + pattern + "\n")
	if _, err := io.WriteString(f, b.String()); err != nil {
		f.Close()
		return fmt.Errorf("exclude home: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("exclude home: %w", err)
	}
	r.logger().Info("excluded loopr home from git status", "file", path, "pattern", pattern)
	return nil
}

// escapePattern quotes the gitignore wildcard characters in a literal path.
func escapePattern(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\*?[!# `, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// canon returns an absolute path with symlinks resolved as far as the path
// exists, so paths git reports compare equal to the ones we build.
func canon(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(canon(parent), filepath.Base(p))
}
