package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// remoteConfig is treeConfig with git.remote: origin.
func remoteConfig(t *testing.T) string {
	t.Helper()
	cfg := treeConfig(t, 3, validateCmd(t), "tree")
	const git = "git:\n  worktrees: true\n"
	if !strings.Contains(cfg, git) {
		t.Fatalf("treeConfig has no %q section", git)
	}
	return strings.Replace(cfg, git, git+"  remote: origin\n", 1)
}

// remoteRepo is a workspace with git.remote: origin and that remote: a
// bare repository cloned from the workspace.
func remoteRepo(t *testing.T) (r repo, bare string) {
	t.Helper()
	r = newRepo(t, remoteConfig(t))
	bare = filepath.Join(t.TempDir(), "shared.git")
	r.git(t, "clone", "-q", "--bare", r.dir, bare)
	r.git(t, "remote", "add", "origin", bare)
	return r, bare
}

// bareGit runs git in the bare repository dir and returns its trimmed
// stdout.
func bareGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git -C %s %s: %v", dir, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

// TestGitRemoteTree runs a whole plan tree with git.remote: origin, a bare
// repository the workspace is cloned from (issue 14, git across machines,
// on one machine): the plan branch is created on the remote, every ralph's
// branch is pushed after each iteration and merged into the remote's plan
// branch, finished loops' branches are deleted there, the local plan
// branch follows, and the user's checkout is untouched.
func TestGitRemoteTree(t *testing.T) {
	t.Parallel()
	r, bare := remoteRepo(t)
	before := r.checkout(t)
	d := startDaemon(t, r)

	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Build the e2e widget", "--json"), &plan)
	waitEvery(t, 90*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	loops := list(t, r)
	checkTree(t, loops)

	planBranch := gitflow.BranchName(plan.ID, plan.Title)
	files := strings.Fields(bareGit(t, bare, "ls-tree", "-r", "--name-only", "refs/heads/"+planBranch))
	iterations := 0
	for _, l := range loops {
		if l.Type != loop.Ralph {
			continue
		}
		iterations += l.Iteration
		if !slices.Contains(files, "out/"+l.ID+".txt") {
			t.Errorf("out/%s.txt (ralph %q) is not on the remote's %s: %q", l.ID, l.Title, planBranch, files)
		}
		if l.Title == "Fragile task" {
			if got, want := bareGit(t, bare, "show", "refs/heads/"+planBranch+":out/"+l.ID+".txt"), "done by "+l.ID+" iteration 2"; got != want {
				t.Errorf("fragile task's file on the remote's plan branch = %q, want %q", got, want)
			}
		}
	}
	// A landed task's branch is deleted by the tidy-up after the merge
	// queue lets go of the plan branch's locks: soon after, not in the
	// transaction that completes the tree.
	var got string
	if !testslack.Wait(10*time.Second, poll, func() bool {
		got = bareGit(t, bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/loopr/")
		return got == planBranch
	}) {
		t.Errorf("loopr branches on the remote = %q, want only the plan branch %s (finished loops' branches deleted)", got, planBranch)
	}
	if local, remote := r.git(t, "rev-parse", planBranch), bareGit(t, bare, "rev-parse", "refs/heads/"+planBranch); local != remote {
		t.Errorf("local %s = %s, want the remote's %s", planBranch, local, remote)
	}
	log := d.output()
	if n := strings.Count(log, "msg=\"created plan branch on the remote\""); n != 1 {
		t.Errorf("daemon log says %d times that it created the plan branch on the remote, want 1", n)
	}
	// Every ralph iteration committed, so each pushed its branch; each
	// merge pushed the plan branch.
	pushed := strings.Count(log, "msg=pushed")
	if want := iterations + 8 + 1; pushed < want {
		t.Errorf("daemon log shows %d pushes, want at least %d (%d ralph iterations, 8 merges, the plan branch)", pushed, want, iterations)
	}
	if after := r.checkout(t); after != before {
		t.Errorf("the user's checkout changed: before %+v, after %+v", before, after)
	}
	stopCleanly(t, r, d)
}

// TestGitRemoteOutage: the shared repository is out of reach when a plan
// starts (moved away); the plan waits — a transient error, no iteration
// spent — and runs to completion once the repository is back.
func TestGitRemoteOutage(t *testing.T) {
	t.Parallel()
	r, bare := remoteRepo(t)
	d := startDaemon(t, r)
	away := bare + ".away"
	if err := os.Rename(bare, away); err != nil {
		t.Fatal(err)
	}
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Build the e2e widget", "--json"), &plan)
	waitFor(t, 20*time.Second, "the plan to meet the missing remote", func() bool {
		return show(t, r, plan.ID).TransientRetries > 0
	})
	if err := os.Rename(away, bare); err != nil {
		t.Fatal(err)
	}
	waitEvery(t, 90*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	checkTree(t, list(t, r))
	p := show(t, r, plan.ID)
	if p.Iteration != 1 {
		t.Errorf("plan at iteration %d after the outage, want 1 (a missing remote spends none)", p.Iteration)
	}
	s := stopCleanly(t, r, d)
	var said []string
	for _, ev := range journal(t, s) {
		if ev.Loop == plan.ID {
			said = append(said, ev.Message)
		}
	}
	if !slices.ContainsFunc(said, func(m string) bool {
		return strings.HasPrefix(m, "git remote out of reach (") && strings.Contains(m, "no iteration spent") && strings.Contains(m, "fetch from remote origin ("+bare+")")
	}) {
		t.Errorf("the plan's journal never named the unreachable remote as a retry without cost:\n%s", strings.Join(said, "\n"))
	}
}

// TestGitRemoteMissing: git.remote names a remote the repository does not
// have; the daemon refuses to start with one line saying how to add it.
func TestGitRemoteMissing(t *testing.T) {
	t.Parallel()
	r := newRepo(t, remoteConfig(t))
	ctx, cancel := context.WithTimeout(t.Context(), testslack.Scale(30*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "daemon")
	cmd.Dir = r.dir
	cmd.Env = append(cmd.Environ(), "LOOPR_HOME=", "NO_COLOR=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the daemon started despite the missing remote:\n%s", stderr.String())
	}
	if err == nil {
		t.Fatalf("daemon exited 0 without the remote:\n%s", stderr.String())
	}
	want := "git.remote origin: no such remote in " + r.git(t, "rev-parse", "--show-toplevel") + "; add it with git remote add origin URL"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("daemon output lacks %q:\n%s", want, stderr.String())
	}
}
