package config

import (
	"regexp"
	"slices"

	"github.com/loopr-dev/loopr/preset"
)

// Agent is the `agent:` section, and each entry of `agents:`: an agent
// profile, how one iteration runs (SPEC §6).
type Agent struct {
	// Preset names the agent CLI (preset package): its default command,
	// the environment it adds and the parser of its output.
	Preset string `yaml:"preset"`
	// Command replaces the preset's argv (run without a shell); the
	// preset's parser and environment stay. Empty: the preset's argv.
	Command           []string `yaml:"command"`
	TimeoutSecs       int      `yaml:"timeout_secs"`
	RateLimitExitCode int      `yaml:"rate_limit_exit_code"`
	// RateLimitPattern is a Go regexp; agent output matching it means the
	// provider rate-limited the run: over the last lines of a failed run,
	// or a usage-limit line among the last three on exit 0, after the
	// preset's structured output (preset.Parse). Validate
	// rejects patterns that match empty output, "" included (a consumer
	// compiling "" would see every run as rate limited); '[^\s\S]' never
	// matches and so turns the check off.
	RateLimitPattern string `yaml:"rate_limit_pattern"`
	// StallTimeoutSecs kills an agent that writes no output and changes no
	// file in its workdir for that long (the iteration fails); 0 = off.
	StallTimeoutSecs int `yaml:"stall_timeout_secs"`
	// RetryTimeoutSecs stops an agent whose CLI has only said, for that
	// long, that it retries a failed provider call (gemini, opencode):
	// the iteration is rate limited (or transient), loopr waits; 0 = off.
	RetryTimeoutSecs int `yaml:"retry_timeout_secs"`
	// Fallback names the profiles that take a loop's next iteration while
	// this one is limited, in order (followed transitively).
	Fallback []string `yaml:"fallback"`
	// Resume says when an iteration continues the agent's session of the
	// loop's last run instead of starting the CLI cold (ResumeModes):
	// off, interrupted (after a rate-limit wait, a daemon restart, a stall
	// kill, a transient error, `loopr answer`) or always (after a failed
	// iteration too).
	Resume string `yaml:"resume"`
	// ResumeArgs and SessionPattern let the command preset resume: the
	// args appended to the command ({session} is the id), and the Go
	// regexp whose first group finds the session id in its output.
	ResumeArgs     []string `yaml:"resume_args"`
	SessionPattern string   `yaml:"session_pattern"`
	// AttachArgs is the argv `loopr attach` runs in the loop's worktree
	// to open the session interactively ({session} is its id), instead
	// of the preset's (preset.AttachArgv); empty: the preset's, or the
	// user's $SHELL when there is no session to open.
	AttachArgs []string `yaml:"attach_args"`
	// Env sets variables of the agent's environment (and its validate
	// commands' and hooks'), after the allowlist (see security.go).
	Env map[string]string `yaml:"env,omitempty"`
	// EnvPass names more variables of the daemon's environment that reach
	// the agent, beyond the base set, LOOPR_* and the preset's own; a
	// trailing * matches a prefix.
	EnvPass []string `yaml:"env_pass"`
	// Secrets are variables whose values the daemon reads at each start
	// of an agent, from a file or its own environment; their values are
	// redacted wherever loopr stores or sends text.
	Secrets map[string]Secret `yaml:"secrets,omitempty"`
	// Sandbox says where the agent runs: as the user (none) or inside
	// bubblewrap (bwrap), and what network it reaches.
	Sandbox Sandbox `yaml:"sandbox"`
	// MCP gives the agent loopr's MCP server (`loopr mcp`: ask_human,
	// report_progress, spawn_child …): the claude and codex presets
	// start it; false leaves the agent's CLI as it is. Default true.
	MCP bool `yaml:"mcp"`
}

// The agent.resume modes.
const (
	ResumeOff         = "off"
	ResumeInterrupted = "interrupted"
	ResumeAlways      = "always"
)

// ResumeModes lists the values of agent.resume.
var ResumeModes = []string{ResumeOff, ResumeInterrupted, ResumeAlways}

// ResumeMode is Resume, "" read as the default, interrupted.
func (a Agent) ResumeMode() string {
	if a.Resume == "" {
		return ResumeInterrupted
	}
	return a.Resume
}

// SessionRegexp compiles SessionPattern; nil, nil when it is empty.
func (a Agent) SessionRegexp() (*regexp.Regexp, error) {
	if a.SessionPattern == "" {
		return nil, nil
	}
	return regexp.Compile(a.SessionPattern)
}

// DefaultProfile is the name of the profile `agent:` defines.
const DefaultProfile = "default"

// DefaultAgent returns the settings an agent profile starts from: the
// claude preset, 30 minutes, exit code 75, the default pattern, a stall
// after 10 minutes, a retrying CLI stopped after one.
func DefaultAgent() Agent {
	return Agent{
		Preset:            preset.Claude,
		TimeoutSecs:       1800,
		RateLimitExitCode: 75,
		RateLimitPattern:  DefaultRateLimitPattern,
		StallTimeoutSecs:  600,
		RetryTimeoutSecs:  60,
		Resume:            ResumeInterrupted,
		Env:               map[string]string{},
		Secrets:           map[string]Secret{},
		Sandbox:           Sandbox{Runner: SandboxNone, Network: NetworkHost},
		MCP:               true,
	}
}

// Argv returns the command the profile runs: Command, else its preset's.
func (a Agent) Argv() []string {
	if len(a.Command) > 0 {
		return slices.Clone(a.Command)
	}
	p, _ := preset.Get(a.Preset)
	return p.Command
}

// PresetEnv returns the extra environment of the profile's preset.
func (a Agent) PresetEnv() []string {
	p, _ := preset.Get(a.Preset)
	return p.Env
}
