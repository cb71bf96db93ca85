// Package preset knows the agent CLIs loopr drives: for each one the argv
// loopr runs by default, the environment it adds (so the CLI reports a
// provider limit in seconds instead of retrying it for minutes: loopr does
// the waiting), and the parser of the output format that argv asks for.
//
// Parse turns an agent's whole output into a Report: whether the provider
// refused (a usage or rate limit) and until when, whether the failure was a
// transient provider error, whether the agent's own result says it failed,
// and the tokens and dollars it reported. Structured events come first; the
// text pattern is only a fallback, and counts only for a run that failed or
// for a usage-limit line at the very end of a run that exited 0, so a run
// that passes while talking about rate limiters is never a limit.
//
// While the agent runs, Line tells the runner which lines say that the CLI
// failed a provider call and waits to retry it (gemini's "Attempt 1
// failed", opencode's "stream error" log line, claude's api_retry event):
// the runner stops an agent that prints nothing else for
// agent.retry_timeout_secs, and Retried classifies what it was retrying.
//
// The package is pure: no I/O, no clock (Parse takes now).
package preset

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// The presets.
const (
	Claude   = "claude"
	Codex    = "codex"
	Gemini   = "gemini"
	OpenCode = "opencode"
	Command  = "command"
)

// Names lists every preset, the default first.
var Names = []string{Claude, Codex, Gemini, OpenCode, Command}

// Preset is what loopr knows about one agent CLI.
type Preset struct {
	Name    string
	Command []string // default argv; the prompt arrives on stdin
	Env     []string // extra KEY=value the preset sets
	// IncludeFlag is the flag that lets the CLI's file tools write in a
	// directory outside its workdir: WithArtifactDir adds it, with the
	// directory of $LOOPR_ARTIFACT, to a command that runs the CLI.
	IncludeFlag string
	// EnvPass names the variables of the daemon's environment the CLI
	// needs (its API keys, base URL and settings); a trailing * matches a
	// prefix. Nothing else beyond the base set reaches an agent unless
	// the profile's env_pass names it.
	EnvPass []string
	// Home lists the files and directories under $HOME the CLI reads (its
	// auth and settings): a sandboxed agent's private home gets a copy.
	Home []string
	// HomeSkip lists what under Home is the CLI's record of other work
	// (transcripts of every project's sessions, prompt history, logs):
	// never copied into a sandboxed agent's home, where it would read
	// other projects' conversations and whatever secrets they held. The
	// sessions a loop's own runs make stay in its private home.
	HomeSkip []string
	// Hosts are the host:port the CLI talks to: a sandbox with network
	// allow admits them when allow_hosts is empty. BaseURLEnv, when set in
	// the agent's environment, names a URL whose host:port is admitted too.
	Hosts      []string
	BaseURLEnv []string
}

// Get returns the named preset.
func Get(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			p.Command = append([]string(nil), p.Command...)
			p.Env = append([]string(nil), p.Env...)
			p.EnvPass = append([]string(nil), p.EnvPass...)
			p.Home = append([]string(nil), p.Home...)
			p.HomeSkip = append([]string(nil), p.HomeSkip...)
			p.Hosts = append([]string(nil), p.Hosts...)
			return p, true
		}
	}
	return Preset{}, false
}

var presets = []Preset{
	{
		Name:    Claude,
		Command: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"},
		// No retries inside the CLI: it would wait out a 429 or 529
		// silently for ~3 minutes (10 retries, honouring retry-after).
		// loopr waits instead, and knows why. No self-update mid-run.
		Env:     []string{"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1"},
		EnvPass: []string{"ANTHROPIC_*", "CLAUDE_*", "IS_SANDBOX", "DISABLE_*"},
		Home:    []string{".claude", ".claude.json"},
		HomeSkip: []string{".claude/projects", ".claude/todos", ".claude/shell-snapshots", ".claude/file-history",
			".claude/history.jsonl", ".claude/logs", ".claude/ide"},
		Hosts:      []string{"api.anthropic.com:443"},
		BaseURLEnv: []string{"ANTHROPIC_BASE_URL"},
	},
	{
		Name: Codex,
		// The prompt on stdin (-). No approval prompts and no sandbox of
		// Codex's own, as claude's --dangerously-skip-permissions: its
		// workspace-write sandbox would refuse the artifact, which lies
		// outside the worktree (docs/agents/codex.md shows the sandboxed
		// command).
		Command:    []string{"codex", "exec", "--json", "--dangerously-bypass-approvals-and-sandbox", "-"},
		EnvPass:    []string{"OPENAI_*", "CODEX_*"},
		Home:       []string{".codex"},
		HomeSkip:   []string{".codex/sessions", ".codex/archived_sessions", ".codex/history.jsonl", ".codex/log"},
		Hosts:      []string{"api.openai.com:443", "chatgpt.com:443"},
		BaseURLEnv: []string{"OPENAI_BASE_URL"},
	},
	{
		Name:    Gemini,
		Command: []string{"gemini", "--output-format", "stream-json", "--yolo"},
		// A worktree is never a trusted folder: headless, the CLI would
		// exit 55 at once. Its file tools refuse paths outside the
		// workspace: the artifact's directory is included
		// (WithArtifactDir).
		Env:         []string{"GEMINI_CLI_TRUST_WORKSPACE=true"},
		IncludeFlag: "--include-directories",
		EnvPass:     []string{"GEMINI_*", "GOOGLE_*"},
		Home:        []string{".gemini"},
		HomeSkip:    []string{".gemini/tmp", ".gemini/history"},
		Hosts:       []string{"generativelanguage.googleapis.com:443", "oauth2.googleapis.com:443"},
		BaseURLEnv:  []string{"GOOGLE_GEMINI_BASE_URL"},
	},
	{
		Name: OpenCode,
		// --auto: without it `opencode run` rejects every permission it
		// would ask for, external_directory among them, so the artifact
		// (outside the worktree) could not be written. --print-logs at
		// ERROR: the only sign, on stderr, that it retries a failed
		// provider call (it prints no event while it waits).
		Command: []string{"opencode", "run", "--format", "json", "--auto", "--print-logs", "--log-level", "ERROR"},
		// opencode reaches many providers; the common ones' keys pass.
		EnvPass: []string{"OPENCODE_*", "ANTHROPIC_*", "OPENAI_*", "GEMINI_*", "GOOGLE_*", "OPENROUTER_*"},
		Home:    []string{".config/opencode", ".local/share/opencode", ".local/state/opencode"},
		HomeSkip: []string{".local/share/opencode/storage", ".local/share/opencode/log", ".local/share/opencode/snapshot",
			".local/state/opencode/prompt-history.jsonl"},
		Hosts: []string{"api.anthropic.com:443", "api.openai.com:443", "openrouter.ai:443", "models.dev:443"},
	},
	{Name: Command},
}

// Report is what an agent's output says about its run.
type Report struct {
	Limited    bool          // the provider refused: usage/rate limit
	ResetAt    time.Time     // when the limit ends, when said (zero otherwise)
	RetryAfter time.Duration // a wait announced relative to now, when said
	Transient  bool          // transient provider error: 5xx, 529/overloaded, connection reset
	IsError    bool          // the agent's own result says the run failed
	Usage      loop.Usage    // tokens and cost from the structured output (cost from total_cost_usd when given)
	Detail     string        // one line: the limit or error message (escaped, clipped)
	// SpendCap: the provider refused because a spend limit is reached
	// ("You've hit your monthly spend limit") and named no reset: it does
	// not lift by waiting, a person must raise it. Never with Limited.
	SpendCap bool
}

// Parse reads an agent's whole output (agent.log) of a run that exited with
// exitCode. now anchors relative reset times. Structured events first; the
// text pattern only as the package doc says: over the last lines of a run
// that failed, or, on exit 0, a usage-limit line among the last three lines.
// A nil pattern turns the text fallback off (structured events still count).
func Parse(name string, out []byte, exitCode int, now time.Time, pattern *regexp.Regexp) Report {
	var r Report
	var s structured
	switch name {
	case Claude:
		s = parseClaude(out, &r)
	case Codex:
		s = parseCodex(out, &r)
	case Gemini:
		s = parseGemini(out, &r)
	case OpenCode:
		s = parseOpenCode(out, &r)
	}
	r.Usage = r.Usage.Bounded() // a run's sums too (loop.MaxRunTokens, loop.MaxRunUSD)
	failed := exitCode != 0 || r.IsError
	switch {
	case r.Limited && spendCapRe.MatchString(s.message):
		// A spend limit: no wait unless the message names a reset.
		spendCap(&r, s.message, now)
	case r.Limited:
		// The structured limit may carry the reset in its message text.
		if r.ResetAt.IsZero() {
			r.ResetAt = hint(s.message, now)
		}
	case r.Transient:
	case s.done && !failed:
		// The agent's own final event says the run succeeded: whatever
		// its output says about limits is prose.
		return r
	case s.done || s.message != "":
		// The agent's structured error message, then the text around it.
		classifyText(&r, s.message, true, now, pattern)
		if !r.Limited && !r.Transient && !s.done {
			classifyText(&r, string(out), failed, now, pattern)
		}
	default:
		classifyText(&r, string(out), failed, now, pattern)
	}
	if r.IsError && r.Detail == "" {
		r.Detail = oneLine(s.message)
	}
	settle(&r, now)
	return r
}

// settle turns the announced reset into RetryAfter. A reset already past
// when read is stale (or moved later since), and one beyond
// ratelimit.Horizon is garbage: neither is trusted, and the caller
// re-probes after its short backoff instead.
func settle(r *Report, now time.Time) {
	if !r.Limited || r.ResetAt.IsZero() {
		return
	}
	if !ratelimit.Trusted(now, r.ResetAt) {
		why := "already past"
		if r.ResetAt.After(now) {
			why = "more than 7 days away, not believed"
		}
		r.Detail = clip(r.Detail+" (announced reset "+r.ResetAt.UTC().Format(time.RFC3339)+" "+why+": re-probe)", detailMax)
		r.ResetAt = time.Time{}
		return
	}
	r.RetryAfter = r.ResetAt.Sub(now)
}

// ParseText is the text fallback of Parse alone, for a run the caller knows
// failed although its output did not say so (exit 0 without the artifact it
// had to write): pattern over the last lines of out, transient errors too.
func ParseText(out []byte, failed bool, now time.Time, pattern *regexp.Regexp) Report {
	var r Report
	classifyText(&r, string(out), failed, now, pattern)
	settle(&r, now)
	return r
}

// Final reports whether out holds the named preset's final structured event
// (claude's result, codex's turn.completed or turn.failed, gemini's result):
// the agent said itself how the run ended, so its text is not searched for
// a limit when it said success.
func Final(name string, out []byte) bool {
	var r Report
	switch name {
	case Claude:
		return parseClaude(out, &r).done
	case Codex:
		return parseCodex(out, &r).done
	case Gemini:
		return parseGemini(out, &r).done
	}
	return false
}

// WithArtifactDir returns argv with what the named preset's CLI needs to
// write in dir, the iteration directory (where $LOOPR_ARTIFACT and
// $LOOPR_QUESTION_FILE lie, outside the workdir): gemini's file tools
// refuse any path outside the workspace, so `--include-directories dir` is
// appended (the CLI takes the flag several times). argv is returned as it
// is for a preset without IncludeFlag, and when its first word is not the
// preset's CLI (a wrapper script is the user's to configure).
func WithArtifactDir(name string, argv []string, dir string) []string {
	p, ok := Get(name)
	if !ok || p.IncludeFlag == "" || len(argv) == 0 || dir == "" || filepath.Base(argv[0]) != p.Command[0] {
		return argv
	}
	return append(slices.Clip(argv), p.IncludeFlag, dir)
}

// WithMCP returns argv with what the named preset's CLI needs to start
// loopr's MCP server, `exe args…`: claude reads configFile, the JSON of
// mcp.ClientConfig (--mcp-config); codex takes -c overrides of
// mcp_servers.loopr (before its trailing "-", the prompt on stdin). argv
// is returned as it is for the other presets, and when its first word is
// not the preset's CLI (a wrapper script is the user's to configure).
func WithMCP(name string, argv []string, configFile, exe string, args []string) []string {
	p, ok := Get(name)
	if !ok || len(argv) == 0 || len(p.Command) == 0 || filepath.Base(argv[0]) != p.Command[0] {
		return argv
	}
	switch name {
	case Claude:
		return append(slices.Clip(argv), "--mcp-config", configFile)
	case Codex:
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = tomlString(a)
		}
		extra := []string{"-c", "mcp_servers.loopr.command=" + tomlString(exe),
			"-c", "mcp_servers.loopr.args=[" + strings.Join(quoted, ",") + "]"}
		at := len(argv)
		if argv[at-1] == "-" {
			at--
		}
		return slices.Concat(argv[:at], extra, argv[at:])
	}
	return argv
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
