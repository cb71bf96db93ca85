package e2e

// Issue 10, item 4, measured: git work that takes long (a 1 GiB file to
// commit) never holds up another loop's cancel or the scheduling of new
// work, and the user's slow hooks never run for loopr's commits and merges,
// so they cannot delay a SIGTERM.

import (
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// gitIn reports whether a git process is working in dir (git -C dir …).
func gitIn(dir string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(cmd, []byte{0})
		if len(args) > 2 && filepath.Base(string(args[0])) == "git" && bytes.Contains(cmd, []byte("\x00"+dir+"\x00")) &&
			!bytes.Contains(cmd, []byte("worktree\x00")) {
			return true
		}
	}
	return false
}

// TestBigFileNeitherFreezesCancelNorScheduling: an agent leaves a 1 GiB
// file in its worktree; while loopr commits it, another loop is cancelled
// and a new loop is added and run. On the build before git moved off the
// manager goroutine, the commit froze scheduling and cancels for 32 s.
func TestBigFileNeitherFreezesCancelNorScheduling(t *testing.T) {
	t.Parallel()
	marks := t.TempDir()
	size := int64(1 << 30)
	if testing.Short() {
		size = 256 << 20 // CI: a quarter, the same point
	}
	agent := fmt.Sprintf(`cat >/dev/null
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case $title in
big) head -c %[2]d /dev/zero >big.bin ;;
hold) echo $$ >%[1]s/$LOOPR_LOOP_ID.pid; exec sleep 120 ;;
*) echo quick >quick.txt ;;
esac`, marks, size)
	cmd, _ := json.Marshal([]string{"sh", "-c", agent})
	r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
agent:
  command: %s
  timeout_secs: 300
loops:
  ralph: {max_iterations: 1, validate: []}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, cmd))
	d := startDaemon(t, r)
	add := func(title string) string {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", title, "--task", title, "--json"), &l)
		return l.ID
	}
	hold := add("hold")
	var holdPID int
	waitFor(t, 20*time.Second, "the held agent to run", func() bool {
		b, err := os.ReadFile(filepath.Join(marks, hold+".pid"))
		if err == nil {
			holdPID, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err == nil
	})
	big := add("big")
	wt := filepath.Join(r.home, "worktrees", big)
	if real, err := filepath.EvalSymlinks(r.home); err == nil {
		wt = filepath.Join(real, "worktrees", big)
	}
	waitFor(t, 120*time.Second, "git to work on the big file", func() bool {
		if l := show(t, r, big); l.Status.Terminal() {
			t.Fatalf("the big loop finished (%s: %s) before git was seen working on it", l.Status, l.Reason)
		}
		return gitIn(wt)
	})
	gitSeen := time.Now()

	// Cancel the other loop while the commit runs.
	t0 := time.Now()
	ok(t, r.dir, "cancel", hold)
	cancelAnswered := time.Since(t0)
	waitFor(t, 10*time.Second, "the cancelled agent to be gone", func() bool { return !procLive(holdPID) })
	cancelGone := time.Since(t0)
	stillCommitting := gitIn(wt)

	// Schedule and run a new loop while it runs.
	t1 := time.Now()
	quick := add("quick")
	waitFor(t, 20*time.Second, "the new loop to complete", func() bool { return show(t, r, quick).Status == loop.Complete })
	quickDone := time.Since(t1)
	stillCommittingAfterQuick := gitIn(wt)

	waitFor(t, 300*time.Second, "the big loop to complete", func() bool {
		l := show(t, r, big)
		if l.Status.Terminal() && l.Status != loop.Complete {
			t.Fatalf("big loop %s: %s", l.Status, l.Reason)
		}
		return l.Status == loop.Complete
	})
	commit := time.Since(gitSeen)
	t.Logf("%d MiB file: git worked on it for %s; meanwhile `loopr cancel` of another loop answered in %s, its agent gone after %s (commit still running: %v); a new loop added and completed in %s (commit still running: %v)",
		size>>20, commit.Round(10*time.Millisecond), cancelAnswered.Round(time.Millisecond), cancelGone.Round(time.Millisecond), stillCommitting,
		quickDone.Round(10*time.Millisecond), stillCommittingAfterQuick)
	if cancelAnswered > 2*time.Second || cancelGone > 8*time.Second {
		t.Errorf("cancel answered in %s, agent gone after %s: the commit held it up", cancelAnswered, cancelGone)
	}
	if l := show(t, r, hold); l.Status != loop.Cancelled {
		t.Errorf("held loop is %s after cancel", l.Status)
	}
	stopCleanly(t, r, d)
}

// TestSlowUserHooksNeverDelayStop: the user's repository has post-commit,
// post-merge and post-checkout hooks that sleep a minute (--no-verify does
// not skip them). loopr's commits and merges never run them, so a SIGTERM
// while a tree runs and merges stops in well under the grace period; on
// the build before, it took 87 s.
func TestSlowUserHooksNeverDelayStop(t *testing.T) {
	t.Parallel()
	marks := t.TempDir()
	runLog := filepath.Join(marks, "runs.log")
	r := newRepo(t, treeConfig(t, 2, "true", "crash", runLog, "0.4"))
	hook := fmt.Sprintf("#!/bin/sh\necho \"$0\" >>%s/hooks.log\nsleep 60\n", marks)
	for _, name := range []string{"post-commit", "post-merge", "post-checkout", "pre-commit", "pre-merge-commit"} {
		if err := os.WriteFile(filepath.Join(r.dir, ".git", "hooks", name), []byte(hook), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Plan, "--title", "Hooked", "--task", "a tree that merges", "--json"), &plan)
	// Some ralph loops merged into the plan branch, others still run.
	waitEvery(t, 60*time.Second, slowPoll, "a merge, and agents still running", func() bool {
		merged, running := 0, 0
		for _, l := range list(t, r) {
			if l.Type == loop.Ralph && l.Status == loop.Complete {
				merged++
			}
			if l.Status == loop.Running {
				running++
			}
		}
		return merged >= 1 && running >= 1
	})
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(testslack.Scale(30 * time.Second)):
		t.Fatalf("SIGTERM took more than 30 s:\n%s", tail(d.output(), 30))
	}
	took := time.Since(start)
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("daemon exit %d after SIGTERM, want 0", code)
	}
	if b, err := os.ReadFile(filepath.Join(marks, "hooks.log")); err == nil {
		t.Errorf("the user's hooks ran for loopr's git work:\n%s", b)
	}
	if out := r.git(t, "log", "--oneline", gitflow.BranchName(plan.ID, plan.Title)); !strings.Contains(out, "Merge") && !strings.Contains(out, "loopr:") {
		t.Errorf("no loopr commit on the plan branch:\n%s", out)
	}
	t.Logf("SIGTERM with slow hooks in the repository, a tree merging: stopped in %s, no hook ran", took.Round(time.Millisecond))
	if took > 6*time.Second {
		t.Errorf("stop took %s", took)
	}
}
