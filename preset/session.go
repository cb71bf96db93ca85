package preset

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/loop"
)

// Sessions. Each CLI names the session of a run in its structured output,
// and can continue it in a later run:
//
//	claude    {"type":"system","subtype":"init","session_id":…}   --resume ID (loopr sets --session-id up front)
//	codex     {"type":"thread.started","thread_id":…}            codex exec … resume ID -
//	gemini    {"type":"init","session_id":…}                     --resume ID
//	opencode  {"sessionID":…} on every event                     --session ID
//	command   the profile's session_pattern                      the profile's resume_args
//
// A session the CLI does not know (deleted, expired, another machine's)
// makes it exit at once with a message Unknown recognises.

// SessionLine returns the session id an output line of the named preset's
// CLI announces, or "". pattern (the command preset's session_pattern,
// first group) is tried for any preset when set.
func SessionLine(name string, line []byte, pattern *regexp.Regexp) string {
	line = bytes.TrimSpace(line)
	if pattern != nil {
		if m := pattern.FindSubmatch(line); len(m) > 1 {
			return cleanSession(string(m[1]))
		}
		if name == Command {
			return ""
		}
	}
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return ""
	}
	var e struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
		ThreadID  string `json:"thread_id"`
		OpenCode  string `json:"sessionID"`
	}
	switch name {
	case Claude, Gemini:
		if !bytes.Contains(line, []byte(`"session_id"`)) || json.Unmarshal(line, &e) != nil {
			return ""
		}
		if name == Gemini && e.Type != "init" || name == Claude && e.Type != "system" {
			return ""
		}
		return cleanSession(e.SessionID)
	case Codex:
		if !bytes.Contains(line, []byte(`"thread.started"`)) || json.Unmarshal(line, &e) != nil || e.Type != "thread.started" {
			return ""
		}
		return cleanSession(e.ThreadID)
	case OpenCode:
		if !bytes.Contains(line, []byte(`"sessionID"`)) || json.Unmarshal(line, &e) != nil {
			return ""
		}
		return cleanSession(e.OpenCode)
	}
	return ""
}

// Session returns the first session id in a whole output, or "".
func Session(name string, out []byte, pattern *regexp.Regexp) string {
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		if id := SessionLine(name, line, pattern); id != "" {
			return id
		}
	}
	return ""
}

// sessionRe is what loopr accepts as a session id: it goes on a command
// line and into file names.
var sessionRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// cleanSession returns id when it looks like a session id, else "".
func cleanSession(id string) string {
	if len(id) > loop.MaxSessionID || !sessionRe.MatchString(id) {
		return ""
	}
	return id
}

// ValidSession reports whether id is one loopr would pass to a CLI.
func ValidSession(id string) bool { return id != "" && cleanSession(id) == id }

// unknownRe matches what the CLIs print when asked to resume a session
// they do not have: claude 2.1 "No conversation found with session ID:
// ID", codex 0.171 "no rollout found for thread id ID", gemini 0.61
// "Error resuming session: No previous sessions found for this project."
// (exit 42), opencode 1.18 "Error: Session not found".
var unknownRe = regexp.MustCompile(`(?i)no conversation found|no rollout found|error resuming session|no previous sessions found|invalid session identifier|session not found|no session found|unknown session|session .{0,80} (?:not found|does not exist)`)

// Unknown returns what the output of a failed resume says when the CLI
// does not know the session (from the message to the end of its line,
// one line, clipped), or "": the caller starts the CLI fresh instead.
func Unknown(out []byte) string {
	if len(out) > 64<<10 {
		out = out[len(out)-64<<10:] // it exits at once: the message is at the end
	}
	loc := unknownRe.FindIndex(out)
	if loc == nil {
		return ""
	}
	msg := out[loc[0]:]
	if i := bytes.IndexAny(msg, "\n\"\r"); i >= 0 {
		msg = msg[:i]
	}
	return clip(oneLine(string(msg)), 160)
}

// StartArgv returns argv for a fresh run that should be session id: for
// claude, `--session-id id` (so the id is known before any output). argv
// is returned as it is for other presets, for a command that is not the
// preset's CLI, and when it already names a session.
func StartArgv(name string, argv []string, id string) []string {
	if name != Claude || !isCLI(name, argv) || !ValidSession(id) || hasAny(argv, sessionFlags[name]...) {
		return argv
	}
	return append(slices.Clip(argv), "--session-id", id)
}

// ResumeArgv returns argv changed to continue session id, and whether the
// preset can: resumeArgs (the command preset's, "{session}" replaced) are
// appended for the command preset; the others get their CLI's flag. A
// command that is not the preset's CLI (a wrapper) is not resumed.
func ResumeArgv(name string, argv []string, id string, resumeArgs []string) ([]string, bool) {
	if !ValidSession(id) || len(argv) == 0 {
		return argv, false
	}
	out := slices.Clip(argv)
	if name == Command || len(resumeArgs) > 0 {
		if len(resumeArgs) == 0 {
			return argv, false
		}
		for _, a := range resumeArgs {
			out = append(out, strings.ReplaceAll(a, "{session}", id))
		}
		return out, true
	}
	if !isCLI(name, argv) || hasAny(argv, sessionFlags[name]...) {
		return argv, false
	}
	switch name {
	case Claude, Gemini:
		return append(out, "--resume", id), true
	case OpenCode:
		return append(out, "--session", id), true
	case Codex:
		// codex exec [flags] resume ID - : the prompt stays on stdin.
		if !slices.Contains(argv, "exec") {
			return argv, false
		}
		if argv[len(argv)-1] == "-" {
			return append(slices.Clone(argv[:len(argv)-1]), "resume", id, "-"), true
		}
		return append(out, "resume", id, "-"), true
	}
	return argv, false
}

// sessionFlags are the arguments by which a command already picks its
// session: loopr then leaves the session to it.
var sessionFlags = map[string][]string{
	Claude:   {"--resume", "-r", "--continue", "-c", "--session-id"},
	Gemini:   {"--resume", "-r", "--session-id"},
	OpenCode: {"--session", "-s", "--continue", "-c"},
	Codex:    {"resume"},
}

// isCLI reports whether argv runs the named preset's own CLI.
func isCLI(name string, argv []string) bool {
	p, ok := Get(name)
	return ok && len(p.Command) > 0 && len(argv) > 0 && filepath.Base(argv[0]) == p.Command[0]
}

func hasAny(argv []string, flags ...string) bool {
	for _, a := range argv[1:] {
		for _, f := range flags {
			if a == f || strings.HasPrefix(a, f+"=") && strings.HasPrefix(f, "--") {
				return true
			}
		}
	}
	return false
}

// AttachArgv returns the argv that opens session id interactively, for
// `loopr attach`: claude --resume ID, codex resume ID, gemini --resume ID,
// opencode --session ID. attachArgs (the profile's attach_args, any
// "{session}" replaced by id) replaces it, for any preset. nil means no
// session to open (none recorded, or the command preset without
// attach_args, or attach_args naming {session} without one): the caller
// opens the user's shell instead.
func AttachArgv(name, id string, attachArgs []string) []string {
	if len(attachArgs) > 0 {
		out := make([]string, 0, len(attachArgs))
		for _, a := range attachArgs {
			if strings.Contains(a, "{session}") {
				if !ValidSession(id) {
					return nil
				}
				a = strings.ReplaceAll(a, "{session}", id)
			}
			out = append(out, a)
		}
		return out
	}
	if !ValidSession(id) {
		return nil
	}
	switch name {
	case Claude, Gemini:
		return []string{name, "--resume", id}
	case Codex:
		return []string{"codex", "resume", id}
	case OpenCode:
		return []string{"opencode", "--session", id}
	}
	return nil
}
