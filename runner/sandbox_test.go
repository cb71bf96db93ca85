package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/sandbox"
)

// sandboxedJob is newJob with the agent script body in the workdir (the
// sandbox hides the rest of /tmp) and sandbox runner bwrap, network none.
func sandboxedJob(t *testing.T, body string) Job {
	t.Helper()
	if err := sandbox.Check(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: .ci/run installs bubblewrap; CI must run this test", err)
		}
		t.Skip(err)
	}
	j := newJob(t, loop.Ralph, nil)
	script := filepath.Join(j.Workdir, "agent.sh")
	if err := os.WriteFile(script, []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.Settings.Agent = []string{"sh", script}
	j.Settings.Sandbox = sandbox.Policy{Sandbox: config.Sandbox{Runner: config.SandboxBwrap, Network: config.NetworkNone},
		Preset: "command", Workspace: j.Workdir, State: j.Home}
	return j
}

// alive lists the host pids of live processes whose command line holds
// token.
func alive(token string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), token) || processDead(atoiOr(e.Name())) {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

func atoiOr(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}

// TestRunSandboxedTimeoutKillsEverything: bwrap keeps the agent in loopr's
// process group, so the timeout's SIGTERM-then-SIGKILL reaches what the
// agent started inside (one ignores SIGTERM, one left the group with
// setsid): nothing outlives Run.
func TestRunSandboxedTimeoutKillsEverything(t *testing.T) {
	t.Parallel()
	token := fmt.Sprintf("1%d.5", time.Now().UnixNano()%1e9)
	j := sandboxedJob(t, `
sh -c 'trap "" TERM; exec sleep `+token+`' &
setsid sleep `+token+` &
echo started
wait`)
	j.Settings.Timeout = 2 * time.Second
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !strings.Contains(res.Reason, "timed out") {
		t.Fatalf("Run() = %v %q, want a timeout\n%s", res.Outcome, res.Reason, readFile(t, filepath.Join(res.Dir, "agent.log")))
	}
	if !strings.Contains(readFile(t, filepath.Join(res.Dir, "agent.log")), "started") {
		t.Fatalf("the agent did not run in the sandbox:\n%s", readFile(t, filepath.Join(res.Dir, "agent.log")))
	}
	if left := alive(token); len(left) > 0 {
		t.Errorf("processes %v of the sandboxed agent outlived Run", left)
	}
}

// TestRunSandboxedStall: the stall watch sees the sandboxed agent's
// silence (its worktree is the same directory inside and out).
func TestRunSandboxedStall(t *testing.T) {
	t.Parallel()
	j := sandboxedJob(t, `echo hi; exec sleep 1000`)
	j.Settings.StallTimeout = time.Second
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !res.Stalled {
		t.Fatalf("Run() = %v %q stalled=%v, want a stall", res.Outcome, res.Reason, res.Stalled)
	}
}

// TestRunSandboxedValidate: validate commands run in the same sandbox:
// one that writes outside the worktree fails the iteration.
func TestRunSandboxedValidate(t *testing.T) {
	t.Parallel()
	j := sandboxedJob(t, `echo work > out.txt`)
	outside := filepath.Join(j.Home, "outside")
	j.Settings.Validate = []string{"test -s out.txt", "echo x > " + outside}
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !strings.Contains(res.Reason, "validate `echo x > ") {
		t.Fatalf("Run() = %v %q, want the second validate command to fail", res.Outcome, res.Reason)
	}
	if exists(outside) {
		t.Errorf("a validate command wrote %s outside the worktree", outside)
	}
	if len(res.Evidence) != 2 || res.Evidence[0].ExitCode != 0 {
		t.Errorf("evidence %+v: want the first command passed in the sandbox", res.Evidence)
	}
}

// TestRunSandboxedPromptOutside: a prompt template that resolves to a file
// the sandbox hides (under /tmp or the home, outside the repository; here
// through a link in the repository) is not read into the sandboxed agent's
// prompt: the iteration fails naming it, and the agent never sees it.
func TestRunSandboxedPromptOutside(t *testing.T) {
	t.Parallel()
	j := sandboxedJob(t, `cat`)
	secret := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(secret, []byte("PRIVATE-KEY-MATERIAL\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(j.Workdir, "prompt.md")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	j.Settings.PromptFile = link
	res := (&Runner{}).Run(context.Background(), j)
	if log, _ := os.ReadFile(filepath.Join(res.Dir, "agent.log")); strings.Contains(string(log), "PRIVATE-KEY") {
		t.Fatalf("the sandboxed agent got a file the sandbox hides in its prompt:\n%s", log)
	}
	if res.Outcome != Failed || !strings.Contains(res.Reason, "prompt template") {
		t.Errorf("Run() = %v %q, want a failure naming the prompt template", res.Outcome, res.Reason)
	}
	inside := filepath.Join(j.Workdir, "mine.md")
	if err := os.WriteFile(inside, []byte("my own prompt for {{.Title}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.Settings.PromptFile = inside
	j.Loop.Iteration++
	res = (&Runner{}).Run(context.Background(), j)
	if log, _ := os.ReadFile(filepath.Join(res.Dir, "agent.log")); !strings.Contains(string(log), "my own prompt") {
		t.Errorf("a prompt template in the repository did not reach the agent: %v %q\n%s", res.Outcome, res.Reason, log)
	}
}

// TestRunSandboxedSignalNamed: bwrap exits 128+n for an agent killed by
// signal n, so the reason names the signal as well as the exit status.
func TestRunSandboxedSignalNamed(t *testing.T) {
	t.Parallel()
	j := sandboxedJob(t, `kill -9 $$`)
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !strings.Contains(res.Reason, "agent exited 137 (in the sandbox: killed by signal 9 (killed)") {
		t.Fatalf("Run() = %v %q, want exit 137 read as signal 9", res.Outcome, res.Reason)
	}
}
