package e2e

// Issue 10, items 6–8: a damaged store has a way back (store check and
// repair), cancel reaches below a finished loop, and agents' text cannot
// drive the user's terminal.

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// TestCancelCompletePlanStopsItsChildren: `loopr cancel` on a plan that is
// already complete while its children run cancels every live loop below
// it and stops their agents; the plan itself stays complete.
func TestCancelCompletePlanStopsItsChildren(t *testing.T) {
	t.Parallel()
	marks := t.TempDir()
	// Each agent records its pid, then works for a minute.
	agent := fmt.Sprintf(`echo $$ > %s/$LOOPR_LOOP_ID.pid; exec sleep 60`, marks)
	cmd, _ := json.Marshal([]string{"sh", "-c", agent})
	r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
agent:
  command: %s
  timeout_secs: 120
loops:
  ralph: {max_iterations: 3, validate: []}
storage:
  disk_quota_min_gb: 0
`, cmd))
	now := time.Now().UTC().Format(time.RFC3339)
	var lines []string
	for _, l := range []string{
		`{"id":"plan1","type":"plan","status":"complete","iteration":1,"max_iterations":10,"created_at":"%[1]s","updated_at":"%[1]s","title":"Done plan"}`,
		`{"id":"spec1","type":"spec","status":"complete","parent":"plan1","depth":1,"iteration":1,"max_iterations":10,"created_at":"%[1]s","updated_at":"%[1]s","title":"Done spec"}`,
		`{"id":"task1","type":"ralph","status":"pending","parent":"spec1","depth":2,"iteration":1,"max_iterations":3,"created_at":"%[1]s","updated_at":"%[1]s","title":"Task one"}`,
		`{"id":"task2","type":"ralph","status":"pending","parent":"spec1","depth":2,"iteration":1,"max_iterations":3,"created_at":"%[1]s","updated_at":"%[1]s","title":"Task two"}`,
		`{"id":"task3","type":"ralph","status":"complete","parent":"plan1","depth":1,"iteration":1,"max_iterations":3,"created_at":"%[1]s","updated_at":"%[1]s","title":"Task done"}`,
	} {
		lines = append(lines, fmt.Sprintf(l, now))
	}
	seed := filepath.Join(t.TempDir(), "seed.jsonl")
	if err := os.WriteFile(seed, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, r.dir, "import", seed)
	startDaemon(t, r)

	pids := map[string]int{}
	waitFor(t, 20*time.Second, "both children's agents to run", func() bool {
		for _, id := range []string{"task1", "task2"} {
			b, err := os.ReadFile(filepath.Join(marks, id+".pid"))
			if err != nil {
				return false
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return false
			}
			pids[id] = pid
		}
		return true
	})

	out := ok(t, r.dir, "cancel", "plan1")
	if !strings.Contains(out, `cancel plan plan1 "Done plan": stays complete; cancelled 2 loops below it:`) {
		t.Errorf("cancel output = %q, want the plan still complete and 2 others changed", out)
	}
	if l := show(t, r, "plan1"); l.Status != loop.Complete {
		t.Errorf("plan1 is %s after cancel, want complete", l.Status)
	}
	for _, id := range []string{"spec1", "task3"} {
		if l := show(t, r, id); l.Status != loop.Complete {
			t.Errorf("%s is %s, want complete (finished loops keep their status)", id, l.Status)
		}
	}
	for _, id := range []string{"task1", "task2"} {
		if l := show(t, r, id); l.Status != loop.Cancelled || !strings.Contains(l.Reason, "ancestor plan1 cancelled") {
			t.Errorf("%s: status %s reason %q, want cancelled by its ancestor", id, l.Status, l.Reason)
		}
	}
	waitFor(t, 10*time.Second, "the children's agents to be gone", func() bool {
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				return false
			}
		}
		return true
	})

	// Nothing live below it any more: a second cancel is refused, naming why.
	res := run(t, r.dir, "", "cancel", "plan1")
	if res.code == 0 || !strings.Contains(res.stderr, "complete") {
		t.Errorf("second cancel: exit %d stderr %q, want a refusal", res.code, res.stderr)
	}
}

// TestAgentTextIsEscapedOnTheTerminal: a title and task carrying OSC 52
// (set the clipboard), a window-title change and a screen clear are shown
// escaped by list and show; --json keeps them verbatim.
func TestAgentTextIsEscapedOnTheTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const title = "Evil \x1b]52;c;cm0gLXJmIH4=\a\x1b[2J\x1b]0;pwned\a title"
	const shown = `Evil \x1b]52;c;cm0gLXJmIH4=\a\x1b[2J\x1b]0;pwned\a title`
	var created struct{ ID string }
	mustJSON(t, ok(t, dir, "add", "--type", "ralph", "--title", title, "--task", "line one\n\x1b[2Jline two", "--json"), &created)
	if created.ID == "" {
		t.Fatal("add --json gave no id")
	}

	for _, args := range [][]string{{"list"}, {"show", created.ID}} {
		out := ok(t, dir, args...)
		if strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("loopr %s printed a raw escape or bell: %q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, shown) {
			t.Errorf("loopr %s lacks the escaped title %q:\n%s", strings.Join(args, " "), shown, out)
		}
	}
	if out := ok(t, dir, "show", created.ID); !strings.Contains(out, "line one\n  \\x1b[2Jline two") {
		t.Errorf("show: task not escaped line by line:\n%s", out)
	}

	var got []loop.Loop
	mustJSON(t, ok(t, dir, "list", "--json"), &got)
	if len(got) != 1 || got[0].Title != title {
		t.Errorf("list --json title = %q, want the verbatim %q", got[0].Title, title)
	}
	var one loop.Loop
	mustJSON(t, ok(t, dir, "show", created.ID, "--json"), &one)
	if one.Title != title || one.Task != "line one\n\x1b[2Jline two" {
		t.Errorf("show --json changed the text: title %q task %q", one.Title, one.Task)
	}
}
