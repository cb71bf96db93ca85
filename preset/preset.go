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
// The package is pure: no I/O, no clock (Parse takes now).
package preset

import (
	"regexp"
	"time"

	"github.com/loopr-dev/loopr/loop"
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
}

// Get returns the named preset.
func Get(name string) (Preset, bool) {
	for _, p := range presets {
		if p.Name == name {
			p.Command = append([]string(nil), p.Command...)
			p.Env = append([]string(nil), p.Env...)
			return p, true
		}
	}
	return Preset{}, false
}

var presets = []Preset{
	{Name: Claude, Command: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"}},
	{Name: Codex, Command: []string{"codex", "exec", "--json"}},
	{Name: Gemini, Command: []string{"gemini", "--output-format", "stream-json"}},
	{Name: OpenCode, Command: []string{"opencode", "run", "--format", "json"}},
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
}

// Parse reads an agent's whole output (agent.log) of a run that exited with
// exitCode. now anchors relative reset times. Structured events first; the
// text pattern only for a failed run or a usage-limit line at the end.
func Parse(name string, out []byte, exitCode int, now time.Time, pattern *regexp.Regexp) Report {
	return Report{}
}
