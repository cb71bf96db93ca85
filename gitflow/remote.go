package gitflow

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Git across machines (git.remote).
//
// Workers on several machines each work in a clone of one shared
// repository, which every clone knows as the remote Repo.Remote (e.g.
// origin). A loop's branch lives on the remote between iterations, so the
// next iteration may run on any machine:
//
//   - EnsurePlanBranch takes a plan's branch from the remote, or creates it
//     there (a concurrent create that loses takes the winner's);
//   - SyncBranch, before a loop starts, fetches and takes the loop's branch
//     from the remote, or starts it from the remote's plan branch;
//     worktrees of plan, spec and phase loops are made on the fetched plan
//     branch;
//   - PushBranch, after an iteration that committed, pushes the loop's
//     branch with --force-with-lease=<the tip SyncBranch found>, so the
//     push of a worker whose loop was given to another meanwhile (fenced
//     out) is refused once the other has pushed;
//   - MergeWith merges a passed loop's branch into the plan branch on the
//     remote under a lock every worker shares (Repo.Lock): fetch, merge in
//     the integration worktree, check the fence, push; a push refused
//     because the plan branch moved starts again, MergeAttempts times in
//     all.
//
// Fetches write only refs/remotes/<remote>/loopr/*. A local plan branch
// follows the remote's only by fast forwards; a loop's own branch follows
// the remote's, which wins over local commits it lacks (SyncBranch). The
// user's checkout is never touched. Credentials are git's own (ssh agent,
// credential helper); git's own password prompt is off (baseEnv).

// ErrPushRejected means the remote refused a push because its branch was
// not where the push expected it (another worker pushed first): fetch and
// try again, or give up.
var ErrPushRejected = errors.New("push rejected")

// RemoteError is a fetch or push that did not get through to the remote:
// it could not be reached, gave no answer in time, or refused the
// credentials. Nothing changed there; trying again later may work.
type RemoteError struct {
	msg string
	err error
}

func (e *RemoteError) Error() string { return e.msg }
func (e *RemoteError) Unwrap() error { return e.err }

// MergeAttempts is how many times MergeWith tries fetch, merge and push
// when the remote refuses the push because the plan branch moved.
const MergeAttempts = 5

// retryBase is the first wait between merge attempts; it doubles each
// time, with jitter.
var retryBase = 250 * time.Millisecond

// MergeOptions are the extras of MergeWith.
type MergeOptions struct {
	// Fence, if set, is called under the merge lock just before the plan
	// branch moves (the push with Remote, the merge without): an error
	// stops the merge and nothing moves. The loop manager's fence checks
	// that the loop's lease is still this worker's.
	Fence func(ctx context.Context) error
}

// CheckRemote makes sure Remote (when set) is a remote of the repository,
// for the daemon's start.
func (r *Repo) CheckRemote(ctx context.Context) error {
	if r.Remote == "" {
		return nil
	}
	if err := checkRemoteName(r.Remote); err != nil {
		return fmt.Errorf("git.remote %q: %w", r.Remote, err)
	}
	if _, err := r.git(ctx, r.Root, "remote", "get-url", r.Remote); err != nil {
		if exitCode(err) == 2 || strings.Contains(err.Error(), "No such remote") {
			return fmt.Errorf("git.remote %s: no such remote in %s; add it with git remote add %s URL", r.Remote, r.Root, r.Remote)
		}
		return fmt.Errorf("git.remote %s: %w", r.Remote, err)
	}
	return nil
}

// checkRemoteName accepts remote names made of [A-Za-z0-9._/-], not
// starting with '-' or '/', without "..": a name that is neither an option
// nor a path outside refs/remotes.
func checkRemoteName(name string) error {
	if name == "" || name[0] == '-' || name[0] == '/' || strings.Contains(name, "..") || strings.HasSuffix(name, "/") {
		return fmt.Errorf("%w: remote names are letters, digits and . _ - /", ErrInvalidID)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !idByte(c) && c != '.' && c != '/' {
			return fmt.Errorf("%w: remote names are letters, digits and . _ - /", ErrInvalidID)
		}
	}
	return nil
}

// tracking is the ref that keeps what the last fetch saw of the remote's
// branch.
func (r *Repo) tracking(branch string) string {
	return "refs/remotes/" + r.Remote + "/" + branch
}

// Fetch brings the remote's loopr/* branches (every plan and loop branch)
// into refs/remotes/<remote>/loopr/*, pruning those deleted there. Without
// Remote it does nothing. One fetch runs at a time; one that began after
// this call did is as good as a new one, so the callers that ask while a
// fetch runs share the next one (and its outcome).
func (r *Repo) Fetch(ctx context.Context) error {
	if r.Remote == "" {
		return nil
	}
	asked := time.Now()
	f := &r.fetch
	for {
		f.mu.Lock()
		if f.began.After(asked) && !(errors.Is(f.err, context.Canceled) && ctx.Err() == nil) {
			err := f.err
			f.mu.Unlock()
			return err
		}
		if wait := f.running; wait != nil {
			f.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return fmt.Errorf("wait for a fetch from remote %s: %w", r.Remote, ctx.Err())
			}
		}
		done := make(chan struct{})
		f.running = done
		f.mu.Unlock()

		began := time.Now()
		err := r.fetchNow(ctx)
		f.mu.Lock()
		f.began, f.err, f.running = began, err, nil
		f.mu.Unlock()
		close(done)
		return err
	}
}

// fetchState makes the callers of Fetch share fetches.
type fetchState struct {
	mu      sync.Mutex
	running chan struct{} // closed when the fetch in flight ends; nil: none
	began   time.Time     // when the last fetch that ended began
	err     error         // how it ended
}

// fetchNow runs one fetch.
func (r *Repo) fetchNow(ctx context.Context) error {
	refspec := "+refs/heads/loopr/*:" + r.tracking("loopr/*")
	r.remoteMu.Lock()
	defer r.remoteMu.Unlock()
	// admin: fetch checks what it received against every ref, the HEADs
	// of all worktrees included, and fails on one being added meanwhile.
	// No automatic gc in the middle of loopr's work: the user's own git
	// commands do that.
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := r.git(ctx, r.Root, "-c", "gc.auto=0", "-c", "maintenance.auto=false", "fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", r.Remote, refspec); err != nil {
		return &RemoteError{msg: fmt.Sprintf("fetch from remote %s%s: %v", r.Remote, r.remoteURL(ctx), err), err: err}
	}
	return nil
}

// remoteURL is " (<url>)" for messages, or "" when git does not say.
func (r *Repo) remoteURL(ctx context.Context) string {
	out, err := r.git(context.WithoutCancel(ctx), r.Root, "remote", "get-url", r.Remote)
	if u := strings.TrimSpace(out); err == nil && u != "" {
		return " (" + u + ")"
	}
	return ""
}

// tip returns the commit ref points at; ok is false when there is no such
// ref.
func (r *Repo) tip(ctx context.Context, ref string) (commit string, ok bool, err error) {
	out, err := r.git(ctx, r.Root, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	switch exitCode(err) {
	case 0:
		return strings.TrimSpace(out), true, nil
	case 1:
		return "", false, nil
	}
	return "", false, err
}

// isAncestor reports whether commit a is an ancestor of (or equal to) b.
func (r *Repo) isAncestor(ctx context.Context, a, b string) (bool, error) {
	return r.gitTest(ctx, "merge-base", "--is-ancestor", a, b)
}

// baseCommit resolves the base a new branch or a detached worktree starts
// from: with Remote, the remote's copy of a branch as last fetched when
// there is one; else the revision itself (HEAD, a local branch).
func (r *Repo) baseCommit(ctx context.Context, base string) (string, error) {
	if r.Remote != "" && base != "HEAD" && checkBranch(base) == nil {
		c, ok, err := r.tip(ctx, r.tracking(base))
		if err != nil || ok {
			return c, err
		}
	}
	return r.resolve(ctx, base)
}

// ensureRemotePlan is EnsurePlanBranch with Remote.
func (r *Repo) ensureRemotePlan(ctx context.Context, branch string) error {
	if err := r.Fetch(ctx); err != nil {
		return err
	}
	if tip, ok, err := r.tip(ctx, r.tracking(branch)); err != nil || ok {
		if err == nil {
			r.fastForward(ctx, branch, tip)
		}
		return err
	}
	// Not on the remote yet: a plan started here before git.remote was
	// set has its branch already; else it starts at HEAD.
	from, ok, err := r.tip(ctx, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if !ok {
		if from, err = r.resolve(ctx, "HEAD"); err != nil {
			return fmt.Errorf("plan branch %s: %w: make a first commit, then start the plan again", branch, ErrNoCommits)
		}
	}
	err = r.push(ctx, branch, from, "")
	if errors.Is(err, ErrPushRejected) {
		// Another worker created it first: take theirs.
		if err := r.Fetch(ctx); err != nil {
			return err
		}
		tip, ok, err := r.tip(ctx, r.tracking(branch))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("create plan branch %s on remote %s: the push was refused, yet the branch is not there", branch, r.Remote)
		}
		r.fastForward(ctx, branch, tip)
		return nil
	}
	if err != nil {
		return fmt.Errorf("create plan branch %s on remote %s: %w", branch, r.Remote, err)
	}
	r.fastForward(ctx, branch, from)
	r.logger().Info("created plan branch on the remote", "branch", branch, "remote", r.Remote, "from", loop.ShortCommit(from))
	return nil
}

// fastForward moves the local branch to commit when that loses nothing:
// it creates the branch when missing and moves it when it is an ancestor
// of commit and checked out nowhere. The local plan branch only follows
// the remote's for the user's eyes (git log loopr/<plan>), so a branch
// that cannot follow is left alone, with a note in the log.
func (r *Repo) fastForward(ctx context.Context, branch, commit string) {
	if err := r.tryFastForward(ctx, branch, commit); err != nil {
		r.logger().Warn("update local branch to the remote's", "branch", branch, "remote", r.Remote, "err", err)
	}
}

func (r *Repo) tryFastForward(ctx context.Context, branch, commit string) error {
	cur, ok, err := r.tip(ctx, "refs/heads/"+branch)
	switch {
	case err != nil:
		return err
	case !ok:
		_, err = r.git(ctx, r.Root, "branch", "--no-track", branch, commit)
		return err
	case cur == commit:
		return nil
	}
	if ff, err := r.isAncestor(ctx, cur, commit); err != nil || !ff {
		if err == nil {
			r.logger().Info("local branch has commits the remote's has not; left as it is", "branch", branch, "remote", r.Remote)
		}
		return err
	}
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	wt, on, err := r.checkedOut(ctx, branch)
	if err != nil || on {
		if on {
			r.logger().Info("local branch is checked out; not moved to the remote's", "branch", branch, "worktree", wt)
		}
		return err
	}
	_, err = r.git(ctx, r.Root, "update-ref", "-m", "loopr: fast-forward to "+r.Remote+"'s", "refs/heads/"+branch, commit, cur)
	return err
}

// checkedOut finds the worktree that has branch checked out; the caller
// holds lockAdmin (git worktree list fails on a worktree being added).
func (r *Repo) checkedOut(ctx context.Context, branch string) (dir string, ok bool, err error) {
	list, err := r.worktrees(ctx)
	if err != nil {
		return "", false, err
	}
	for _, wt := range list {
		if wt.branch == branch {
			return wt.path, true, nil
		}
	}
	return "", false, nil
}

// SyncBranch makes the local branch (a loop's own) what the loop continues
// from, before the loop starts: it fetches, then
//   - takes the remote's branch when there is one (the previous iteration
//     may have run on another machine), keeping local commits on top of it
//     that a failed push left unpushed; local commits the remote's branch
//     does not have are dropped (they are of an iteration fenced out), and
//     a worktree of ours that has the branch checked out is reset to it;
//   - keeps the local branch when only it exists;
//   - else creates the branch from base as fetched (the plan branch, or
//     HEAD).
//
// remoteTip is the remote's tip it found ("" = none): the expectation
// PushBranch must be given after the iteration. Without Remote, SyncBranch
// does nothing.
func (r *Repo) SyncBranch(ctx context.Context, branch, base string) (remoteTip string, err error) {
	if err := checkOurs(branch); err != nil {
		return "", err
	}
	if r.Remote == "" {
		return "", nil
	}
	if err := r.Fetch(ctx); err != nil {
		return "", err
	}
	remote, onRemote, err := r.tip(ctx, r.tracking(branch))
	if err != nil {
		return "", err
	}
	local, hasLocal, err := r.tip(ctx, "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	switch {
	case onRemote && hasLocal && local == remote:
		return remote, nil
	case onRemote && hasLocal:
		ahead, err := r.isAncestor(ctx, remote, local)
		if err != nil {
			return "", err
		}
		if ahead {
			r.logger().Info("loop branch has local commits the remote lacks; they are pushed after the iteration", "branch", branch, "remote", r.Remote)
			return remote, nil
		}
		if err := r.moveBranch(ctx, branch, local, remote); err != nil {
			return "", err
		}
		return remote, nil
	case onRemote:
		if _, err := r.git(ctx, r.Root, "branch", "--no-track", branch, remote); err != nil {
			return "", fmt.Errorf("take branch %s from remote %s: %w", branch, r.Remote, err)
		}
		r.logger().Info("took loop branch from the remote", "branch", branch, "remote", r.Remote, "at", loop.ShortCommit(remote))
		return remote, nil
	case hasLocal:
		return "", nil
	}
	from, err := r.baseCommit(ctx, base)
	if err != nil {
		return "", fmt.Errorf("branch %s: base %s: %w", branch, base, err)
	}
	if _, err := r.git(ctx, r.Root, "branch", "--no-track", branch, from); err != nil {
		return "", fmt.Errorf("create branch %s: %w", branch, err)
	}
	return "", nil
}

// moveBranch sets the local branch, now at old, to the remote's commit to.
// Where one of our worktrees has it checked out, the worktree is reset
// there (its files follow); a branch checked out anywhere else is not
// ours to move.
func (r *Repo) moveBranch(ctx context.Context, branch, old, to string) error {
	if ff, err := r.isAncestor(ctx, old, to); err == nil && !ff {
		r.logger().Warn("dropping local commits the remote's branch does not have (an iteration fenced out, or its push failed)",
			"branch", branch, "remote", r.Remote, "dropped", loop.ShortCommit(old), "now", loop.ShortCommit(to))
	}
	unlock, err := r.lockAdmin(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	dir, on, err := r.checkedOut(ctx, branch)
	if err != nil {
		return err
	}
	if !on {
		if _, err := r.git(ctx, r.Root, "update-ref", "-m", "loopr: take "+r.Remote+"'s", "refs/heads/"+branch, to, old); err != nil {
			return fmt.Errorf("take branch %s from remote %s: %w", branch, r.Remote, err)
		}
		return nil
	}
	root, err := r.worktreesRoot()
	if err != nil {
		return err
	}
	if canon(filepath.Dir(dir)) != canon(root) && r.Lock != nil {
		// Workers sharing this clone from several homes: the worktree is
		// another home's, of a worker that lost the loop (it died, or was
		// fenced); the loop's lease is this worker's now (as AddWorktree's
		// --force).
		r.logger().Warn("moving a loop branch checked out in another worktree", "branch", branch, "worktree", dir, "to", loop.ShortCommit(to))
		if _, err := r.git(ctx, r.Root, "update-ref", "-m", "loopr: take "+r.Remote+"'s", "refs/heads/"+branch, to, old); err != nil {
			return fmt.Errorf("take branch %s from remote %s: %w", branch, r.Remote, err)
		}
		return nil
	}
	if canon(filepath.Dir(dir)) != canon(root) {
		return fmt.Errorf("branch %s is checked out in %s, so loopr cannot move it to remote %s's commit %s: check out another branch there", branch, dir, r.Remote, loop.ShortCommit(to))
	}
	if err := r.clearStaleLock(ctx, dir); err != nil {
		return err
	}
	if _, err := r.git(ctx, dir, "reset", "--quiet", "--hard", to); err != nil {
		return fmt.Errorf("reset worktree %s to remote %s's %s: %w", dir, r.Remote, branch, err)
	}
	if _, err := r.git(ctx, dir, "clean", "-ffdq"); err != nil {
		return fmt.Errorf("reset worktree %s: %w", dir, err)
	}
	return nil
}

// PushBranch pushes the local branch (a loop's own) to the remote with
// --force-with-lease=<branch>:<expect>: only if the remote's branch is
// still at expect ("" = it must not exist), which is what SyncBranch
// returned before the iteration. A worker whose loop went to another
// worker meanwhile is thus refused (ErrPushRejected) once the other has
// pushed, and the remote branch stays as it is. Nothing is pushed when the
// branch is already at expect, nor without Remote.
func (r *Repo) PushBranch(ctx context.Context, branch, expect string) error {
	if err := checkOurs(branch); err != nil {
		return err
	}
	if r.Remote == "" {
		return nil
	}
	local, ok, err := r.tip(ctx, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("push %s to remote %s: no such branch here", branch, r.Remote)
	}
	if local == expect {
		return nil
	}
	if err := r.push(ctx, branch, local, expect); err != nil {
		return fmt.Errorf("push %s to remote %s: %w", branch, r.Remote, err)
	}
	return nil
}

// push sets the remote's branch to commit ("" = deletes it) if it is at
// expect ("" = absent), and the tracking ref with it. A refusal because the branch is elsewhere
// is ErrPushRejected; one by the remote itself (a hook, branch protection)
// is another error, with what the remote said.
func (r *Repo) push(ctx context.Context, branch, commit, expect string) error {
	if expect != "" && (len(expect) < 40 || strings.Trim(expect, "0123456789abcdef") != "") {
		return fmt.Errorf("%w: expected commit %q", ErrInvalidID, expect)
	}
	ref := "refs/heads/" + branch
	r.remoteMu.Lock()
	defer r.remoteMu.Unlock()
	out, err := r.git(ctx, r.Root, "push", "--porcelain", "--no-verify",
		"--force-with-lease="+ref+":"+expect, r.Remote, commit+":"+ref)
	what := "pushed"
	if err != nil {
		if reason, ok := rejected(out, "[rejected]"); ok {
			return fmt.Errorf("%w: %s moved on remote %s (%s)", ErrPushRejected, branch, r.Remote, reason)
		}
		if reason, ok := rejected(out, "[remote rejected]"); ok {
			if lostRace(reason) {
				return fmt.Errorf("%w: %s moved on remote %s while pushing (%s)", ErrPushRejected, branch, r.Remote, reason)
			}
			return fmt.Errorf("remote %s refused the push of %s: %s", r.Remote, branch, reason)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return &RemoteError{msg: fmt.Sprintf("remote %s gave no answer in time: %v", r.Remote, err), err: err}
		}
		return &RemoteError{msg: err.Error(), err: err}
	}
	track := []string{"update-ref", r.tracking(branch), commit}
	if commit == "" {
		track, what = []string{"update-ref", "-d", r.tracking(branch)}, "deleted on the remote"
	}
	if _, err := r.git(ctx, r.Root, track...); err != nil {
		r.logger().Warn("update tracking ref after push", "ref", r.tracking(branch), "err", err)
	}
	r.logger().Info(what, "branch", branch, "remote", r.Remote, "commit", loop.ShortCommit(commit))
	return nil
}

// lostRace reports whether a remote's refusal is a push that lost a race
// on the ref: the remote's compare-and-swap of the branch failed, or its
// lock was held by another push. Anything else (a hook, branch protection)
// would refuse again.
func lostRace(reason string) bool {
	return strings.Contains(reason, "failed to update ref") || strings.Contains(reason, "lock")
}

// rejected finds a line of `git push --porcelain` output whose flag field
// is '!' and whose summary starts with mark, and returns the summary.
func rejected(out, mark string) (string, bool) {
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) >= 3 && f[0] == "!" && strings.HasPrefix(f[2], mark) {
			return strings.TrimSpace(strings.TrimPrefix(f[2], mark)), true
		}
	}
	return "", false
}

// mergeRemote is MergeWith with Remote; the caller holds the process's
// lock of the integration worktree name.
func (r *Repo) mergeRemote(ctx context.Context, branch, into, name string, o MergeOptions) error {
	release := func() {}
	if r.Lock != nil {
		unlock, err := r.Lock.Lock(ctx, into)
		if err != nil {
			return fmt.Errorf("merge of %s into %s: take the lock shared by the workers: %w", branch, into, err)
		}
		var once sync.Once
		release = func() { once.Do(unlock) }
		defer release()
	}
	src, ok, err := r.tip(ctx, "refs/heads/"+branch)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("merge of %s into %s: branch %s does not exist", branch, into, branch)
	}
	var dir string
	for attempt := 1; ; attempt++ {
		if err := r.Fetch(ctx); err != nil {
			return fmt.Errorf("merge of %s into %s: %w", branch, into, err)
		}
		onto, ok, err := r.tip(ctx, r.tracking(into))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("merge of %s into %s: branch %s is not on remote %s", branch, into, into, r.Remote)
		}
		if dir == "" {
			if dir, _, err = r.ensureWorktree(ctx, name, "", onto); err != nil {
				return err
			}
		}
		merged, err := r.mergeDetached(ctx, dir, branch, into, src, onto)
		if err != nil {
			return err
		}
		if o.Fence != nil {
			if err := o.Fence(ctx); err != nil {
				return fmt.Errorf("merge of %s into %s: not pushed: %w", branch, into, err)
			}
		}
		err = r.push(ctx, into, merged, onto)
		if err == nil {
			release() // the rest is this clone's alone
			r.fastForward(ctx, into, merged)
			r.logger().Info("merged", "branch", branch, "into", into, "remote", r.Remote, "attempt", attempt)
			return nil
		}
		if !errors.Is(err, ErrPushRejected) || attempt >= MergeAttempts {
			return fmt.Errorf("merge of %s into %s (attempt %d of %d): %w", branch, into, attempt, MergeAttempts, err)
		}
		r.logger().Warn("merge: push refused, the plan branch moved; fetching and merging again",
			"branch", branch, "into", into, "remote", r.Remote, "attempt", attempt, "err", err)
		wait := retryBase << (attempt - 1)
		wait = wait/2 + rand.N(wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("merge of %s into %s: %w", branch, into, ctx.Err())
		}
	}
}

// mergeDetached merges commit src (branch's tip) onto commit onto (into's
// tip on the remote) at a detached HEAD in the integration worktree dir and
// returns the merge commit. On conflicts the merge is aborted and a
// *ConflictError names the files.
func (r *Repo) mergeDetached(ctx context.Context, dir, branch, into, src, onto string) (string, error) {
	if err := r.cleanIntegration(ctx, dir); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, dir, "checkout", "--quiet", "--detach", onto); err != nil {
		return "", fmt.Errorf("merge into %s: check out %s in %s: %w", into, loop.ShortCommit(onto), dir, err)
	}
	message := fmt.Sprintf("loopr: merge %s into %s", branch, into)
	args := append(identityArgs(), "merge", "--no-ff", "--no-edit", "--no-verify", "-m", message, src)
	if _, err := r.gitEnv(ctx, dir, identityEnv, args...); err != nil {
		return "", r.mergeFailed(ctx, dir, branch, into, err)
	}
	out, err := r.git(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// DeleteRemoteBranch deletes a merged loop's branch on the remote if it is
// still at the local branch's commit (what was merged); a branch that
// moved on there, or is not there, is left alone. Without Remote it does
// nothing.
func (r *Repo) DeleteRemoteBranch(ctx context.Context, branch string) error {
	if err := checkOurs(branch); err != nil {
		return err
	}
	if r.Remote == "" {
		return nil
	}
	local, ok, err := r.tip(ctx, "refs/heads/"+branch)
	if err != nil || !ok {
		return err
	}
	return r.DeleteRemoteBranchAt(ctx, branch, local)
}

// DeleteRemoteBranchAt deletes branch on the remote if it is still at
// commit (what the merge queue merged, wherever the loop ran); a branch
// that moved on there, or is not there, is left alone. Without Remote it
// does nothing.
func (r *Repo) DeleteRemoteBranchAt(ctx context.Context, branch, commit string) error {
	if err := checkOurs(branch); err != nil {
		return err
	}
	if r.Remote == "" {
		return nil
	}
	if err := checkCommit(commit); err != nil {
		return fmt.Errorf("delete %s on remote %s: %w", branch, r.Remote, err)
	}
	err := r.push(ctx, branch, "", commit)
	if errors.Is(err, ErrPushRejected) {
		return nil // moved on, or gone already
	}
	if err != nil {
		return fmt.Errorf("delete %s on remote %s: %w", branch, r.Remote, err)
	}
	return nil
}
