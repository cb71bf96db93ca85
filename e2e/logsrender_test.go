package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestLogsRendered (issue 22, watching the agent): a daemon runs a scripted
// agent that prints claude's stream-json (the default profile's preset is
// claude); `loopr logs -f` shows the rendered lines while the agent runs,
// `loopr logs` the same afterwards, and `--raw` the JSON as it was.
func TestLogsRendered(t *testing.T) {
	t.Parallel()
	cmdJSON, _ := json.Marshal([]string{"sh", abs(t, "testdata/streamagent.sh")})
	r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
agent:
  command: %s
  timeout_secs: 120
loops:
  ralph: {validate: []}
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
`, cmdJSON))
	startDaemon(t, r)
	var task loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Run the tests", "--json"), &task)

	f := followLogs(t, r.dir, task.ID)
	// The tool call shows while the agent still waits for its result:
	// rendered as the stream arrives.
	got := f.until(t, "▸ Bash  go test ./...", testslack.Scale(60*time.Second))
	if l := show(t, r, task.ID); l.Status != loop.Running {
		t.Fatalf("after the Bash call the loop is %s, want running (the agent waits for the release file)", l.Status)
	}
	if err := os.WriteFile(filepath.Join(r.home, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got = append(got, f.rest(t, testslack.Scale(60*time.Second))...)
	awaitStatus(t, r, task.ID, loop.Complete)

	want := []string{
		"● claude · model claude-test-1 · " + r.dir,
		"I will run the tests.",
		"▸ Bash  go test ./...",
		"  │ ok      pkg/a    0.1s",
		"  │ ok      pkg/b    0.2s",
		"  │ ok      pkg/c    0.3s",
		"  │ … (2 more lines)",
		"a warning the CLI printed",
		"▸ Read  missing.go",
		"  ✗ File does not exist.",
		"All tests pass.",
		"✓ done  $0.01 · 1.5k tokens · 4.2s · 3 turns",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logs -f printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if out := ok(t, r.dir, "logs", task.ID); out != strings.Join(want, "\n")+"\n" {
		t.Errorf("logs after the fact:\n%s\nwant what -f printed:\n%s", out, strings.Join(want, "\n"))
	}
	raw := ok(t, r.dir, "logs", task.ID, "--raw")
	if !strings.Contains(raw, `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash"`) || strings.Contains(raw, "▸") {
		t.Errorf("logs --raw is not the stream as the agent wrote it:\n%s", raw)
	}
	if log := iterFile(r, task.ID, 1, "agent.log"); log != raw {
		t.Errorf("logs --raw differs from agent.log:\n%s", log)
	}
}

// logsFollower is a running `loopr logs -f`: its stdout a line at a time.
type logsFollower struct {
	cmd    *exec.Cmd
	lines  chan string // closed at the end of its output
	done   chan error  // its exit, once lines is closed
	stderr bytes.Buffer
}

// followLogs starts `loopr logs -f id` in dir.
func followLogs(t *testing.T, dir, id string) *logsFollower {
	t.Helper()
	f := &logsFollower{cmd: exec.Command(bin, "logs", "-f", id), lines: make(chan string, 1024), done: make(chan error, 1)}
	f.cmd.Dir = dir
	f.cmd.Env = append(os.Environ(), "LOOPR_HOME=")
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f.cmd.Stderr = &f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		f.done <- f.cmd.Wait()
	}()
	return f
}

// until reads lines until one is last, and returns them all; it fails the
// test when the output ends first or within passes.
func (f *logsFollower) until(t *testing.T, last string, within time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.After(within)
	for len(got) == 0 || got[len(got)-1] != last {
		select {
		case l, ok := <-f.lines:
			if !ok {
				t.Fatalf("logs -f ended before %q: %q %s", last, got, f.stderr.String())
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("no %q from logs -f within %s: %q", last, within, got)
		}
	}
	return got
}

// rest reads the remaining lines and waits for logs -f to exit 0, within.
func (f *logsFollower) rest(t *testing.T, within time.Duration) []string {
	t.Helper()
	var got []string
	for l := range f.lines {
		got = append(got, l)
	}
	select {
	case err := <-f.done:
		if err != nil {
			t.Fatalf("logs -f: %v %s", err, f.stderr.String())
		}
	case <-time.After(within):
		f.cmd.Process.Kill()
		t.Fatal("logs -f did not end with its iteration")
	}
	return got
}
