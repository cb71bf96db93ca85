package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// TestRedactionEverywhere (issue 24): an agent prints secrets every way
// it can — a GitHub token and an AWS key id (token shapes loopr always
// knows) and the value of a profile secret (secrets: PLANTED, read from
// the daemon's environment) — in the middle of a long line, split across
// two writes a moment apart, in a failing validate command's output (so
// it reaches the feedback) and in its question. None of the raw values is
// then in any file of the home (the store, agent.log, validation logs,
// prompts), the daemon's log, a webhook body, `loopr events`, `loopr show`
// or `loopr logs`; agent.log carries the marks instead. The agent's
// worktree is its own and is not looked at (docs/security.md).
func TestRedactionEverywhere(t *testing.T) {
	t.Parallel()
	var (
		ghToken = "ghp_" + strings.Repeat("R", 18) + strings.Repeat("7", 18)
		awsKey  = "AKIA" + strings.Repeat("Z", 8) + strings.Repeat("3", 8)
		planted = "e2e-planted-" + strings.Repeat("s3cr3t", 6)
	)
	var mu sync.Mutex
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)

	// The agent and the validate command live outside the workspace; so
	// does the file through which the agent hands the validate command
	// what it prints (its worktree is not scanned).
	aside := t.TempDir()
	leak := filepath.Join(aside, "leak")
	script := filepath.Join(aside, "agent.sh")
	// $PLANTED is the profile secret once the daemon hands it to the agent
	// (secrets:); the fallback keeps the value printed where it does not.
	body := fmt.Sprintf(`set -e
S="${PLANTED:-$E2E_PLANTED_SECRET}"
half=$(printf %%s "$S" | cut -c1-10)
rest=$(printf %%s "$S" | cut -c11-)
if [ "$LOOPR_ITERATION" = 1 ]; then
	head -c 70000 /dev/zero | tr '\0' a; printf ' %%s %%s %%s ' %[1]s %[2]s "$S"; head -c 70000 /dev/zero | tr '\0' b; echo
	printf 'split: %%s' "$half"; sleep 0.5; printf '%%s :end\n' "$rest"
	echo "token $S" > %[3]s
	exit 0
fi
printf 'asking\n'
printf 'Which key: %%s or %%s or %%s?\n' %[1]s %[2]s "$S" > "$LOOPR_QUESTION_FILE"
`, ghToken, awsKey, leak)
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	agent, _ := json.Marshal([]string{"sh", script})
	validate, _ := json.Marshal([]string{"cat " + leak + "; exit 1"})
	r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  preset: command
  command: %s
  timeout_secs: 30
  secrets:
    PLANTED: {env: E2E_PLANTED_SECRET}
loops:
  ralph: {max_iterations: 5, validate: %s}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
webhooks:
  - url: %s
    events: [created, running, failed, needs_human]
`, agent, validate, hook.URL))
	d := startDaemonEnv(t, r, "E2E_PLANTED_SECRET="+planted)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "leak test", "--task", "print the secrets", "--json"), &l)
	waitFor(t, 60*time.Second, "the loop to ask its question", func() bool {
		return show(t, r, l.ID).Status == loop.NeedsHuman
	})
	waitFor(t, 20*time.Second, "the needs_human webhook", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) > 0 && strings.Contains(bodies[len(bodies)-1], `"needs_human"`)
	})
	got := show(t, r, l.ID)
	if got.Needs == nil || !strings.Contains(got.Needs.Detail, "Which key: [redacted github_token] or [redacted aws_access_key]") {
		t.Errorf("needs = %+v, want the question with the token marks", got.Needs)
	}

	sinks := map[string]string{
		"loopr events --json": ok(t, r.dir, "events", "--json"),
		"loopr show --json":   ok(t, r.dir, "show", l.ID, "--json"),
		"loopr logs 1":        ok(t, r.dir, "logs", l.ID, "--iteration", "1"),
	}
	mu.Lock()
	sinks["webhook bodies"] = strings.Join(bodies, "\n")
	mu.Unlock()
	agentLog := iterFile(r, l.ID, 1, "agent.log")
	if !strings.Contains(agentLog, " [redacted github_token] [redacted aws_access_key] ") || !strings.Contains(agentLog, "split: ") {
		t.Errorf("agent.log lacks the token marks: %s", clipLines(agentLog))
	}
	if !strings.Contains(iterFile(r, l.ID, 1, "validation.log"), "token ") {
		t.Errorf("validation.log lacks the validate output")
	}
	d.stop()
	sinks["daemon log"] = d.output()
	// Everything under the home: the store, every iteration's files, the
	// journal; the worktrees are the agent's own.
	filepath.WalkDir(r.home, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() && e.Name() == "worktrees" {
			return filepath.SkipDir
		}
		if e.Type().IsRegular() {
			b, _ := os.ReadFile(path)
			sinks[path] = string(b)
		}
		return nil
	})
	for where, text := range sinks {
		for _, raw := range []string{ghToken, awsKey} {
			if n := strings.Count(text, raw); n > 0 {
				t.Errorf("%s holds a token shape %d times", where, n)
			}
		}
	}

	// The profile secret: redacted once the daemon reads secrets: and adds
	// them to its redactor (the environment part of issue 24).
	if !strings.Contains(agentLog, "split: [redacted PLANTED] :end") || !strings.Contains(agentLog, "[redacted github_token] [redacted aws_access_key] [redacted PLANTED] ") {
		t.Errorf("agent.log lacks [redacted PLANTED] where the secret was printed: %s", clipLines(agentLog))
	}
	for where, text := range sinks {
		if n := strings.Count(text, planted); n > 0 {
			t.Errorf("%s holds the profile secret PLANTED %d times", where, n)
		}
	}
}

// clipLines is s with each line longer than 160 bytes cut in its middle,
// for a failure message about a log of very long lines.
func clipLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) > 160 {
			lines[i] = l[:80] + " … " + l[len(l)-80:]
		}
	}
	return strings.Join(lines, "\n")
}
