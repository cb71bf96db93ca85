package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeresponses"
	"github.com/loopr-dev/loopr/loop"
)

// The real Codex CLI (npm @openai/codex, installed by .ci/run) driven by
// loopr with the codex preset against internal/fakeresponses, offline in a
// network namespace like TestClaudeCode. Skipped only when no codex binary
// is found outside CI.

// codexUsage is what each answer of the fake Responses API reports.
var codexUsage = fakeresponses.Usage{InputTokens: 2000, CachedTokens: 500, OutputTokens: 60}

// TestCodexCLI: a tree completes with the codex preset and the real CLI,
// tokens on every loop; a ChatGPT plan's usage limit is recorded within
// seconds and waited out without spending an iteration; the task whose
// answer talks about HTTP 429 passes.
func TestCodexCLI(t *testing.T) {
	codex := agentCLI(t, "codex", "LOOPR_E2E_CODEX", "@openai/codex", "0.171.0")
	if inNetns(t) {
		return
	}
	logVersion(t, codex)

	var mu sync.Mutex
	var first, reset time.Time
	api := &fakeresponses.Server{Script: func(r *fakeresponses.Request) fakeresponses.Reply {
		prompt := r.Prompt()
		m := loopTypeRe.FindStringSubmatch(prompt)
		if m == nil {
			return fakeresponses.Reply{Text: "ok", Usage: codexUsage}
		}
		typ := m[1]
		mu.Lock()
		if typ == "spec" && first.IsZero() {
			// The plan's usage limit, for 8 seconds.
			first, reset = r.Received, r.Received.Add(8*time.Second)
		}
		limited := !first.IsZero() && r.Received.Before(reset)
		mu.Unlock()
		if limited {
			return fakeresponses.UsageLimit(reset, r.Received)
		}
		if r.Turn() > 0 {
			if typ == "task" {
				return fakeresponses.Reply{Text: passingAnswer, Usage: codexUsage}
			}
			return fakeresponses.Reply{Text: "Wrote the " + typ + ".", Usage: codexUsage}
		}
		if typ == "task" {
			return fakeresponses.Reply{Command: "printf 'token bucket\\n' > limiter.txt", Usage: codexUsage}
		}
		return fakeresponses.Reply{Command: "cat > \"$LOOPR_ARTIFACT\" <<'EOF'\n" + claudeArtifacts[typ] + "EOF", Usage: codexUsage}
	}}
	addr := serveAPI(t, api)

	codexEnv(t, codex, addr)
	r := newRepo(t, strings.Replace(agentTreeConfig, "preset: claude", "preset: codex", 1))
	d := startDaemon(t, r)
	loops := runAgentTree(t, r, d)
	checkAgentTree(t, r, loops, loop.Usage{InputTokens: codexUsage.InputTokens - codexUsage.CachedTokens,
		OutputTokens: codexUsage.OutputTokens, CacheReadTokens: codexUsage.CachedTokens}, false)
	mu.Lock()
	f := first
	mu.Unlock()
	if f.IsZero() {
		t.Fatal("the fake API never refused a call")
	}
	s := stopCleanly(t, r, d)
	limited := checkLimitSeen(t, "codex", loops, s, loop.Spec, f)
	if log := iterFile(r, string(limited.ID), 1, "attempt-1/agent.log"); !strings.Contains(log, "hit your usage limit") || !strings.Contains(log, `"turn.failed"`) {
		t.Errorf("spec attempt-1/agent.log lacks codex's usage limit:\n%s", tail(log, 5))
	}
}

// codexEnv points codex at the fake API at addr: $CODEX_HOME/config.toml
// names it as the provider, with no retries of its own (loopr waits).
func codexEnv(t *testing.T, codex, addr string) {
	t.Helper()
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `model = "gpt-5-codex"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = "http://` + addr + `/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"HOME": home, "CODEX_HOME": codexHome, "OPENAI_API_KEY": "test-key",
		"PATH": filepath.Dir(codex) + string(os.PathListSeparator) + os.Getenv("PATH"),
	} {
		t.Setenv(k, v)
	}
}
