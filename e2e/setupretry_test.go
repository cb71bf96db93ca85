package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestWorktreeUnwritableSpendsNoIteration (issue 20.17): a loop whose
// worktree cannot be made — the worktrees directory cannot be written
// into (a file stands in its place: even root cannot write there) — waits
// and tries again at the same iteration, however often, and runs once the
// directory can be written again. Before, each attempt spent an
// iteration, and the loop failed at max_iterations without its agent
// ever running.
func TestWorktreeUnwritableSpendsNoIteration(t *testing.T) {
	t.Parallel()
	r := newRepo(t, treeConfig(t, 2, validateCmd(t)))
	d := startDaemon(t, r)
	wt := filepath.Join(r.home, "worktrees")
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wt, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Write the file", "--json"), &l)

	// Three attempts in a row (max_iterations is 2), none spent.
	var got loop.Loop
	waitEvery(t, 90*time.Second, slowPoll, "three attempts to make the worktree", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		done := strings.Contains(d.output(), "in_a_row=3")
		if got = show(t, r, l.ID); got.Iteration != 1 || got.Status.Terminal() || got.Status == loop.NeedsHuman {
			t.Fatalf("its worktree not made: %s at iteration %d (reason %q); want iteration 1, waiting", got.Status, got.Iteration, got.Reason)
		}
		return done
	})
	if _, err := os.Stat(filepath.Join(r.home, "loops", l.ID, "iterations", "001", "agent.log")); err == nil {
		t.Errorf("the agent ran without a worktree")
	}
	if events := ok(t, r.dir, "events", l.ID, "--json"); !strings.Contains(events, "could not start the agent (2 in a row, no iteration spent): worktree:") {
		t.Errorf("the journal does not say why the loop waits:\n%s", events)
	}

	if err := os.Remove(wt); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the loop to run once its worktree can be made", func() bool {
		got = show(t, r, l.ID)
		return got.Status.Terminal()
	})
	if got.Status != loop.Complete || got.Iteration != 1 {
		t.Errorf("once the worktree could be made: %s at iteration %d (reason %q); want complete at iteration 1", got.Status, got.Iteration, got.Reason)
	}
}

// TestOpenStoreErrorSaysItOnce: a store that cannot be opened is said in
// one "open store:", by the daemon as by the other commands (the daemon
// said it twice).
func TestOpenStoreErrorSaysItOnce(t *testing.T) {
	t.Parallel()
	r := plainDir(t, "storage: {disk_quota_min_gb: 0}\n")
	if err := os.MkdirAll(filepath.Join(r.home, "loopr.db"), 0o700); err != nil { // a directory: no store opens
		t.Fatal(err)
	}
	for _, args := range [][]string{{"daemon"}, {"list"}} {
		res, _ := runWithin(t, testslack.Scale(60*time.Second), r.dir, args...)
		if res.code != 1 || strings.Count(res.stderr, "open store") != 1 || !strings.Contains(res.stderr, "loopr.db: is a directory") {
			t.Errorf("loopr %s on a store that cannot open: exit %d, stderr %q; want 1 and one \"open store\"", args[0], res.code, res.stderr)
		}
	}
}
