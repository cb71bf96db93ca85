package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fakegemini"
	"github.com/loopr-dev/loopr/loop"
)

// The real Gemini CLI (npm @google/gemini-cli, installed by .ci/run)
// driven by loopr with the gemini preset against internal/fakegemini,
// offline in a network namespace like TestClaudeCode. Skipped only when no
// gemini binary is found outside CI.

// geminiUsage is what each answer of the fake Gemini API reports.
var geminiUsage = fakegemini.Usage{PromptTokens: 1200, CachedTokens: 300, OutputTokens: 40}

// withRetryTimeout sets the agent profile's retry_timeout_secs in a tree
// configuration.
func withRetryTimeout(cfg string, secs string) string {
	return strings.Replace(cfg, "  timeout_secs: 120\n", "  timeout_secs: 120\n  retry_timeout_secs: "+secs+"\n", 1)
}

// TestGeminiCLI: a tree completes with the gemini preset and the real CLI
// in loopr's worktrees (untrusted folders), the artifacts written with its
// write_file tool outside the workspace, tokens on every loop; a quota
// 429 the CLI would wait out itself is stopped by retry_timeout_secs and
// waited out by loopr, a daily quota (the CLI gives up at once) is a limit
// too, neither spending an iteration; the task whose answer talks about
// HTTP 429 passes.
func TestGeminiCLI(t *testing.T) {
	gemini := agentCLI(t, "gemini", "LOOPR_E2E_GEMINI", "@google/gemini-cli", "0.61.0")
	if inNetns(t) {
		return
	}
	logVersion(t, gemini)

	var mu sync.Mutex
	var specFirst, specUntil, phaseFirst, phaseUntil time.Time
	api := &fakegemini.Server{Script: func(r *fakegemini.Request) fakegemini.Reply {
		prompt := r.Prompt()
		m := loopTypeRe.FindStringSubmatch(prompt)
		if m == nil || !r.HasTool("write_file") {
			return fakegemini.Reply{Text: "ok", Usage: fakegemini.Usage{PromptTokens: 20, OutputTokens: 3}}
		}
		typ := m[1]
		mu.Lock()
		switch {
		case typ == "spec" && specFirst.IsZero():
			// A per-minute quota for 6 s, with a retryDelay of 5 s: the
			// CLI would retry it ten times by itself.
			specFirst, specUntil = r.Received, r.Received.Add(6*time.Second)
		case typ == "phase" && phaseFirst.IsZero():
			// A daily quota for 3 s: the CLI gives up at once.
			phaseFirst, phaseUntil = r.Received, r.Received.Add(3*time.Second)
		}
		specLimited := typ == "spec" && r.Received.Before(specUntil)
		phaseLimited := typ == "phase" && r.Received.Before(phaseUntil)
		mu.Unlock()
		switch {
		case specLimited:
			return fakegemini.QuotaExceeded(5 * time.Second)
		case phaseLimited:
			return fakegemini.DailyQuota()
		}
		switch step := nextTurn(prompt, typ, r.Turn()); {
		case step.command != "":
			return fakegemini.Reply{Call: "run_shell_command", Args: map[string]any{"command": step.command, "description": "write the limiter"}, Usage: geminiUsage}
		case step.path != "":
			return fakegemini.Reply{Call: "write_file", Args: map[string]any{"file_path": step.path, "content": step.content}, Usage: geminiUsage}
		default:
			return fakegemini.Reply{Text: step.text, Usage: geminiUsage}
		}
	}}
	addr := serveAPI(t, api)

	// The CLI's settings: an API key (GEMINI_API_KEY) on the fake API, no
	// usage statistics. Nothing trusts the worktrees: the preset does.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}`
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"HOME": home, "TMPDIR": t.TempDir(), "GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": "http://" + addr,
		"GEMINI_CLI_TRUST_WORKSPACE": "", "PATH": filepath.Dir(gemini) + string(os.PathListSeparator) + os.Getenv("PATH"),
	} {
		t.Setenv(k, v)
	}
	r := newRepo(t, withRetryTimeout(strings.Replace(agentTreeConfig, "preset: claude", "preset: gemini", 1), "2"))
	d := startDaemon(t, r)
	loops := runAgentTree(t, r, d)
	checkAgentTree(t, r, loops, loop.Usage{InputTokens: geminiUsage.PromptTokens - geminiUsage.CachedTokens,
		OutputTokens: geminiUsage.OutputTokens, CacheReadTokens: geminiUsage.CachedTokens}, false)
	mu.Lock()
	sf, pf := specFirst, phaseFirst
	mu.Unlock()
	if sf.IsZero() || pf.IsZero() {
		t.Fatalf("the fake API never refused a spec (%v) or a phase (%v) call", sf, pf)
	}
	s := stopCleanly(t, r, d)
	spec := checkLimitSeen(t, "gemini (quota it retries)", loops, s, loop.Spec, sf)
	if log := iterFile(r, string(spec.ID), 1, "attempt-1/agent.log"); !strings.Contains(log, "Attempt 1 failed: You exceeded your current quota") {
		t.Errorf("spec attempt-1/agent.log lacks gemini's retry notice:\n%s", tail(log, 8))
	}
	checkLimitSeen(t, "gemini (daily quota)", loops, s, loop.Phase, pf)
}
