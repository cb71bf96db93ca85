package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// The daemon's client is a Backend.
var _ Backend = (*client.Client)(nil)

// testConfigYAML runs agents as `true` and keeps git out of the way.
const testConfigYAML = `agent:
  command: ["true"]
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
loops:
  ralph: {max_iterations: 3, validate: []}
`

// testWorkspace writes a loopr.yml into a fresh workspace and returns its
// paths (the home inside it).
func testWorkspace(t *testing.T) workspace.Paths {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "loopr.yml")
	if err := os.WriteFile(cfg, []byte(testConfigYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr"), Config: cfg, ConfigSet: true}
}

// run runs loopr with args and returns its exit code and output.
func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// statusOf runs `loopr status --json`.
func statusOf(t *testing.T, p workspace.Paths) api.Status {
	t.Helper()
	code, out, errs := run("--home", p.Home, "--config", p.Config, "status", "--json")
	if code != 0 {
		t.Fatalf("loopr status = exit %d: %s", code, errs)
	}
	var st api.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("loopr status --json: %v\n%s", err, out)
	}
	return st
}

func TestCLIGoesThroughTheDaemon(t *testing.T) {
	t.Parallel()
	p := testWorkspace(t)
	if st := statusOf(t, p); st.Daemon {
		t.Fatalf("before the daemon starts, status says daemon %v; want the store opened directly", st.Daemon)
	}

	runDaemon(t, p)

	st := statusOf(t, p)
	if !st.Daemon || st.PID != os.Getpid() || st.Version != "cli-test" {
		t.Errorf("status through the daemon = daemon %v pid %d version %q; want true %d cli-test", st.Daemon, st.PID, st.Version, os.Getpid())
	}

	code, _, errs := run("--home", p.Home, "--config", p.Config, "add", "--type", "ralph", "--task", "made through the socket", "--json")
	if code != 0 {
		t.Fatalf("loopr add = exit %d: %s", code, errs)
	}
	code, out, errs := run("--home", p.Home, "--config", p.Config, "list", "--json")
	if code != 0 {
		t.Fatalf("loopr list = exit %d: %s", code, errs)
	}
	var loops []loop.Loop
	if err := json.Unmarshal([]byte(out), &loops); err != nil || len(loops) != 1 || loops[0].Task != "made through the socket" {
		t.Errorf("loopr list --json = %v, %v; want the loop just added", loops, err)
	}

	// The daemon's 4xx answers are usage errors: exit 2, one line.
	for _, args := range [][]string{{"show", "no-such-loop"}, {"cancel", "no-such-loop"}, {"list", "--status", "sleepy"}} {
		code, _, errs := run(append([]string{"--home", p.Home, "--config", p.Config}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("loopr %s = exit %d, stderr %q; want exit 2 with one line", strings.Join(args, " "), code, errs)
		}
	}
}

func TestExitCodeOfAPIErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{&client.APIError{Status: 404, Code: api.CodeNotFound}, 2},
		{&client.APIError{Status: 409, Code: api.CodeConflict}, 2},
		{&client.APIError{Status: 500, Code: api.CodeInternal}, 1},
		{&client.APIError{Status: 503, Code: api.CodeUnavailable}, 1},
		{&client.VersionError{Daemon: 2, Client: 1}, 1},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestHelperLoopr is not a test: it is loopr itself when the test binary
// is started by TestDaemonDetach.
func TestHelperLoopr(t *testing.T) {
	if os.Getenv("LOOPR_TEST_HELPER") != "1" {
		t.Skip("helper process for TestDaemonDetach")
	}
	i := slices.Index(os.Args, "--")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[i+1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// TestDaemonDetach starts the daemon in the background with
// `loopr daemon --detach` (the test binary standing in for loopr), talks
// to it, and stops it with SIGTERM.
func TestDaemonDetach(t *testing.T) {
	// Not parallel: it replaces selfCommand.
	orig := selfCommand
	selfCommand = func(args ...string) (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestHelperLoopr$", "--"}, args...)...)
		cmd.Env = append(os.Environ(), "LOOPR_TEST_HELPER=1")
		return cmd, nil
	}
	t.Cleanup(func() { selfCommand = orig })
	p := testWorkspace(t)

	code, out, errs := run("--home", p.Home, "--config", p.Config, "daemon", "--detach")
	if code != 0 {
		t.Fatalf("loopr daemon --detach = exit %d: %s", code, errs)
	}
	logPath := filepath.Join(p.Logs(), "daemon.log")
	if !strings.HasPrefix(out, "daemon started, pid ") || !strings.HasSuffix(strings.TrimSpace(out), "log "+logPath) {
		t.Errorf("loopr daemon --detach printed %q; want \"daemon started, pid N, log %s\"", out, logPath)
	}
	st := statusOf(t, p)
	if !st.Daemon || st.PID == os.Getpid() || st.PID <= 0 {
		t.Fatalf("status after --detach = daemon %v pid %d; want a daemon in another process", st.Daemon, st.PID)
	}
	t.Cleanup(func() { syscall.Kill(st.PID, syscall.SIGKILL) }) // if the test fails before stopping it

	code, out, errs = run("--home", p.Home, "--config", p.Config, "daemon", "--detach")
	if want := fmt.Sprintf("a loopr daemon already runs here (pid %d); nothing to start\n", st.PID); code != 0 || out != want || errs != "" {
		t.Errorf("a second --detach = exit %d, %q %q; want exit 0 and %q", code, out, errs, want)
	}

	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The store's lock is free once the daemon has shut down (bbolt waits
	// for it), and by then the socket and pid file are gone.
	s, err := store.Open(p.DB(), store.Options{Timeout: 15 * time.Second})
	if err != nil {
		t.Fatalf("store.Open() after SIGTERM = %v", err)
	}
	s.Close()
	for _, f := range []string{p.Socket(), p.PIDFile()} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the daemon stopped, %s: %v; want removed", f, err)
		}
	}
	if b, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(b), "daemon stopped") {
		t.Errorf("daemon log = %q, %v; want it to record the stop", b, err)
	}
}
