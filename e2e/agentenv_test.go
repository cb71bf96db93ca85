package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// planted are credentials a user typically has exported where the daemon
// starts: none may reach an agent, a validate command or a hook unless
// loopr.yml names it. OPENAI_API_KEY is the codex preset's, not claude's.
var planted = []string{
	"GITHUB_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "OPENAI_API_KEY",
	"NPM_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS", "SLACK_BOT_TOKEN", "DATABASE_URL", "HTTPS_PROXY",
}

// envConfig is a loopr.yml whose claude profile runs the shell script
// agent, with env:, env_pass and secrets:, and whose ralph validate and
// before_run hook write their environment to $LOOPR_E2E_OUT.
func envConfig(agent string) string {
	cmd, _ := json.Marshal([]string{"sh", agent})
	return fmt.Sprintf(`%s
agent:
  preset: claude
  command: %s
  timeout_secs: 60
  env: {PROJECT_MODE: from-profile-env}
  env_pass: [E2E_PASSED]
  secrets:
    GH_TOKEN: {file: .secrets/gh}
    DEPLOY_KEY: {env: E2E_DEPLOY_SRC}
loops:
  ralph: {max_iterations: 2, validate: ['env > "$LOOPR_E2E_OUT/validate-env.txt"']}
hooks:
  before_run: {run: ['env > "$LOOPR_E2E_OUT/hook-env.txt"']}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, fastRetries, cmd)
}

// envAgent prints its environment (agent.log), writes it where the test
// reads it back, and makes the change a ralph task needs.
const envAgent = `env
env > "$LOOPR_E2E_OUT/agent-env.txt"
echo done > done.txt
`

// TestAgentEnvIsAllowlisted: an agent that prints env sees none of 10
// credentials planted in the daemon's environment (nor does agent.log
// hold them), but sees the profile's env:, env_pass, its preset's own
// variables and both its secrets (one from a file, one from the daemon's
// environment), as values it can use. The ralph validate and a hook see
// the same allowlist and env:, without the agent's secrets and preset
// variables.
func TestAgentEnvIsAllowlisted(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	r := newRepo(t, envConfig(writeScript(t, "envagent.sh", envAgent)))
	if err := os.MkdirAll(filepath.Join(r.dir, ".secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	const ghValue, deployValue = "gh-from-file-3b7a91", "deploy-from-env-c40e2f"
	if err := os.WriteFile(filepath.Join(r.dir, ".secrets", "gh"), []byte(ghValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"LOOPR_E2E_OUT=" + out, "E2E_PASSED=passed-by-env-pass", "E2E_DEPLOY_SRC=" + deployValue,
		"ANTHROPIC_BASE_URL=http://127.0.0.1:9", "GH_TOKEN=planted-daemon-gh-token"}
	for _, name := range planted {
		env = append(env, name+"="+plantedValue(name))
	}
	d := startDaemonEnv(t, r, env...)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Print the environment", "--json"), &l)
	waitEvery(t, 90*time.Second, slowPoll, "the loop to finish", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		l = show(t, r, l.ID)
		return l.Status.Terminal()
	})
	if l.Status != loop.Complete {
		t.Fatalf("loop %s is %s (%s); want complete", l.ID, l.Status, l.Reason)
	}
	agentLog := readFile(t, filepath.Join(r.home, "loops", l.ID, "iterations", "001", "agent.log"))
	seen := map[string]map[string]string{}
	for _, who := range []string{"agent", "validate", "hook"} {
		seen[who] = parseEnv(readFile(t, filepath.Join(out, who+"-env.txt")))
	}
	for _, name := range planted {
		if strings.Contains(agentLog, plantedValue(name)) || strings.Contains(agentLog, name+"=") {
			t.Errorf("agent.log holds the daemon's %s", name)
		}
		for who, got := range seen {
			if v, ok := got[name]; ok {
				t.Errorf("the %s got the daemon's %s=%s", who, name, v)
			}
		}
	}
	want := map[string]string{"PROJECT_MODE": "from-profile-env", "E2E_PASSED": "passed-by-env-pass", "LOOPR_LOOP_ID": l.ID}
	for who, got := range seen {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("the %s's %s = %q, want %q", who, k, got[k], v)
			}
		}
		if got["PATH"] == "" || got["HOME"] == "" {
			t.Errorf("the %s has no PATH or HOME: %v", who, got)
		}
		if _, ok := got["E2E_DEPLOY_SRC"]; ok {
			t.Errorf("the %s got E2E_DEPLOY_SRC, the secret's source, which nothing passes", who)
		}
	}
	agent := seen["agent"]
	for k, v := range map[string]string{"GH_TOKEN": ghValue, "DEPLOY_KEY": deployValue, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAUDE_CODE_MAX_RETRIES": "0"} {
		if agent[k] != v {
			t.Errorf("the agent's %s = %q, want %q (its secrets and its preset's own)", k, agent[k], v)
		}
	}
	for _, who := range []string{"validate", "hook"} {
		for _, k := range []string{"GH_TOKEN", "DEPLOY_KEY", "ANTHROPIC_BASE_URL"} {
			if v, ok := seen[who][k]; ok {
				t.Errorf("the %s got the agent's %s=%s", who, k, v)
			}
		}
	}
}

func plantedValue(name string) string { return "planted-" + strings.ToLower(name) + "-9d2e" }

// parseEnv reads `env` output: one NAME=value a line (a multi-line value's
// continuation lines are dropped).
func parseEnv(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k != "" && !strings.ContainsAny(k, " \t") {
			m[k] = v
		}
	}
	return m
}

// TestSecretFIFOSpendsNoIteration: a secret file a repository made a FIFO
// stops the agent's start with an error naming the secret, spends no
// iteration and does not hang the daemon; once the file is a regular one
// (rotated), the next start reads it and the loop completes.
func TestSecretFIFOSpendsNoIteration(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	r := newRepo(t, envConfig(writeScript(t, "envagent.sh", envAgent)))
	secret := filepath.Join(r.dir, ".secrets", "gh")
	if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemonEnv(t, r, "LOOPR_E2E_OUT="+out, "E2E_DEPLOY_SRC=deploy-value-1")
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Print the environment", "--json"), &l)
	want := "could not start the agent (2 in a row, no iteration spent): agent.secrets.GH_TOKEN: " + secret + " is a named pipe (FIFO), not a regular file"
	waitEvery(t, 90*time.Second, slowPoll, "two refused starts", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		if got := show(t, r, l.ID); got.Iteration != 1 || got.Status.Terminal() || got.Status == loop.NeedsHuman {
			t.Fatalf("the loop is %s at iteration %d (%s); want iteration 1, waiting", got.Status, got.Iteration, got.Reason)
		}
		status(t, r) // the daemon answers: nothing waits on the FIFO
		return strings.Contains(ok(t, r.dir, "events", l.ID), want)
	})
	if _, err := os.Stat(filepath.Join(out, "agent-env.txt")); err == nil {
		t.Error("the agent ran without its secret")
	}
	// why says what holds it, not only when it tries again. It is asked
	// until it does: a start being tried again at that moment shows the
	// loop running for as long as the setup takes.
	wantWhy, lastWhy := "could not start the agent: agent.secrets.GH_TOKEN: "+secret+" is a named pipe", ""
	deadline := time.Now().Add(60 * time.Second)
	for lastWhy = ok(t, r.dir, "why", l.ID); !strings.Contains(lastWhy, wantWhy) && time.Now().Before(deadline); lastWhy = ok(t, r.dir, "why", l.ID) {
		time.Sleep(slowPoll())
	}
	if !strings.Contains(lastWhy, wantWhy) {
		t.Errorf("loopr why does not say why the agent cannot start (want %q):\n%s", wantWhy, lastWhy)
	}
	if err := os.Remove(secret); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("rotated-gh-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitEvery(t, 90*time.Second, slowPoll, "the loop to run once its secret reads", func() bool {
		l = show(t, r, l.ID)
		return l.Status.Terminal()
	})
	if l.Status != loop.Complete || l.Iteration != 1 {
		t.Errorf("once the secret could be read: %s at iteration %d (%s); want complete at iteration 1", l.Status, l.Iteration, l.Reason)
	}
	if got := parseEnv(readFile(t, filepath.Join(out, "agent-env.txt")))["GH_TOKEN"]; got != "rotated-gh-token" {
		t.Errorf("the agent's GH_TOKEN = %q, want the file's new content", got)
	}
}
