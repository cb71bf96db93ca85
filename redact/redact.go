// Package redact keeps secrets out of what loopr stores and sends: agent
// output (agent.log, validation.log), feedback, journal lines, events,
// webhook bodies and notify arguments.
//
// A Redactor knows two things: the values of the secrets the agent profiles
// hand to agents (Add, by name), and the shapes of common tokens (GitHub's
// ghp_/gho_/ghs_/ghu_/ghr_/github_pat_, OpenAI's and Anthropic's sk-, AWS
// access key ids AKIA/ASIA, Slack's xox?-). Each is replaced by
// "[redacted NAME]", NAME being the secret's name or the shape's
// (github_token, api_key, aws_access_key, slack_token).
//
// Values shorter than MinLen bytes are not registered: redacting "abc"
// everywhere would mangle ordinary output and leak the value by its gaps.
// Such a secret is weak anyway; Add reports it so the caller can warn.
// A value is registered without its surrounding white space (a secret read
// from a file usually ends in a newline the agent never prints), and a
// value of several lines (a PEM key) line by line as well, since output is
// redacted a line at a time as it streams.
//
// A Redactor is safe for concurrent use; secrets are only ever added (a
// value once handed to an agent stays redacted for the daemon's life).
package redact

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// MinLen is the shortest secret value Add registers.
const MinLen = 6

// Shapes are the token shapes redacted whatever the profiles say, by the
// name that replaces them.
// Each has the literals one of which every match contains, so that the
// regexp runs only on text that may match (it is far slower than a scan).
var shapes = []struct {
	name string
	lits []string
	re   *regexp.Regexp
}{
	{"github_token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255})`)},
	// The open-ended shapes are bounded, so that a Writer never holds more
	// than a line's worth for one: no real key is longer.
	{"api_key", []string{"sk-"}, regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,250}`)},
	{"aws_access_key", []string{"AKIA", "ASIA"}, regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)},
	{"slack_token", []string{"xox"}, regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,250}`)},
}

// mayMatch reports whether s contains one of lits. Text is checked as it
// is: a []byte is not copied into a string for each literal (the Writer
// calls this on every 64 KiB of a long line).
func mayMatch[T string | []byte](s T, lits []string) bool {
	for _, l := range lits {
		switch v := any(s).(type) {
		case string:
			if strings.Contains(v, l) {
				return true
			}
		case []byte:
			if bytes.Contains(v, []byte(l)) {
				return true
			}
		}
	}
	return false
}

// Redactor replaces secrets in text. The zero value is not usable: New.
type Redactor struct {
	mu       sync.RWMutex
	values   map[string]string // value → name
	sorted   []string          // values, longest first (a secret inside another is found inside it)
	replacer *strings.Replacer // every value by its mark, in one pass, longest first
	maxLen   int
}

// New returns a Redactor that knows only the token shapes.
func New() *Redactor { return &Redactor{values: map[string]string{}} }

// Add registers a secret's value under its name. It returns false, and
// registers nothing, for a value shorter than MinLen once trimmed of white
// space. A nil Redactor ignores it.
func (r *Redactor) Add(name, value string) bool {
	value = strings.TrimSpace(value)
	if r == nil || len(value) < MinLen {
		return false
	}
	vals := []string{value}
	if q := jsonEscape(value); q != value {
		vals = append(vals, q) // as a CLI's JSON events carry it
	}
	if strings.Contains(value, "\n") {
		for line := range strings.Lines(value) {
			if line = strings.TrimSpace(line); len(line) >= MinLen {
				vals = append(vals, line)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, v := range vals {
		if _, ok := r.values[v]; ok {
			continue
		}
		r.values[v] = name
		r.sorted = append(r.sorted, v)
		r.maxLen = max(r.maxLen, len(v))
		added = true
	}
	if added {
		sort.SliceStable(r.sorted, func(i, j int) bool { return len(r.sorted[i]) > len(r.sorted[j]) })
		pairs := make([]string, 0, 2*len(r.sorted))
		for _, v := range r.sorted {
			pairs = append(pairs, v, Mark(r.values[v]))
		}
		r.replacer = strings.NewReplacer(pairs...)
	}
	return true
}

// jsonEscape is s as it appears inside a JSON string written by a
// minimal encoder (JSON.stringify, serde): quote, backslash and control
// characters escaped, nothing else.
func jsonEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Mark is what replaces a secret named name.
func Mark(name string) string { return "[redacted " + name + "]" }

// String returns s with every known secret and token shape replaced. A nil
// Redactor redacts only the shapes.
func (r *Redactor) String(s string) string {
	if s == "" {
		return s
	}
	if r != nil {
		// One pass: a mark put in is never searched again, so a secret
		// that happens to be part of another's mark cannot mangle it.
		// The scan first: most text holds no secret, and Contains is
		// much faster than the Replacer's search.
		r.mu.RLock()
		for _, v := range r.sorted {
			if strings.Contains(s, v) {
				s = r.replacer.Replace(s)
				break
			}
		}
		r.mu.RUnlock()
	}
	for _, sh := range shapes {
		if mayMatch(s, sh.lits) && sh.re.MatchString(s) {
			s = sh.re.ReplaceAllLiteralString(s, Mark(sh.name))
		}
	}
	return s
}

// Bytes is String for a byte slice; b is not modified.
func (r *Redactor) Bytes(b []byte) []byte { return []byte(r.String(string(b))) }

// holdback is how many trailing bytes a Writer keeps back when a line has
// no end yet, so that a secret split across two writes is still found.
func (r *Redactor) holdback() int {
	n := 300 // the longest token shape, github_pat_ with 255 characters, and more
	if r != nil {
		r.mu.RLock()
		n = max(n, r.maxLen)
		r.mu.RUnlock()
	}
	return n
}

// Writer returns a writer that redacts what passes through it to w. It
// writes whole lines as they come; a line longer than 64 KiB is written in
// pieces that overlap the longest secret, so nothing is split unseen.
// Close writes what is left (it does not close w).
func (r *Redactor) Writer(w io.Writer) io.WriteCloser { return &writer{r: r, w: w} }

type writer struct {
	r   *Redactor
	w   io.Writer
	buf []byte
	err error
}

const maxLine = 64 << 10

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		w.flush(i + 1)
	}
	if hold := w.r.holdback(); len(w.buf) > maxLine+hold {
		w.flushLong(hold)
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// flush redacts and writes buf[:n], keeping the rest.
func (w *writer) flush(n int) {
	if n == 0 {
		return
	}
	out := w.r.String(string(w.buf[:n]))
	_, w.err = io.WriteString(w.w, out)
	w.buf = append(w.buf[:0], w.buf[n:]...)
}

// flushLong writes a line with no end in sight, all but its last hold
// bytes. The cut moves back to the start of any secret or token shape that
// spans it, so that one is written whole, redacted, with the next write.
func (w *writer) flushLong(hold int) {
	cut := len(w.buf) - hold
	for _, m := range w.r.matches(w.buf) {
		if m[0] < cut && cut < m[1] {
			cut = m[0]
		}
	}
	w.flush(cut)
}

// matches returns the [start, end) of every secret value and token shape
// in b.
func (r *Redactor) matches(b []byte) [][2]int {
	var out [][2]int
	if r != nil {
		r.mu.RLock()
		for _, v := range r.sorted {
			for off := 0; ; {
				i := bytes.Index(b[off:], []byte(v))
				if i < 0 {
					break
				}
				out = append(out, [2]int{off + i, off + i + len(v)})
				off += i + 1
			}
		}
		r.mu.RUnlock()
	}
	for _, sh := range shapes {
		if !mayMatch(b, sh.lits) {
			continue
		}
		for _, m := range sh.re.FindAllIndex(b, -1) {
			out = append(out, [2]int{m[0], m[1]})
		}
	}
	return out
}

func (w *writer) Close() error {
	if w.err == nil && len(w.buf) > 0 {
		w.flush(len(w.buf))
	}
	return w.err
}
