package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// hostileFileConfig runs plan loops with the given agent script, one
// iteration each, optionally awaiting approval.
func hostileFileConfig(script string, approval bool) string {
	return fmt.Sprintf(`concurrency:
  max_loops: 4
  max_api_calls: 4
agent:
  command: %s
  timeout_secs: 60
loops:
  plan: {require_approval: %t, max_iterations: 1}
  spec: {max_iterations: 1}
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
`, relArgv("sh", "-c", script), approval)
}

const hostileSecret = "loopr-secret-marker-7f3a9"

// TestHostileArtifacts: an artifact that is a FIFO, a symbolic link to
// /proc/self/environ, a link to /dev/zero or a link to a file outside the
// loop's directories fails the iteration at once with a reason naming
// what it is. Nothing hangs (cancel and stop stay prompt) and the
// daemon's environment appears nowhere: not in the store, `show`, the
// export or any prompt (issue 10, items 4 and 9).
func TestHostileArtifacts(t *testing.T) {
	t.Parallel()
	outside := filepath.Join(t.TempDir(), "outside.md")
	if err := os.WriteFile(outside, []byte("# Plan: outside\n\n## Specs\n\n### Spec 1: leak\nleaked\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, script, reason string }{
		{"fifo", `mkfifo "$LOOPR_ARTIFACT"`, "not a regular file (a FIFO)"},
		{"environ", `ln -s /proc/self/environ "$LOOPR_ARTIFACT"`, "symbolic link to /proc/self/environ"},
		{"devzero", `ln -s /dev/zero "$LOOPR_ARTIFACT"`, "symbolic link to /dev/zero"},
		{"outside", `ln -s ` + outside + ` "$LOOPR_ARTIFACT"`, "symbolic link to " + outside},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRelEnv(t, hostileFileConfig(tc.script, false))
			e.env = append(e.env, "LOOPR_TEST_SECRET="+hostileSecret)
			d := e.start()
			l, err := d.c.Create(context.Background(), api.CreateRequest{Type: loop.Plan, Task: "Write a plan, badly."})
			if err != nil {
				t.Fatal(err)
			}
			var got loop.Loop
			relWaitFor(t, 20*time.Second, "the plan to fail", func() bool {
				got, err = d.c.Get(context.Background(), l.ID)
				return err == nil && got.Status == loop.Failed
			})
			if !strings.Contains(got.Feedback, tc.reason) && !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("reason %q / feedback %q; want it to say %q", got.Reason, got.Feedback, tc.reason)
			}
			for _, k := range list(t, repo{dir: e.dir}) {
				if k.Parent == l.ID {
					t.Errorf("a refused artifact spawned child %s %q", k.ID, k.Title)
				}
			}
			start := time.Now()
			if code := d.stop(); code != 0 {
				t.Errorf("daemon exit %d", code)
			}
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("stop took %v", took)
			}
			// The secret is nowhere a user or the next agent would read it.
			show := run(t, e.dir, "", "show", l.ID, "--json").stdout
			export := run(t, e.dir, "", "export").stdout
			if strings.Contains(show, hostileSecret) || strings.Contains(export, hostileSecret) {
				t.Errorf("the daemon's environment leaked into show or export")
			}
			filepath.WalkDir(filepath.Join(e.home, "loops"), func(p string, de os.DirEntry, err error) error {
				if err != nil || !de.Type().IsRegular() {
					return nil
				}
				if b, _ := os.ReadFile(p); strings.Contains(string(b), hostileSecret) {
					t.Errorf("%s holds the daemon's environment", p)
				}
				return nil
			})
		})
	}
}

// TestApproveReadsTheValidatedCopy: approve spawns children from the
// artifact that was validated, kept out of the agent's reach, not from
// $LOOPR_ARTIFACT — replaced by a FIFO after validation, it neither hangs
// approve (nor every write behind it) nor changes what is approved.
func TestApproveReadsTheValidatedCopy(t *testing.T) {
	t.Parallel()
	plan := "# Plan: Two\n\nText.\n\n## Specs\n\n### Spec 1: One\nfirst\n\n### Spec 2: Two\nsecond\n"
	e := newRelEnv(t, hostileFileConfig("printf '%s' '"+plan+"' > \"$LOOPR_ARTIFACT\"", true))
	d := e.start()
	l, err := d.c.Create(context.Background(), api.CreateRequest{Type: loop.Plan, Task: "Write a plan."})
	if err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "the plan to await approval", func() bool {
		got, err := d.c.Get(context.Background(), l.ID)
		return err == nil && got.Status == loop.AwaitingApproval
	})
	written := filepath.Join(e.home, "loops", l.ID, "iterations", "001", "plan.md")
	if err := os.Remove(written); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(written, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "approve", l.ID)
	cmd.Dir, cmd.Env = e.dir, e.env
	done := make(chan error, 1)
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("approve: %v\n%s", err, out)
		}
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("approve hung on a FIFO artifact")
	}
	kids := 0
	for _, k := range list(t, repo{dir: e.dir}) {
		if k.Parent == l.ID {
			kids++
		}
	}
	if kids != 2 {
		t.Errorf("approve spawned %d children, want the validated plan's 2", kids)
	}
}
