package preset

import (
	"bytes"
	"regexp"
	"strings"
	"time"
)

// LineKind is what one line of an agent's output says about its progress:
// the runner's retry watch stops an agent that has printed only Retrying
// lines (and Neutral ones) for agent.retry_timeout_secs.
type LineKind int

// The kinds of line.
const (
	Neutral  LineKind = iota // neither: a warning, the rest of a retry notice
	Progress                 // one of the CLI's structured events: it is working
	Retrying                 // the CLI failed a provider call and waits to retry it
)

// geminiAttemptRe is Gemini CLI's retry notice on stderr: "Attempt 3
// failed: <message>" then "Retrying after 10152ms..." (or "Max attempts
// reached" on the last).
var geminiAttemptRe = regexp.MustCompile(`^Attempt \d+ failed\b`)

// Line classifies one line of the named preset's output (stdout and stderr
// interleaved, as agent.log holds them):
//
//	claude    stream-json event system/api_retry (only when retries are
//	          allowed: the preset sets CLAUDE_CODE_MAX_RETRIES=0)
//	codex     an error event "Reconnecting... 2/5 (…)"
//	gemini    "Attempt 1 failed: …" (stderr; the CLI waits up to 300 s
//	          for a quota's retryDelay, and retries ten times)
//	opencode  the ERROR log line message="stream error" of the main
//	          session (--print-logs; it prints no event while it retries
//	          up to 5 times and honours retry-after up to 24 days)
//
// Every other JSON object line of those presets is Progress; the command
// preset has no Retrying lines.
func Line(name string, line []byte) LineKind {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || name == Command {
		return Neutral
	}
	json := line[0] == '{' && line[len(line)-1] == '}'
	switch name {
	case Claude:
		if json && bytes.Contains(line, []byte(`"api_retry"`)) {
			return Retrying
		}
	case Codex:
		if json && bytes.Contains(line, []byte(`"type":"error"`)) && bytes.Contains(line, []byte(`"Reconnecting...`)) {
			return Retrying
		}
	case Gemini:
		if geminiAttemptRe.Match(line) {
			return Retrying
		}
	case OpenCode:
		// The title agent (small=true) retries on its own; only the main
		// session's error means the run waits.
		if !json && bytes.Contains(line, []byte(`message="stream error"`)) && !bytes.Contains(line, []byte(` small=true`)) {
			return Retrying
		}
	}
	if json {
		return Progress
	}
	return Neutral
}

// maxNotice bounds the lines of one retry notice Retried reads.
const maxNotice = 6

// retryStatusRe is the HTTP status a retry notice names (gemini: "Attempt
// 1 failed with status 429. Retrying with backoff...").
var retryStatusRe = regexp.MustCompile(`\bfailed with status (\d{3})\b`)

// retryNetRe is a retried call that never reached the provider (opencode:
// "Cannot connect to API: Unable to connect."): transient, like
// transientRe's, but only read in a retry notice, where it speaks of the
// provider call.
var retryNetRe = regexp.MustCompile(`(?i)cannot connect|unable to connect|fetch failed|network error|timed out`)

// openCodeErrRe is the error of opencode's "stream error" log line.
var openCodeErrRe = regexp.MustCompile(`\berror\.error="((?:[^"\\]|\\.)*)"`)

// Retried classifies what the agent was retrying when the runner stopped it
// (it printed only retry notices for agent.retry_timeout_secs): the last
// retry notice in out and the lines after it. A transient provider error
// (5xx, overloaded, a connection error) is Transient; anything else these
// CLIs retry is a refusal (429, quota): Limited, until the reset the notice
// names, if it names one. Never a SpendCap: a spend limit is not retried.
func Retried(name string, out []byte, now time.Time) Report {
	var r Report
	if name == Claude {
		// The api_retry event carries the status: a kill while retrying
		// is a limit (429) or transient (5xx).
		parseClaude(out, &r)
		if r.Limited || r.Transient {
			settle(&r, now)
			return r
		}
	}
	s := string(out)
	if len(s) > textWindow {
		s = s[len(s)-textWindow:]
	}
	lines := lastLines(s, failedLines)
	last := -1
	for i := len(lines) - 1; i >= 0 && last < 0; i-- {
		if Line(name, []byte(lines[i])) == Retrying {
			last = i
		}
	}
	if last < 0 {
		// Nothing to read: still a refusal the CLI kept retrying.
		r.Limited = true
		r.Detail = "the agent kept retrying a failed provider call"
		return r
	}
	notice := lines[last:min(last+maxNotice, len(lines))]
	msg := notice[0]
	if m := openCodeErrRe.FindStringSubmatch(msg); m != nil {
		msg = strings.ReplaceAll(m[1], `\"`, `"`)
	}
	text := strings.Join(append([]string{msg}, notice[1:]...), "\n")
	r.Detail = oneLine(msg)
	var code status
	if m := retryStatusRe.FindStringSubmatch(msg); m != nil {
		_ = code.UnmarshalJSON([]byte(m[1]))
	}
	if code >= 500 || code != 429 && (transientRe.MatchString(text) || retryNetRe.MatchString(text)) {
		r.Transient = true
		return r
	}
	r.Limited = true
	r.ResetAt = hint(text, now)
	settle(&r, now)
	return r
}
