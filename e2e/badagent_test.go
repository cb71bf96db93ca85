package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
)

// TestBadAgents: agents that hang, flood their output, exit non-zero, write
// a malformed artifact or delete their worktree (issue 3, item 4). Each
// loop fails with a reason that says what happened, the daemon keeps
// running, and a healthy loop submitted afterwards still completes.
func TestBadAgents(t *testing.T) {
	t.Parallel()
	began := time.Now()
	argv, _ := json.Marshal([]string{"sh", abs(t, "testdata/agent.sh"), "bad"})
	// The hanging agent is stopped at the timeout; the others (a 20 MiB
	// flood among them) must finish within it, however busy the machine.
	timeout := int(testslack.Scale(time.Second).Seconds() + 0.5)
	r := newRepo(t, fmt.Sprintf(`agent:
  command: %s
  timeout_secs: %d
loops:
  plan: {require_approval: false, max_iterations: 1}
  ralph: {max_iterations: 1, validate: [%q]}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, argv, timeout, validateCmd(t)))
	d := startDaemon(t, r)

	cases := []struct {
		name, typ string
		reason    []string // substrings of the loop's reason
		check     func(t *testing.T, l loop.Loop)
	}{
		{name: "hang", typ: loop.Ralph, reason: []string{"max_iterations 1 reached", fmt.Sprintf("agent timed out after %ds", timeout)}},
		{name: "flood", typ: loop.Ralph, reason: []string{"agent exited 4"}, check: func(t *testing.T, l loop.Loop) {
			log := iterFile(r, l.ID, 1, "agent.log")
			if n := len(log); n > runner.DefaultMaxLogBytes+4096 || n < runner.DefaultMaxLogBytes/2 {
				t.Errorf("agent.log of a 20 MiB flood is %d bytes, want about the %d byte limit", n, runner.DefaultMaxLogBytes)
			}
			if !strings.HasSuffix(log, "flood done\n") || !strings.HasPrefix(log, "all work and no play") {
				t.Errorf("agent.log lost its head or tail: starts %q, ends %q", log[:min(len(log), 40)], log[max(0, len(log)-40):])
			}
			if len(l.Feedback) > 16<<10 {
				t.Errorf("feedback of a flood is %d bytes, want it bounded", len(l.Feedback))
			}
		}},
		{name: "exit3", typ: loop.Ralph, reason: []string{"agent exited 3"}, check: func(t *testing.T, l loop.Loop) {
			if !strings.Contains(l.Feedback, "something went wrong") {
				t.Errorf("feedback lacks the agent's output: %q", l.Feedback)
			}
		}},
		{name: "malformed", typ: loop.Plan, reason: []string{"artifact:", "## Specs"}, check: func(t *testing.T, l loop.Loop) {
			kids := 0
			for _, k := range list(t, r) {
				if k.Parent == l.ID {
					kids++
				}
			}
			if kids != 0 || l.Artifact != "" {
				t.Errorf("a malformed artifact spawned %d children and was recorded as %q", kids, l.Artifact)
			}
		}},
		{name: "rmworktree", typ: loop.Ralph, reason: []string{"workdir vanished"}},
	}
	ids := map[string]string{}
	for _, tc := range cases {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", tc.typ, "--title", "bad:"+tc.name, "--task", "misbehave: "+tc.name, "--json"), &l)
		ids[tc.name] = l.ID
	}
	waitFor(t, 45*time.Second, "every bad loop to fail", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		return settled(status(t, r))
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := show(t, r, ids[tc.name])
			if l.Status != loop.Failed {
				t.Fatalf("status %s, want failed (reason %q)", l.Status, l.Reason)
			}
			for _, want := range tc.reason {
				if !strings.Contains(l.Reason, want) {
					t.Errorf("reason %q lacks %q", l.Reason, want)
				}
			}
			t.Logf("reason: %s", l.Reason)
			if strings.Contains(l.Reason, "\n") {
				t.Errorf("reason %q is not one line", l.Reason)
			}
			if tc.check != nil {
				tc.check(t, l)
			}
		})
	}

	// The daemon is the same process, still serving, and still runs work.
	if st := status(t, r); !st.Daemon || st.PID != d.cmd.Process.Pid {
		t.Fatalf("after the bad agents: status daemon %v pid %d, want the daemon pid %d", st.Daemon, st.PID, d.cmd.Process.Pid)
	}
	var good loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "Healthy task", "--task", "behave", "--json"), &good)
	waitFor(t, 20*time.Second, "the healthy loop to finish", func() bool {
		return show(t, r, good.ID).Status.Terminal()
	})
	if l := show(t, r, good.ID); l.Status != loop.Complete {
		t.Errorf("healthy loop after the bad ones: %s (%s), want complete", l.Status, l.Reason)
	}
	// A standalone loop's branch is its result.
	if got := r.git(t, "show", "loopr/healthy-task-"+gitflow.ShortID(good.ID)+":out/"+good.ID+".txt"); !strings.HasPrefix(got, "done by "+good.ID) {
		t.Errorf("healthy loop's file on loopr/healthy-task-%s = %q", gitflow.ShortID(good.ID), got)
	}
	// No agent of a bad loop is left behind, in particular not the one that ignored SIGTERM.
	if procs := agentProcs(r.home); len(procs) > 0 {
		t.Errorf("agent processes still running: %v", procs)
	}
	stopCleanly(t, r, d)
	t.Logf("wall time %s", time.Since(began).Round(time.Millisecond))
}

// agentProcs lists live processes whose environment names home as LOOPR_HOME.
func agentProcs(home string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(env), "LOOPR_HOME="+home+"\x00") {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && len(stat) > i+2 && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
	}
	return out
}
