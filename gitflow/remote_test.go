package gitflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
)

// Git across machines, with real bare repositories and real clones: each
// clone stands for one machine's workspace, the bare repository for the
// shared remote.

// syncBuffer is a log sink several goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// memLocker is a Locker shared by the clones of one test, as the etcd
// mutex is by the workers of one store. It counts the locks taken and
// fails the test if two holders overlap.
type memLocker struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
	taken map[string]int
	held  []time.Duration // how long each lock was held
}

func (l *memLocker) Lock(ctx context.Context, name string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks, l.taken = map[string]chan struct{}{}, map[string]int{}
	}
	ch := l.locks[name]
	if ch == nil {
		ch = make(chan struct{}, 1)
		l.locks[name] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	l.taken[name]++
	l.mu.Unlock()
	at := time.Now()
	return func() {
		l.mu.Lock()
		l.held = append(l.held, time.Since(at))
		l.mu.Unlock()
		<-ch
	}, nil
}

// cluster is a bare repository (the remote) and clones of it, each opened
// as a Repo with Remote "origin" and its own home.
type cluster struct {
	bare   string
	clones []*Repo
	logs   []*syncBuffer
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	seed := newRepo(t)
	c := &cluster{bare: filepath.Join(t.TempDir(), "shared.git")}
	gitT(t, seed.Root, "clone", "-q", "--bare", seed.Root, c.bare)
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("machine%d", i))
		gitT(t, filepath.Dir(dir), "clone", "-q", c.bare, dir)
		buf := &syncBuffer{}
		r, err := Open(dir, "", slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
		if err != nil {
			t.Fatalf("Open(clone %d) = %v", i, err)
		}
		r.Remote = "origin"
		if err := r.CheckRemote(t.Context()); err != nil {
			t.Fatalf("CheckRemote(clone %d) = %v", i, err)
		}
		c.clones = append(c.clones, r)
		c.logs = append(c.logs, buf)
	}
	return c
}

func (c *cluster) count(substr string) int {
	n := 0
	for _, b := range c.logs {
		n += b.count(substr)
	}
	return n
}

// remoteTip is the commit of branch in the bare repository, "" if none.
func (c *cluster) remoteTip(t *testing.T, branch string) string {
	t.Helper()
	out, err := gitOut(c.bare, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err != nil {
		return ""
	}
	return out
}

// iterate runs one iteration of a loop on r as the loop manager does: sync
// the branch, make the worktree, write files, save the work and push it. It
// returns the worktree and the tip the push expected.
func iterate(t *testing.T, r *Repo, id, branch, plan string, files map[string]string) (dir, expect string, err error) {
	t.Helper()
	ctx := t.Context()
	if expect, err = r.SyncBranch(ctx, branch, plan); err != nil {
		return "", "", fmt.Errorf("SyncBranch: %w", err)
	}
	if dir, err = r.AddWorktree(ctx, id, branch, plan); err != nil {
		return "", "", fmt.Errorf("AddWorktree: %w", err)
	}
	for name, content := range files {
		write(t, dir, name, content)
	}
	if _, err := r.SaveWork(ctx, dir, branch, "loopr: ralph "+id); err != nil {
		return dir, expect, fmt.Errorf("SaveWork: %w", err)
	}
	return dir, expect, r.PushBranch(ctx, branch, expect)
}

// mergeAll runs n loops concurrently, loop i on clone i%len(clones): each
// makes its own file, pushes its branch and merges it into plan. A merge
// that gives up because its push was refused MergeAttempts times (possible
// only without a shared lock) loses nothing: it is merged again, as the
// loop's next iteration would. It returns how many gave up.
func mergeAll(t *testing.T, c *cluster, plan string, n int) (gaveUp int) {
	t.Helper()
	ctx := t.Context()
	for _, r := range c.clones {
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatalf("EnsurePlanBranch = %v", err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	var again []int
	var mu sync.Mutex
	took := make([]time.Duration, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			r := c.clones[i%len(c.clones)]
			id := fmt.Sprintf("r%02d", i)
			branch := "loopr/" + id
			files := map[string]string{"out/" + id + ".txt": "made by " + id + "\n"}
			if _, _, err := iterate(t, r, id, branch, plan, files); err != nil {
				errs[i] = fmt.Errorf("loop %s: %w", id, err)
				return
			}
			began := time.Now()
			err := r.Merge(ctx, branch, plan)
			took[i] = time.Since(began)
			if errors.Is(err, ErrPushRejected) && strings.Contains(err.Error(), fmt.Sprintf("attempt %d of %d", MergeAttempts, MergeAttempts)) {
				mu.Lock()
				again = append(again, i)
				mu.Unlock()
				return
			}
			if err != nil {
				errs[i] = fmt.Errorf("loop %s: Merge = %w", id, err)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(took)
	t.Logf("%d loops on %d clones: sync, commit, push and merge of all in %s; one merge (lock, fetch, merge, push) p50 %s, max %s",
		n, len(c.clones), wall.Round(time.Millisecond), took[n/2].Round(time.Millisecond), took[n-1].Round(time.Millisecond))
	for _, i := range again {
		if err := c.clones[i%len(c.clones)].Merge(ctx, fmt.Sprintf("loopr/r%02d", i), plan); err != nil {
			t.Fatalf("loop r%02d: merge again after giving up = %v", i, err)
		}
	}
	tree := strings.Fields(gitT(t, c.bare, "ls-tree", "--name-only", "-r", "refs/heads/"+plan, "out/"))
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("out/r%02d.txt", i))
	}
	if !slices.Equal(tree, want) {
		t.Errorf("files on the remote's %s = %v\nwant every loop's: %v", plan, tree, want)
	}
	merges := strings.Fields(gitT(t, c.bare, "rev-list", "--merges", "refs/heads/"+plan))
	if len(merges) != n {
		t.Errorf("merge commits on the remote's %s = %d, want %d", plan, len(merges), n)
	}
	return len(again)
}

func TestRemoteConcurrentMergesUnderLock(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	locker := &memLocker{}
	var before []userState
	for _, r := range c.clones {
		r.Lock = locker
		before = append(before, snapshot(t, r.Root))
	}
	const plan, n = "loopr/plan", 20
	if gaveUp := mergeAll(t, c, plan, n); gaveUp != 0 {
		t.Errorf("%d merges gave up under the shared lock, want 0", gaveUp)
	}
	if got := locker.taken[plan]; got != n {
		t.Errorf("shared lock on %s taken %d times, want %d (once per merge)", plan, got, n)
	}
	slices.Sort(locker.held)
	t.Logf("the shared lock was held p50 %s, max %s per merge", locker.held[n/2].Round(time.Millisecond), locker.held[n-1].Round(time.Millisecond))
	if got := c.count("push refused"); got != 0 {
		t.Errorf("%d pushes refused under the shared lock, want 0", got)
	}
	for i, r := range c.clones {
		if got := snapshot(t, r.Root); got != before[i] {
			t.Errorf("clone %d: the user's checkout changed: %+v, was %+v", i, got, before[i])
		}
	}
	// A plan, spec or phase loop on any machine sees the merged plan.
	ctx := t.Context()
	r := c.clones[1]
	if err := r.EnsurePlanBranch(ctx, plan); err != nil {
		t.Fatal(err)
	}
	dir, err := r.AddDetachedWorktree(ctx, "spec1", plan)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := gitT(t, dir, "rev-parse", "HEAD"), c.remoteTip(t, plan); got != want {
		t.Errorf("detached worktree of %s at %s, want the remote's %s", plan, got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "r19.txt")); err != nil {
		t.Errorf("a loop's output missing from the plan worktree on another clone: %v", err)
	}
	// The local plan branch follows the remote's (a fast forward).
	if got, want := gitT(t, r.Root, "rev-parse", plan), c.remoteTip(t, plan); got != want {
		t.Errorf("local %s = %s, want the remote's %s", plan, got, want)
	}
}

func TestRemoteRacingMergesWithoutLock(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3) // no shared lock: only each process's own
	gaveUp := mergeAll(t, c, "loopr/plan", 20)
	refused := c.count("push refused")
	t.Logf("%d pushes refused and retried; %d merges gave up after %d refusals and were merged again", refused, gaveUp, MergeAttempts)
	if refused == 0 {
		t.Log("no push raced another this time")
	}
}

func TestRemoteMergeRetriesRefusedPush(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, b := c.clones[0], c.clones[1]
	const plan = "loopr/plan"
	for _, r := range c.clones {
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []struct {
		r  *Repo
		id string
	}{{a, "ra"}, {b, "rb"}} {
		if _, _, err := iterate(t, l.r, l.id, "loopr/"+l.id, plan, map[string]string{l.id + ".txt": l.id}); err != nil {
			t.Fatal(err)
		}
	}
	// Between A's fetch and A's push, B merges (as a worker without the
	// lock would): A's push is refused, and A merges again on B's merge.
	fences := 0
	err := a.MergeWith(ctx, "loopr/ra", plan, MergeOptions{Fence: func(ctx context.Context) error {
		fences++
		if fences == 1 {
			return b.Merge(ctx, "loopr/rb", plan)
		}
		return nil
	}})
	if err != nil {
		t.Fatalf("MergeWith() = %v", err)
	}
	if fences != 2 {
		t.Errorf("fence called %d times, want 2 (once per attempt)", fences)
	}
	if got := c.logs[0].count("push refused"); got != 1 {
		t.Errorf("A's refused pushes = %d, want 1", got)
	}
	tree := gitT(t, c.bare, "ls-tree", "--name-only", "refs/heads/"+plan)
	for _, f := range []string{"ra.txt", "rb.txt"} {
		if !slices.Contains(strings.Fields(tree), f) {
			t.Errorf("%s missing from the remote's plan branch: %s", f, tree)
		}
	}
}

func TestRemoteFenceStopsMerge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 1)
	r := c.clones[0]
	r.Lock = &memLocker{}
	const plan = "loopr/plan"
	if err := r.EnsurePlanBranch(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if _, _, err := iterate(t, r, "r1", "loopr/r1", plan, map[string]string{"x.txt": "x"}); err != nil {
		t.Fatal(err)
	}
	before, localBefore := c.remoteTip(t, plan), gitT(t, r.Root, "rev-parse", plan)
	errLost := errors.New("lease lost")
	err := r.MergeWith(ctx, "loopr/r1", plan, MergeOptions{Fence: func(context.Context) error { return errLost }})
	if !errors.Is(err, errLost) {
		t.Fatalf("MergeWith() = %v, want the fence's error", err)
	}
	if got := c.remoteTip(t, plan); got != before {
		t.Errorf("remote %s moved to %s after a failed fence, want %s", plan, got, before)
	}
	if got := gitT(t, r.Root, "rev-parse", plan); got != localBefore {
		t.Errorf("local %s moved to %s after a failed fence, want %s", plan, got, localBefore)
	}
	// Without a remote, the fence guards the local merge the same way.
	local := newRepo(t)
	if err := local.EnsurePlanBranch(ctx, plan); err != nil {
		t.Fatal(err)
	}
	ralph(t, local, "plan", "r2", map[string]string{"y.txt": "y"})
	was := gitT(t, local.Root, "rev-parse", plan)
	if err := local.MergeWith(ctx, "loopr/r2", plan, MergeOptions{Fence: func(context.Context) error { return errLost }}); !errors.Is(err, errLost) {
		t.Fatalf("local MergeWith() = %v, want the fence's error", err)
	}
	if got := gitT(t, local.Root, "rev-parse", plan); got != was {
		t.Errorf("local-only %s moved after a failed fence", plan)
	}
}

func TestRemoteLoopContinuesOnAnotherClone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, b := c.clones[0], c.clones[1]
	const plan, branch = "loopr/plan", "loopr/r1"
	for _, r := range c.clones {
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	// Iteration 1 on A: a new branch, pushed.
	dirA, expect, err := iterate(t, a, "r1", branch, plan, map[string]string{"one.txt": "from A\n"})
	if err != nil || expect != "" {
		t.Fatalf("iteration 1 on A: expect %q, err %v; want \"\", nil", expect, err)
	}
	tip1 := c.remoteTip(t, branch)
	if tip1 != gitT(t, a.Root, "rev-parse", branch) {
		t.Fatalf("remote %s = %s, want A's %s", branch, tip1, gitT(t, a.Root, "rev-parse", branch))
	}
	// Iteration 2 on B: continues from A's commit.
	dirB, expect, err := iterate(t, b, "r1", branch, plan, map[string]string{"two.txt": "from B\n"})
	if err != nil || expect != tip1 {
		t.Fatalf("iteration 2 on B: expect %q, err %v; want %q, nil", expect, err, tip1)
	}
	if got, _ := os.ReadFile(filepath.Join(dirB, "one.txt")); string(got) != "from A\n" {
		t.Errorf("B's worktree lacks A's work: one.txt = %q", got)
	}
	tip2 := c.remoteTip(t, branch)
	if n := gitT(t, c.bare, "rev-list", "--count", tip1+".."+tip2); n != "1" {
		t.Errorf("remote branch moved by %s commits from A's tip, want 1 (B's)", n)
	}
	// Iteration 3 back on A, whose worktree still holds iteration 1: it
	// is reset to B's work.
	dirA3, expect, err := iterate(t, a, "r1", branch, plan, map[string]string{"three.txt": "from A again\n"})
	if err != nil || expect != tip2 || dirA3 != dirA {
		t.Fatalf("iteration 3 on A: dir %s, expect %q, err %v; want %s, %q, nil", dirA3, expect, err, dirA, tip2)
	}
	for _, f := range []string{"one.txt", "two.txt", "three.txt"} {
		if _, err := os.Stat(filepath.Join(dirA, f)); err != nil {
			t.Errorf("A's worktree after iteration 3: %v", err)
		}
	}
	if got := gitT(t, c.bare, "ls-tree", "--name-only", "refs/heads/"+branch); got != strings.Join([]string{"README.md", "one.txt", "shared.txt", "three.txt", "two.txt"}, "\n") {
		t.Errorf("remote %s holds %q", branch, got)
	}
}

func TestRemoteStalePushRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, b := c.clones[0], c.clones[1]
	const plan, branch = "loopr/plan", "loopr/r1"
	for _, r := range c.clones {
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := iterate(t, a, "r1", branch, plan, map[string]string{"one.txt": "1"}); err != nil {
		t.Fatal(err)
	}
	// A starts iteration 2 and is cut off; the loop goes to B, which runs
	// iteration 2 again from the same tip and pushes.
	expectA, err := a.SyncBranch(ctx, branch, plan)
	if err != nil {
		t.Fatal(err)
	}
	dirA, err := a.AddWorktree(ctx, "r1", branch, plan)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := iterate(t, b, "r1", branch, plan, map[string]string{"b.txt": "B's iteration 2"}); err != nil {
		t.Fatal(err)
	}
	tipB := c.remoteTip(t, branch)
	// A's late result: committed locally, its push refused.
	write(t, dirA, "a.txt", "A's stale iteration 2")
	if _, err := a.SaveWork(ctx, dirA, branch, "loopr: stale"); err != nil {
		t.Fatal(err)
	}
	err = a.PushBranch(ctx, branch, expectA)
	if !errors.Is(err, ErrPushRejected) {
		t.Fatalf("stale PushBranch() = %v, want ErrPushRejected", err)
	}
	if !strings.Contains(err.Error(), "push loopr/r1 to remote origin") {
		t.Errorf("error %q does not name the branch and the remote", err)
	}
	if got := c.remoteTip(t, branch); got != tipB {
		t.Errorf("remote %s = %s after the stale push, want B's %s", branch, got, tipB)
	}
	// A's next sync drops its stale commit and takes B's.
	expect, err := a.SyncBranch(ctx, branch, plan)
	if err != nil || expect != tipB {
		t.Fatalf("SyncBranch after the refusal = %q, %v; want %q, nil", expect, err, tipB)
	}
	if _, err := os.Stat(filepath.Join(dirA, "a.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("A's stale file is still in its worktree: %v", err)
	}
	if got := gitT(t, dirA, "rev-parse", "HEAD"); got != tipB {
		t.Errorf("A's worktree at %s, want B's %s", got, tipB)
	}
}

func TestRemoteConcurrentPlanCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 3)
	heads := map[string]bool{}
	for i, r := range c.clones { // each machine's checkout has moved on differently
		write(t, r.Root, fmt.Sprintf("m%d.txt", i), "x")
		gitT(t, r.Root, "add", "-A")
		gitT(t, r.Root, "commit", "-q", "-m", "local")
		heads[gitT(t, r.Root, "rev-parse", "HEAD")] = true
	}
	const plan = "loopr/plan"
	var wg sync.WaitGroup
	errs := make([]error, len(c.clones))
	for i, r := range c.clones {
		wg.Go(func() { errs[i] = r.EnsurePlanBranch(ctx, plan) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	tip := c.remoteTip(t, plan)
	if !heads[tip] {
		t.Fatalf("remote %s = %s, not one of the machines' HEADs", plan, tip)
	}
	for i, r := range c.clones {
		if got := gitT(t, r.Root, "rev-parse", plan); got != tip {
			t.Errorf("clone %d: local %s = %s, want the remote's %s", i, plan, got, tip)
		}
	}
	if got := c.count("created plan branch on the remote"); got != 1 {
		t.Errorf("%d clones say they created the plan branch, want 1", got)
	}
}

func TestRemoteUnreachable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 1)
	r := c.clones[0]
	const plan, branch = "loopr/plan", "loopr/r1"
	if err := r.EnsurePlanBranch(ctx, plan); err != nil {
		t.Fatal(err)
	}
	dir, _, err := iterate(t, r, "r1", branch, plan, map[string]string{"one.txt": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(c.bare); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "two.txt", "2")
	if _, err := r.SaveWork(ctx, dir, branch, "loopr: iteration 2"); err != nil {
		t.Fatal(err)
	}
	local := gitT(t, r.Root, "rev-parse", branch)

	err = r.Fetch(ctx)
	var re *RemoteError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "fetch from remote origin ("+c.bare+")") {
		t.Errorf("Fetch() = %v, want a *RemoteError naming the remote and its URL", err)
	}
	if _, err := r.SyncBranch(ctx, branch, plan); err == nil {
		t.Error("SyncBranch() with the remote gone = nil, want an error")
	}
	if err := r.PushBranch(ctx, branch, c.remoteTip(t, branch)); !errors.As(err, &re) || errors.Is(err, ErrPushRejected) ||
		!strings.Contains(err.Error(), "push loopr/r1 to remote origin") {
		t.Errorf("PushBranch() = %v, want a *RemoteError naming the branch and the remote (not a refusal)", err)
	}
	if err := r.Merge(ctx, branch, plan); err == nil || !strings.Contains(err.Error(), "fetch from remote origin") {
		t.Errorf("Merge() = %v, want the fetch's error", err)
	}
	if got := gitT(t, r.Root, "rev-parse", branch); got != local {
		t.Errorf("local %s = %s, want %s: the work must stay", branch, got, local)
	}
	if got := gitT(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("worktree changed: %s", got)
	}
}

func TestRemotePushBoundedByTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 1)
	r := c.clones[0]
	const plan, branch = "loopr/plan", "loopr/r1"
	if err := r.EnsurePlanBranch(ctx, plan); err != nil {
		t.Fatal(err)
	}
	// The remote's hook hangs (a slow server, a stuck hook), then refuses.
	pidFile := filepath.Join(t.TempDir(), "hook.pid")
	write(t, filepath.Join(c.bare, "hooks"), "pre-receive", "#!/bin/sh\necho $$ >"+pidFile+"\nsleep 8\nexit 1\n")
	if err := os.Chmod(filepath.Join(c.bare, "hooks", "pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect, err := r.SyncBranch(ctx, branch, plan)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := r.AddWorktree(ctx, "r1", branch, plan)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "one.txt", "1")
	if _, err := r.SaveWork(ctx, dir, branch, "loopr: r1"); err != nil {
		t.Fatal(err)
	}
	r.Timeout = time.Second // for the push alone: a loaded machine may be slow elsewhere
	start := time.Now()
	err = r.PushBranch(ctx, branch, expect)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "gave no answer in time") {
		t.Fatalf("push to a hanging remote = %v, want a timeout", err)
	}
	// git is killed at the timeout; the remote's receive-pack it started
	// holds its output open until WaitDelay (5 s) closes it.
	if took > 9*time.Second {
		t.Errorf("push to a hanging remote took %s, want the 1 s timeout plus at most the 5 s wait for git's children", took)
	}
	t.Logf("push to a hanging remote gave up after %s", took.Round(10*time.Millisecond))
	if c.remoteTip(t, branch) != "" {
		t.Error("the branch reached the remote")
	}
	// Let the orphaned hook finish before the test's directories go.
	pid, _ := os.ReadFile(pidFile)
	for deadline := time.Now().Add(testslack.Scale(15 * time.Second)); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join("/proc", strings.TrimSpace(string(pid)))); len(pid) == 0 || err != nil {
			break
		}
	}
}

func TestCheckRemote(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	r.Remote = "origin"
	err := r.CheckRemote(ctx)
	want := "git.remote origin: no such remote in " + r.Root + "; add it with git remote add origin URL"
	if err == nil || err.Error() != want {
		t.Errorf("CheckRemote() = %v, want %q", err, want)
	}
	r.Remote = "--upload-pack=x"
	if err := r.CheckRemote(ctx); !errors.Is(err, ErrInvalidID) {
		t.Errorf("CheckRemote(%q) = %v, want ErrInvalidID", r.Remote, err)
	}
	r.Remote = ""
	if err := r.CheckRemote(ctx); err != nil {
		t.Errorf("CheckRemote() without a remote = %v", err)
	}
}

func TestRemoteDeleteFinishedBranch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, b := c.clones[0], c.clones[1]
	const plan = "loopr/plan"
	for _, r := range c.clones {
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	// r1 merged: its branch goes on the remote.
	if _, _, err := iterate(t, a, "r1", "loopr/r1", plan, map[string]string{"1.txt": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Merge(ctx, "loopr/r1", plan); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteRemoteBranch(ctx, "loopr/r1"); err != nil {
		t.Fatal(err)
	}
	if tip := c.remoteTip(t, "loopr/r1"); tip != "" {
		t.Errorf("remote loopr/r1 = %s after DeleteRemoteBranch, want it deleted", tip)
	}
	if err := a.DeleteRemoteBranch(ctx, "loopr/r1"); err != nil {
		t.Errorf("DeleteRemoteBranch() of a branch gone already = %v, want nil", err)
	}
	// r2's remote branch moved on elsewhere (B): A, with a stale copy,
	// leaves it.
	if _, _, err := iterate(t, a, "r2", "loopr/r2", plan, map[string]string{"2.txt": "2"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := iterate(t, b, "r2", "loopr/r2", plan, map[string]string{"2b.txt": "2b"}); err != nil {
		t.Fatal(err)
	}
	moved := c.remoteTip(t, "loopr/r2")
	if err := a.DeleteRemoteBranch(ctx, "loopr/r2"); err != nil {
		t.Fatal(err)
	}
	if got := c.remoteTip(t, "loopr/r2"); got != moved {
		t.Errorf("remote loopr/r2 = %q after a stale clone's cleanup, want %s kept", got, moved)
	}
}

func TestRemoteFetchesShared(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, b := c.clones[0], c.clones[1]
	buf := &syncBuffer{}
	a.Log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := b.EnsurePlanBranch(ctx, "loopr/plan"); err != nil {
		t.Fatal(err)
	}
	const callers = 12
	var wg sync.WaitGroup
	errs := make([]error, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			errs[i] = a.Fetch(ctx)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	fetches := buf.count(" fetch --quiet")
	t.Logf("%d concurrent Fetch calls ran git fetch %d times", callers, fetches)
	if fetches < 1 || fetches > 4 {
		t.Errorf("%d concurrent Fetch calls ran git fetch %d times, want 1 or 2 (up to 4 on a loaded machine): callers share fetches", callers, fetches)
	}
	// Each caller saw what was pushed before it asked.
	if _, ok, err := a.tip(ctx, a.tracking("loopr/plan")); err != nil || !ok {
		t.Errorf("after the fetches, %s = %v, %v; want B's plan branch", a.tracking("loopr/plan"), ok, err)
	}
	// A push after those fetches is seen by the next one.
	if _, _, err := iterate(t, b, "r1", "loopr/r1", "loopr/plan", map[string]string{"x": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := a.tip(ctx, a.tracking("loopr/r1")); got != c.remoteTip(t, "loopr/r1") {
		t.Errorf("a fetch after B's push sees loopr/r1 at %q, want %s", got, c.remoteTip(t, "loopr/r1"))
	}
}

func TestRemoteLegacyBranchName(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, b := c.clones[0], c.clones[1]
	const id = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
	// A loop of an older loopr has its branch loopr/<id>, pushed by A.
	if _, _, err := iterate(t, a, "old", LegacyBranch(id), "HEAD", map[string]string{"x": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b.Branch(ctx, id, "Some title")
	if err != nil || got != LegacyBranch(id) {
		t.Errorf("Branch() on a clone that only fetched it = %q, %v; want %q", got, err, LegacyBranch(id))
	}
	if got, _ := b.Branch(ctx, "01HYYYYYYYYYYYYYYYYYYYYYYY", "Some title"); got != BranchName("01HYYYYYYYYYYYYYYYYYYYYYYY", "Some title") {
		t.Errorf("Branch() of a new loop = %q, want the titled name", got)
	}
}

func TestRemoteSeveralHomesOneClone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCluster(t, 2)
	a, other := c.clones[0], c.clones[1]
	// A second worker works in A's clone from a home of its own.
	a2, err := Open(a.Root, filepath.Join(t.TempDir(), "home2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	a2.Remote = "origin"
	const plan, branch = "loopr/plan", "loopr/r1"
	for _, r := range []*Repo{a, other, a2} {
		if err := r.EnsurePlanBranch(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	// Iteration 1 in A's first home (its worktree keeps the branch checked
	// out), iteration 2 on the other clone.
	if _, _, err := iterate(t, a, "r1", branch, plan, map[string]string{"1.txt": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := iterate(t, other, "r1", branch, plan, map[string]string{"2.txt": "2"}); err != nil {
		t.Fatal(err)
	}
	tip2 := c.remoteTip(t, branch)
	// Iteration 3 in A's clone from the second home. Without a shared
	// lock, the other home's worktree is not this worker's to overrule.
	if _, err := a2.SyncBranch(ctx, branch, plan); err == nil || !strings.Contains(err.Error(), "is checked out in") {
		t.Fatalf("SyncBranch() without Lock = %v, want a refusal naming the other worktree", err)
	}
	a2.Lock = &memLocker{}
	dir, expect, err := iterate(t, a2, "r1", branch, plan, map[string]string{"3.txt": "3"})
	if err != nil || expect != tip2 {
		t.Fatalf("iteration 3 from the second home: expect %q, err %v; want %q, nil", expect, err, tip2)
	}
	for _, f := range []string{"1.txt", "2.txt", "3.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("second home's worktree: %v", err)
		}
	}
	if got := gitT(t, c.bare, "rev-parse", "refs/heads/"+branch+"^"); got != tip2 {
		t.Errorf("remote %s^ = %s, want iteration 2's %s", branch, got, tip2)
	}
}
