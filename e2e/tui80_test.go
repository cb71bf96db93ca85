package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallAgent plans eight specs (longer than a 24-line screen), keeps spec
// loops busy, and finishes ralph loops at once (their validation fails).
const smallAgent = `#!/bin/sh
cat >/dev/null
case "$LOOPR_LOOP_TYPE" in
plan)
	{
		printf '# Plan: Billing\n\nCharge customers monthly.\n\n## Specs\n\n'
		for i in 1 2 3 4 5 6 7 8; do printf '### Spec %s: Part %s\n\nBuild part %s of billing.\n\n' $i $i $i; done
		printf 'END OF PLAN\n'
	} >"$LOOPR_ARTIFACT"
	;;
spec) exec sleep 600 ;;
*) echo "changed the users table" ;;
esac
`

// TestTUI80x24 drives `loopr tui` in a real 80×24 terminal against a real
// daemon: a failed task's details show its whole failure reason and its
// latest feedback; v shows the plan awaiting approval, scrollable to its
// end; a asks before approving, and the status line names the specs the
// approval created.
func TestTUI80x24(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(agent, []byte(smallAgent), 0o755); err != nil {
		t.Fatal(err)
	}
	const check = "echo missing the unique index on users.email >&2; exit 1"
	cfg := fmt.Sprintf("agent:\n  command: [%q]\nloops:\n  ralph: {validate: [%q]}\n"+
		"storage: {disk_quota_min_gb: 0}\ngit: {worktrees: false}\nretry: {backoff_base_secs: 0}\n", agent, check)
	if err := os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "daemon", "--detach")
	t.Cleanup(func() { stopDaemon(t, dir) })
	ok(t, dir, "plan", "Add billing")
	ok(t, dir, "add", "--type", "ralph", "--task", "Fix the users table", "--max-iterations", "1")

	script := fmt.Sprintf("cd %q && %q tui --no-start; echo TUI-EXITED $?; sleep 30", dir, bin)
	tm.run("new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", "-e", "NO_COLOR=1", "-e", "LOOPR_HOME=", "sh", "-c", script)
	screen := tm.waitScreen("tree", "Add billing", "awaiting", "Fix the users", "failed", "? help", "q quit")
	for i, l := range strings.Split(screen, "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("line %d wider than 80: %q", i, l)
		}
	}

	// The failed task's details: the whole reason, the latest feedback.
	tm.keys("G")
	tm.keys("Enter")
	details := tm.waitScreen("details", "DETAILS", "reason", "last feedback")
	reason := show(t, repo{dir: dir}, loopID(t, dir, "ralph")).Reason
	if !strings.Contains(strings.Join(strings.Fields(details), " "), strings.Join(strings.Fields(reason), " ")) {
		t.Errorf("details at 80×24 lack the whole reason %q:\n%s", reason, details)
	}
	if !strings.Contains(details, "missing the unique index") {
		t.Errorf("details lack the feedback's log line:\n%s", details)
	}
	tm.keys("Escape")
	tm.waitGone("details closed", "DETAILS") // a key right after ESC reads as alt+key

	// The plan's artifact, scrolled to its end.
	tm.keys("g")
	tm.keys("v")
	tm.waitScreen("artifact view", "ARTIFACT", "# Plan: Billing", "### Spec 1: Part 1", "a approve")
	tm.keys("G")
	tm.waitScreen("artifact end", "END OF PLAN")

	// a asks; y approves; the message names the specs.
	tm.keys("a")
	tm.waitScreen("approve question", `approve plan "Add billing"?`, "y/n")
	tm.keys("y")
	tm.waitScreen("approved", `approved plan "Add billing"; created 8 specs: "Part 1", "Part 2"`)
	if specs := strings.Count(ok(t, dir, "list", "--type", "spec"), "Part "); specs != 8 {
		t.Errorf("the daemon has %d specs after the approval, want 8", specs)
	}

	tm.keys("q")
	tm.waitScreen("exit", "TUI-EXITED 0")
}

// loopID returns the id of the only loop of type typ in dir.
func loopID(t *testing.T, dir, typ string) string {
	t.Helper()
	out := strings.Fields(ok(t, dir, "list", "--type", typ))
	for i, f := range out {
		if f == typ && i > 0 {
			return out[i-1]
		}
	}
	t.Fatalf("no %s loop in:\n%s", typ, out)
	return ""
}
