package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fakechat"
	"github.com/loopr-dev/loopr/loop"
)

// The real opencode CLI (npm opencode-ai, installed by .ci/run) driven by
// loopr with the opencode preset against internal/fakechat, an
// @ai-sdk/openai-compatible provider, offline in a network namespace like
// TestClaudeCode. Skipped only when no opencode binary is found outside CI.

// opencodeUsage is what each answer of the fake API reports.
var opencodeUsage = fakechat.Usage{PromptTokens: 1500, CachedTokens: 300, CompletionTokens: 40}

// TestOpenCodeCLI: a tree completes with the opencode preset and the real
// CLI, the artifacts written with its write tool outside the worktree
// (the external_directory permission), tokens on every loop; a 429 with a
// retry-after of 30 s, which the CLI would wait out silently, is stopped
// by retry_timeout_secs and recorded as a limit within seconds, spending
// no iteration; the task whose answer talks about HTTP 429 passes.
func TestOpenCodeCLI(t *testing.T) {
	opencode := agentCLI(t, "opencode", "LOOPR_E2E_OPENCODE", "opencode-ai", "1.18.33")
	if inNetns(t) {
		return
	}
	logVersion(t, opencode)

	var mu sync.Mutex
	var first, until time.Time
	api := &fakechat.Server{Script: func(r *fakechat.Request) fakechat.Reply {
		prompt := r.Prompt()
		m := loopTypeRe.FindStringSubmatch(prompt)
		if m == nil || !r.HasTool("bash") {
			// The session title, from the small model.
			return fakechat.Reply{Text: "Rate limiter", Usage: fakechat.Usage{PromptTokens: 20, CompletionTokens: 3}}
		}
		typ := m[1]
		mu.Lock()
		if typ == "spec" && first.IsZero() {
			first, until = r.Received, r.Received.Add(5*time.Second)
		}
		limited := typ == "spec" && r.Received.Before(until)
		mu.Unlock()
		if limited {
			return fakechat.RateLimited(30 * time.Second)
		}
		switch step := nextTurn(prompt, typ, r.Turn()); {
		case step.command != "":
			return fakechat.Reply{Tool: "bash", Args: map[string]any{"command": step.command, "description": "write the limiter"}, Usage: opencodeUsage}
		case step.path != "":
			return fakechat.Reply{Tool: "write", Args: map[string]any{"filePath": step.path, "content": step.content}, Usage: opencodeUsage}
		default:
			return fakechat.Reply{Text: step.text, Usage: opencodeUsage}
		}
	}}
	addr := serveAPI(t, api)

	// opencode reads its provider from $XDG_CONFIG_HOME/opencode: the fake
	// API as an OpenAI-compatible provider, its one model the default.
	home := t.TempDir()
	cfgDir := filepath.Join(home, ".config", "opencode")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"$schema": "https://opencode.ai/config.json",
  "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
    "options": {"baseURL": "http://` + addr + `/v1", "apiKey": "test-key"},
    "models": {"fake-model": {"name": "Fake model"}}}},
  "model": "fake/fake-model", "small_model": "fake/fake-model", "autoupdate": false, "share": "disabled"}`
	if err := os.WriteFile(filepath.Join(cfgDir, "opencode.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"HOME": home, "TMPDIR": t.TempDir(), "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_DATA_HOME": filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME": filepath.Join(home, ".cache"),
		"XDG_STATE_HOME": filepath.Join(home, ".local", "state"), "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
		"PATH": filepath.Dir(opencode) + string(os.PathListSeparator) + os.Getenv("PATH"),
	} {
		t.Setenv(k, v)
	}
	r := newRepo(t, withRetryTimeout(strings.Replace(agentTreeConfig, "preset: claude", "preset: opencode", 1), "2"))
	d := startDaemon(t, r)
	loops := runAgentTree(t, r, d)
	checkAgentTree(t, r, loops, loop.Usage{InputTokens: opencodeUsage.PromptTokens - opencodeUsage.CachedTokens,
		OutputTokens: opencodeUsage.CompletionTokens, CacheReadTokens: opencodeUsage.CachedTokens}, false)
	mu.Lock()
	f := first
	mu.Unlock()
	if f.IsZero() {
		t.Fatal("the fake API never refused a call")
	}
	s := stopCleanly(t, r, d)
	spec := checkLimitSeen(t, "opencode (retry-after 30 s)", loops, s, loop.Spec, f)
	if log := iterFile(r, string(spec.ID), 1, "attempt-1/agent.log"); !strings.Contains(log, `message="stream error"`) || !strings.Contains(log, "Rate limit reached") {
		t.Errorf("spec attempt-1/agent.log lacks opencode's stream error:\n%s", tail(log, 5))
	}
}
