package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// gitHold is a `git` put first on a daemon's PATH that holds the git
// commands matching a rule for as long as the rule's hold file exists, and
// logs each one it holds: a git operation made as slow as a test needs,
// deterministically (loopr runs git with core.hooksPath=/dev/null, so no
// hook can do it).
type gitHold struct {
	dir string // holds the wrapper, named git, and the hold files
	log string // one line per command held
}

// newGitHold writes the wrapper. rules maps a hold name to a shell case
// pattern matched against " <args> " (the arguments between spaces).
func newGitHold(t *testing.T, rules map[string]string) gitHold {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH")
	}
	dir := t.TempDir()
	g := gitHold{dir: dir, log: filepath.Join(dir, "held.log")}
	var cases strings.Builder
	for name, pattern := range rules {
		hold := filepath.Join(dir, name+".hold")
		fmt.Fprintf(&cases, "%s)\n\tif [ -e %q ]; then echo \"$*\" >>%q; fi\n\twhile [ -e %q ]; do sleep 0.05; done ;;\n",
			pattern, hold, g.log, hold)
	}
	script := fmt.Sprintf("#!/bin/sh\ncase \" $* \" in\n%sesac\nexec %q \"$@\"\n", cases.String(), real)
	if err := os.WriteFile(filepath.Join(dir, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for name := range rules {
			os.Remove(filepath.Join(dir, name+".hold"))
		}
	})
	return g
}

// env puts the wrapper first on PATH.
func (g gitHold) env() string { return "PATH=" + g.dir + ":" + os.Getenv("PATH") }

// on holds the commands of rule name from now on.
func (g gitHold) on(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, name+".hold"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// off lets the commands of rule name go.
func (g gitHold) off(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(g.dir, name+".hold")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// held reports whether a command containing s was held.
func (g gitHold) held(s string) bool {
	b, _ := os.ReadFile(g.log)
	return strings.Contains(string(b), s)
}

// wait waits until a command containing s was held.
func (g gitHold) wait(t *testing.T, d *daemonProc, s, what string) {
	t.Helper()
	if !testslack.Wait(60*time.Second, poll, func() bool { return g.held(s) || d.exited() }) || d.exited() {
		b, _ := os.ReadFile(g.log)
		t.Fatalf("gave up waiting for %s; git held:\n%s\ndaemon:\n%s", what, b, tail(d.output(), 40))
	}
}

// TestStatusWhileGitHangs (issue 20.8): `loopr status` and `loopr list`
// answer while the manager is stuck in a git command (removing a finished
// loop's worktree) and a configuration reload is stuck in the preflight
// check's git. Before, status ran the preflight check itself, under the
// lock the stuck check held: every command, which asks the daemon's status
// first, timed out.
func TestStatusWhileGitHangs(t *testing.T) {
	t.Parallel()
	cfg := treeConfig(t, 3, validateCmd(t))
	r := newRepo(t, cfg)
	// The preflight check's own git command (gitflow's run with -C).
	g := newGitHold(t, map[string]string{"remove": `*" worktree remove "*`, "preflight": `" rev-parse --verify --quiet HEAD^{commit} "`})
	d := startDaemonEnv(t, r, g.env())
	g.on(t, "remove")

	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Write the file", "--json"), &l)
	g.wait(t, d, "worktree remove", "the manager to remove the finished loop's worktree")
	// A reload checks the new configuration at once: its git is held too.
	g.on(t, "preflight")
	if err := os.WriteFile(filepath.Join(r.dir, "loopr.yml"), []byte(strings.Replace(cfg, "poll_interval_secs: 1", "poll_interval_secs: 2", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	g.wait(t, d, "rev-parse", "the reload's preflight check to run git")

	// Generous bounds: a stuck status never answers; the CLI gives up on
	// an unanswered status after 1 s (client.Dial) or 30 s.
	limit := testslack.Scale(20 * time.Second)
	res, took := runWithin(t, limit, r.dir, "status", "--json")
	if res.code != 0 {
		t.Fatalf("status while git hangs: exit %d after %s\n%s%s", res.code, took.Round(time.Millisecond), res.stdout, res.stderr)
	}
	var st api.Status
	mustJSON(t, res.stdout, &st)
	if !st.Daemon || st.Counts[loop.Complete]+st.Counts[loop.Running] != 1 {
		t.Errorf("status while git hangs: daemon %v, counts %v; want the daemon and the one loop", st.Daemon, st.Counts)
	}
	t.Logf("status answered in %s while git hung", took.Round(time.Millisecond))
	res, took = runWithin(t, limit, r.dir, "list", "--json")
	if res.code != 0 {
		t.Fatalf("list while git hangs: exit %d after %s\n%s%s", res.code, took.Round(time.Millisecond), res.stdout, res.stderr)
	}
	var loops []loop.Loop
	mustJSON(t, res.stdout, &loops)
	if len(loops) != 1 || loops[0].ID != l.ID {
		t.Errorf("list while git hangs: %s", describe(loops))
	}

	// Released, the manager goes on: the loop's worktree goes.
	g.off(t, "remove")
	g.off(t, "preflight")
	waitFor(t, 60*time.Second, "the worktree to be removed once git answers", func() bool {
		_, err := os.Stat(filepath.Join(r.home, "worktrees", l.ID))
		return os.IsNotExist(err)
	})
	if got := show(t, r, l.ID); got.Status != loop.Complete {
		t.Errorf("loop %s is %s, want complete", l.ID, got.Status)
	}
}
