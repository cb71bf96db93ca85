// Package e2e drives the real loopr binary: built once per test run, then
// executed as a user would, against real store files, sockets and agents.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/internal/trusttest"
)

// bin is the loopr binary built for this test run.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loopr-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "loopr")
	if b := os.Getenv("E2E_LOOPR_BIN"); b != "" {
		// A test re-executed in a network namespace (claude_test.go)
		// reuses the binary its parent built.
		bin = b
	} else {
		// The binary is built without -race: the packages' own tests run
		// under the race detector, and a race-instrumented daemon is too
		// slow for the timing assertions here.
		out, err := exec.Command("go", "build", "-o", bin, "../cmd/loopr").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build loopr: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	// Daemons start from the loopr.yml files tests write: trusted, in a
	// trust file of this run's (never the machine's ~/.config/loopr).
	cleanup := trusttest.Setup()
	code := m.Run()
	cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished loopr invocation.
type result struct {
	stdout, stderr string
	code           int
}

// run executes loopr in dir with args and returns its output and exit code.
func run(t *testing.T, dir string, stdin string, args ...string) result {
	t.Helper()
	return runEnv(t, dir, stdin, nil, args...)
}

// runEnv is run with env added to the environment (the last value of a
// variable wins).
func runEnv(t *testing.T, dir string, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// LOOPR_NO_START: plan and add only queue unless a test starts a
	// daemon itself (commands_test.go clears it to test the start).
	cmd.Env = append(append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1", "LOOPR_NO_START=1"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run loopr %v: %v", args, err)
	}
	return result{so.String(), se.String(), code}
}

// ok runs loopr and fails the test unless it exits 0.
func ok(t *testing.T, dir string, args ...string) string {
	t.Helper()
	r := run(t, dir, "", args...)
	if r.code != 0 {
		t.Fatalf("loopr %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
