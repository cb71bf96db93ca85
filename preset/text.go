package preset

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/ratelimit"
)

const (
	// textWindow is how much of the end of the output the text fallback
	// reads: agent CLIs print the limit last.
	textWindow = 16 << 10
	// failedLines is how many of the last non-empty lines of a failed run
	// the pattern is tried on.
	failedLines = 40
	// passedLines is how many last lines of a run that exited 0 may hold a
	// usage-limit line (the old `Claude AI usage limit reached|<epoch>`).
	passedLines = 3
	detailMax   = 200
)

var (
	// exitZeroLimitRe is what a usage-limit line of a run that exited 0
	// must look like besides matching the pattern: the CLI's own line,
	// not a sentence of the agent's answer.
	exitZeroLimitRe = regexp.MustCompile(`(?i)usage limit reached\s*\|\s*\d{9,13}\b|^\W{0,3}(?:API Error:[^·]*·\s*)?(?:you(?:'|’)ve|you have) hit your (?:\S+ ){0,3}limit\b`)
	// spendCapRe is a refusal for a spend limit (Claude Code's
	// "You've hit your monthly spend limit", "…your team's pooled group
	// budget", "You're out of usage credits", "Usage is paused for your
	// organization"): waiting does not lift it unless the same message
	// names a reset. Checked before the pattern, on failed runs only.
	spendCapRe = regexp.MustCompile(`(?i)hit your [^.·\n]{0,40}?\b(?:spend limit|group budget)\b|(?:you(?:'|’)re|you are|your org is) out of usage\b|usage is paused for your organi[sz]ation`)
	// transientRe is a provider error that passes on its own: retried
	// without spending an iteration. Only failed runs are checked.
	transientRe = regexp.MustCompile(`(?i)API Error: 5\d\d\b|\b529\b|overloaded|high demand|no capacity available|` +
		`internal server error|service unavailable|bad gateway|gateway timeout|connection reset|econnreset|socket hang up|` +
		`connection refused|econnrefused|etimedout|stream disconnected|error sending request`)
)

// structured is what a parser of a structured format found.
type structured struct {
	done    bool   // the agent's final event (result, turn.completed/failed) was seen
	message string // the agent's error or final message, for the text rules
}

// classifyText applies the text rules to out: on a failed run, the pattern
// and then transientRe over its last lines; on exit 0, only a usage-limit
// line among the last three.
func classifyText(r *Report, out string, failed bool, now time.Time, pattern *regexp.Regexp) {
	if len(out) > textWindow {
		out = out[len(out)-textWindow:]
	}
	lines := lastLines(out, failedLines)
	if !failed {
		if len(lines) > passedLines {
			lines = lines[len(lines)-passedLines:]
		}
		for i, l := range lines {
			if pattern != nil && pattern.MatchString(l) && exitZeroLimitRe.MatchString(l) {
				limited(r, lines, i, now)
				return
			}
		}
		return
	}
	for i := len(lines) - 1; i >= 0; i-- {
		switch {
		case pattern != nil && spendCapRe.MatchString(lines[i]):
			spendCap(r, lines[i], now)
			return
		case pattern != nil && pattern.MatchString(lines[i]):
			limited(r, lines, i, now)
			return
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if transientRe.MatchString(lines[i]) {
			r.Transient = true
			r.Detail = oneLine(lines[i])
			return
		}
	}
}

// limited marks r limited by lines[i], reading the reset from that line and
// its neighbours: a CLI may print "Access resets at …" on the next line, or
// a hint line ("/upgrade to increase your usage limit.") after the limit.
func limited(r *Report, lines []string, i int, now time.Time) {
	r.Limited = true
	r.Detail = oneLine(lines[i])
	r.ResetAt = hint(strings.Join(lines[max(i-2, 0):min(i+3, len(lines))], "\n"), now)
}

// spendCap marks r refused by the spend limit msg names: a limit until the
// reset msg names (Claude Code adds "· your 5-hour limit resets 4:05pm"
// when the plan's own limit is spent too), else a SpendCap.
func spendCap(r *Report, msg string, now time.Time) {
	r.Detail = oneLine(msg)
	r.Transient = false
	if t := hint(msg, now); !t.IsZero() {
		r.Limited, r.SpendCap = true, false
		if r.ResetAt.IsZero() { // else the structured reset, to the second
			r.ResetAt = t
		}
		return
	}
	r.Limited, r.SpendCap, r.ResetAt = false, true, time.Time{}
}

// hint is ratelimit.ParseHint, zero when there is none.
func hint(s string, now time.Time) time.Time {
	if t, ok := ratelimit.ParseHint(s, now); ok {
		return t
	}
	return time.Time{}
}

// lastLines returns up to n last non-empty lines of s, trimmed, in order.
func lastLines(s string, n int) []string {
	var rev []string
	for len(s) > 0 && len(rev) < n {
		i := strings.LastIndexByte(s, '\n')
		line := strings.TrimSpace(s[i+1:])
		if i < 0 {
			s = ""
		} else {
			s = s[:i]
		}
		if line != "" {
			rev = append(rev, line)
		}
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// oneLine makes s a one-line detail: control characters escaped as
// strconv.Quote does, clipped.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	var b strings.Builder
	for _, c := range s {
		switch {
		case c == utf8.RuneError:
			b.WriteString(`\ufffd`)
		case unicode.IsPrint(c) || c == ' ':
			b.WriteRune(c)
		default:
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return clip(b.String(), detailMax)
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
