package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// demoTree runs `loopr demo --plain` to the end in dir and returns every
// loop's "type title status" line, sorted, and its output.
func demoTree(t *testing.T, dir string, args ...string) ([]string, string) {
	t.Helper()
	r := run(t, dir, "", append([]string{"demo", "--plain", "--speed", "0", "--dir", dir}, args...)...)
	if r.code != 0 {
		t.Fatalf("demo %v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
	}
	var loops []loop.Loop
	for _, line := range strings.Split(strings.TrimSpace(ok(t, dir, "export")), "\n") {
		var l loop.Loop
		mustJSON(t, line, &l)
		loops = append(loops, l)
	}
	var tree []string
	for _, l := range loops {
		tree = append(tree, fmt.Sprintf("%s %q iterations=%d %s", l.Type, l.Title, l.Iteration, l.Status))
	}
	slices.Sort(tree)
	return tree, r.stdout
}

// TestDemoIsDeterministic: two demos with the default seed build the same
// tree — the same titles, the same loops needing a second iteration — with
// unique titles; another seed builds another tree.
func TestDemoIsDeterministic(t *testing.T) {
	t.Parallel()
	a, outA := demoTree(t, t.TempDir())
	b, _ := demoTree(t, t.TempDir())
	if diff := strings.Join(a, "\n"); diff != strings.Join(b, "\n") {
		t.Fatalf("two default demos differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	titles := map[string]bool{}
	retried := 0
	for _, line := range a {
		title := line[strings.Index(line, `"`):strings.LastIndex(line, `"`)]
		if titles[title] {
			t.Errorf("title %s twice in the demo tree", title)
		}
		titles[title] = true
		if !strings.HasSuffix(line, " complete") {
			t.Errorf("demo loop did not complete: %s", line)
		}
		if !strings.Contains(line, "iterations=1 ") {
			retried++
		}
	}
	if len(a) < 8 || retried == 0 {
		t.Errorf("the default demo should show a tree with a failed iteration; got %d loops, %d retried:\n%s", len(a), retried, strings.Join(a, "\n"))
	}
	if !strings.Contains(outA, "loopr demo finished in") || !strings.Contains(outA, "seed 6") {
		t.Errorf("demo output lacks the seed or the summary:\n%s", outA)
	}
	c, _ := demoTree(t, t.TempDir(), "--seed", "2")
	if strings.Join(a, "\n") == strings.Join(c, "\n") {
		t.Error("--seed 2 built the same tree as the default seed")
	}
}

// TestDemoInterruptPlain: SIGINT (Ctrl-C on plain output) stops the demo
// and its daemon, prints the summary so far and exits 130.
func TestDemoInterruptPlain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(bin, "demo", "--plain", "--dir", dir)
	cmd.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the tree runs.
	waitFor(t, 30*time.Second, "the demo's first loops", func() bool {
		return strings.Contains(out.String(), "created")
	})
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, isExit := err.(*exec.ExitError)
	if !isExit || ee.ExitCode() != 130 {
		t.Fatalf("interrupted demo: %v, want exit 130\n%s", err, out.String())
	}
	for _, want := range []string{"loopr demo interrupted after", "The summary so far", "TYPE   LOOPS", "The workspace is kept"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	checkDemoDaemonGone(t, dir)
}

// checkDemoDaemonGone: the demo's daemon stopped with it — nothing answers
// on its socket and its store opens (a running daemon would hold it).
func checkDemoDaemonGone(t *testing.T, dir string) {
	t.Helper()
	r := run(t, dir, "", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "not running") {
		t.Errorf("after the demo: status exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range strings.Split(strings.TrimSpace(ok(t, dir, "export")), "\n") {
		if strings.Contains(l, `"status":"running"`) {
			t.Errorf("a loop still running after the demo stopped: %s", l)
		}
	}
}

// TestDemoInterruptDashboard: Ctrl-C in the dashboard under a real
// terminal stops the demo and its daemon, restores the terminal, prints the
// summary so far and exits 130.
func TestDemoInterruptDashboard(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	dir := t.TempDir()
	script := fmt.Sprintf("cd %q && %q demo --dir %q; echo DEMO-EXITED $?; sleep 30", dir, bin, dir)
	tm.run("new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", "-e", "NO_COLOR=1", "-e", "LOOPR_HOME=", "sh", "-c", script)
	tm.waitScreenWithin(time.Minute, "the demo's dashboard", "Observability")
	tm.keys("C-c")
	after := tm.waitScreen("exit", "DEMO-EXITED 130")
	for _, want := range []string{"interrupted after", "The summary so far", "TYPE"} {
		if !strings.Contains(after, want) {
			t.Errorf("screen after Ctrl-C lacks %q:\n%s", want, after)
		}
	}
	if strings.Contains(after, "j/k move") {
		t.Errorf("terminal not restored after Ctrl-C:\n%s", after)
	}
	checkDemoDaemonGone(t, dir)
	if took := regexp.MustCompile(`interrupted after ([0-9.]+)s`).FindStringSubmatch(after); took == nil {
		t.Errorf("no duration in:\n%s", after)
	}
	if _, err := os.Stat(filepath.Join(dir, ".loopr", "loopr.sock")); err == nil {
		t.Error("the demo's socket is still there")
	}
}

// lockedBuffer is an output buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDemoFinishedInIsTheRun: "finished in" is the run's duration, not the
// time spent browsing the dashboard after the run ended.
func TestDemoFinishedInIsTheRun(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	dir := t.TempDir()
	script := fmt.Sprintf("cd %q && %q demo --speed 0 --dir %q; echo DEMO-EXITED $?; sleep 30", dir, bin, dir)
	start := time.Now()
	tm.run("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", "-e", "NO_COLOR=1", "-e", "LOOPR_HOME=", "sh", "-c", script)
	tm.waitScreenWithin(time.Minute, "the end of the run", "press q for the summary")
	done := time.Since(start)
	const browsing = 5 * time.Second
	time.Sleep(browsing)
	tm.keys("q")
	after := tm.waitScreen("the summary", "DEMO-EXITED 0", "finished in")
	m := regexp.MustCompile(`finished in ([0-9.]+)(ms|s)`).FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("no duration in:\n%s", after)
	}
	took, err := time.ParseDuration(m[1] + m[2])
	if err != nil {
		t.Fatal(err)
	}
	// The demo notes the end from its own event stream, the dashboard from
	// its own: on a loaded machine the hint can show a moment before the
	// demo's watcher has seen the last event. Counting the browsing would
	// add all of it.
	const slack = 2 * time.Second
	if took > done+slack {
		t.Errorf("finished in %s, but the run was over %s after the start (the %s of browsing counted)", took, done.Round(100*time.Millisecond), browsing)
	}
}

// waitScreenWithin is waitScreen with its own timeout, for runs longer
// than a screen update.
func (tm *tmux) waitScreenWithin(d time.Duration, what string, want ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(d)
	for {
		s := tm.screen()
		missing := ""
		for _, w := range want {
			if !strings.Contains(s, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("%s: screen lacks %q after %s:\n%s", what, missing, d, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
