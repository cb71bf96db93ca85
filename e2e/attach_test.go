package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/loop"
)

// TestAttachUnderTmux: loopr attach takes a running loop over by hand. Its
// agent (testdata/attachagent.sh) works until manual.txt exists; attach
// stops it, the loop is paused at the same iteration, and the profile's
// attach_args (testdata/takeover.sh) run in the loop's worktree on the
// terminal: the line typed lands in manual.txt, which loopr commits on the
// loop's branch as manual work. loopr resume lets the loop go on, and it
// completes.
func TestAttachUnderTmux(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	agent, _ := json.Marshal([]string{"sh", abs(t, "testdata/attachagent.sh")})
	take, _ := json.Marshal([]string{"sh", abs(t, "testdata/takeover.sh")})
	r := newRepo(t, fmt.Sprintf("agent:\n  preset: command\n  command: %s\n  attach_args: %s\n"+
		"loops:\n  ralph: {max_iterations: 3, validate: [\"test -s manual.txt\"]}\nstorage: {disk_quota_min_gb: 0}\nscheduler: {poll_interval_secs: 1}\n", agent, take))
	startDaemon(t, r)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "by hand", "--task", "write manual.txt", "--json"), &l)
	show := func() loop.Loop {
		var cur loop.Loop
		mustJSON(t, ok(t, r.dir, "show", l.ID, "--json"), &cur)
		return cur
	}
	waitFor(t, time.Minute, "the agent to run in its worktree", func() bool {
		cur := show()
		return cur.Status == loop.Running && cur.Workdir != "" && cur.Branch != ""
	})

	script := fmt.Sprintf("cd %q && %q attach %s; echo ATTACH-EXITED $?; sleep 30", r.dir, bin, l.ID)
	tm.run("new-session", "-d", "-s", "tui", "-x", "140", "-y", "30", "-e", "NO_COLOR=1", "sh", "-c", script)
	tm.waitScreen("the interactive session", "paused at iteration 1", "take over: type a line:")
	if cur := show(); cur.Status != loop.Paused || cur.Iteration != 1 {
		t.Fatalf("while attached: %s at iteration %d, want paused at 1", cur.Status, cur.Iteration)
	}
	tm.keys("hello from a person", "Enter")
	s := tm.waitScreen("attach to end", "ATTACH-EXITED 0")
	if !strings.Contains(s, "loopr resume "+l.ID) {
		t.Errorf("attach does not say what comes next:\n%s", s)
	}
	cur := show()
	if got := r.git(t, "show", cur.Branch+":manual.txt"); got != "hello from a person" {
		t.Errorf("manual.txt on %s = %q, want the line typed", cur.Branch, got)
	}
	if subj := r.git(t, "log", "-1", "--format=%s", cur.Branch); !strings.Contains(subj, "manual") || !strings.Contains(subj, "iteration 1") {
		t.Errorf("the commit is %q, want it to name iteration 1 and manual work", subj)
	}
	if cur.Status != loop.Paused || cur.Iteration != 1 {
		t.Errorf("after attach: %s at iteration %d, want paused at 1", cur.Status, cur.Iteration)
	}

	manual := r.git(t, "rev-parse", cur.Branch)
	ok(t, r.dir, "resume", l.ID)
	waitStatus(t, r.dir, l.ID, loop.Complete)
	if cur := show(); cur.Iteration != 1 {
		t.Errorf("completed at iteration %d, want 1: the stop and the manual work spent none", cur.Iteration)
	}
	if ev := ok(t, r.dir, "events", l.ID); !strings.Contains(ev, "paused") || !strings.Contains(ev, "manual work by loopr attach: commit "+manual) {
		t.Errorf("the journal does not say the loop was paused and worked on by hand (commit %s):\n%s", manual, ev)
	}
}
