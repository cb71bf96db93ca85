package transcript

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// argKeys are the arguments that say most about a tool call, best first:
// the command a shell tool runs, the file a file tool touches, the pattern
// a search looks for.
var argKeys = []string{"command", "cmd", "file_path", "filePath", "absolute_path", "notebook_path", "pattern", "path",
	"url", "query", "description", "prompt", "subject", "skill"}

// pathKeys hold file paths: shown relative to the working directory.
var pathKeys = []string{"file_path", "filePath", "absolute_path", "notebook_path", "path"}

// args is a short summary of a tool call's arguments (a JSON object): its
// most telling argument, a search's path after its pattern; else the first
// string argument; else nothing.
func (r *Renderer) args(raw jsontext.Value) string {
	var in map[string]any
	if len(raw) == 0 || decode(raw, &in) != nil || len(in) == 0 {
		return ""
	}
	str := func(k string) (string, bool) {
		s, ok := in[k].(string)
		return s, ok && strings.TrimSpace(s) != ""
	}
	for _, k := range argKeys {
		s, ok := str(k)
		if !ok {
			continue
		}
		if slices.Contains(pathKeys, k) {
			s = r.rel(s)
		}
		if k == "command" || k == "cmd" {
			s = unwrapShell(s)
		}
		if k == "pattern" {
			if p, ok := str("path"); ok {
				s += "  in " + r.rel(p)
			}
		}
		return firstLine(s)
	}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if s, ok := str(k); ok {
			return firstLine(k + ": " + s)
		}
	}
	return ""
}

// rel cuts the working directory from the start of path p.
func (r *Renderer) rel(p string) string {
	d := strings.TrimRight(r.Dir, "/")
	if d != "" && strings.HasPrefix(p, d+"/") {
		return p[len(d)+1:]
	}
	return p
}

// firstLine is s on one line: its first non-blank line, "…" when more
// follows.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return clean(strings.TrimSpace(s[:i])) + " …"
	}
	return clean(s)
}

// unwrapShell shows the command a shell wrapper runs: codex runs each
// command as `/bin/bash -lc '…'`.
func unwrapShell(s string) string {
	for _, w := range []string{"/bin/bash -lc ", "bash -lc ", "/bin/bash -c ", "bash -c ", "/bin/sh -c ", "sh -c ", "/bin/zsh -lc ", "zsh -lc "} {
		rest, ok := strings.CutPrefix(s, w)
		if !ok || len(rest) < 2 {
			continue
		}
		switch q := rest[0]; {
		case q == '\'' && rest[len(rest)-1] == '\'' && !strings.Contains(rest[1:len(rest)-1], "'"):
			return rest[1 : len(rest)-1]
		case q == '"' && rest[len(rest)-1] == '"':
			if u, ok := unquoteDouble(rest[1 : len(rest)-1]); ok {
				return u
			}
		}
	}
	return s
}

// unquoteDouble undoes a POSIX shell's double quotes: a backslash before
// $ ` " \ or a newline escapes it; an unescaped " means s was not one
// double-quoted word.
func unquoteDouble(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0:
			i++
			b.WriteByte(s[i])
		case c == '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// usage is what a final result reports.
type usage struct {
	cost     float64 // dollars; < 0: not reported
	tokens   int64
	duration time.Duration
	turns    int
	tools    int
}

// line is the summary: "$0.0177 · 9.5k tokens · 2.3s · 6 turns".
func (u usage) line() string {
	var parts []string
	switch {
	case u.cost >= 0.01:
		parts = append(parts, fmt.Sprintf("$%.2f", u.cost))
	case u.cost >= 0.0001:
		parts = append(parts, fmt.Sprintf("$%.4f", u.cost))
	case u.cost > 0:
		parts = append(parts, "<$0.0001")
	case u.cost == 0:
		parts = append(parts, "$0")
	}
	if u.tokens > 0 {
		parts = append(parts, Tokens(u.tokens)+" tokens")
	}
	if u.duration > 0 {
		parts = append(parts, duration(u.duration))
	}
	if u.turns > 0 {
		parts = append(parts, plural(u.turns, "turn"))
	}
	if u.tools > 0 {
		parts = append(parts, plural(u.tools, "tool call"))
	}
	return strings.Join(parts, " · ")
}

// done emits the final line: "done" or "failed", then the summary.
func (r *Renderer) done(failed bool, u usage) {
	r.flushText()
	word := "done"
	if failed {
		word = "failed"
	}
	if s := u.line(); s != "" {
		word += "  " + s
	}
	r.emit(Line{Kind: Done, Err: failed, Text: word})
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Tokens reads a token count as 950, 12.3k, 4.5M.
func Tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

// duration reads 0.8s, 42s, 3m05s, 1h02m.
func duration(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
