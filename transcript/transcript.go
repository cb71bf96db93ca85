// Package transcript turns the structured output of the agent CLIs that
// loopr drives (package preset: claude's stream-json, codex exec --json,
// gemini's stream-json, opencode's json events) into lines a person reads:
// the assistant's words, each tool call on one line with its name and a
// short summary of its arguments ("▸ Bash  go test ./..."), a tool's result
// cut to a few lines, errors marked, and the final result with its cost,
// tokens and duration.
//
// A Renderer works incrementally, as `loopr logs -f` and the TUI's output
// pane receive the stream: Feed takes bytes as they come and returns the
// lines completed so far, holding a partial line until its end; Flush ends
// the stream. The format comes from the preset's name, else from the first
// events that say which CLI wrote them. A line that is not an event (a
// warning, a stack trace, a wrapper script's echo) passes through as it was.
//
// Hostile input is expected: agents write these logs. Nothing here panics,
// every text is cleaned of terminal escapes (colours stripped, other
// controls shown escaped, as package termsafe does), and memory is bounded:
// a line longer than MaxLine is not held, it is counted and cut.
//
// The package is pure: no I/O beyond the bytes it is given. Wrapping long
// text to a width is the caller's business.
package transcript

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/loopr-dev/loopr/internal/termsafe"
)

// Limits on what is held and shown.
const (
	// MaxLine is the longest line decoded: a longer one is dropped as it
	// arrives and shown as one line saying how long it was.
	MaxLine = 1 << 20
	// ResultLines is how many lines of a tool's result are shown; the
	// rest are counted ("… (N more lines)").
	ResultLines = 3
	// MaxWidth is the longest line of a tool's result or arguments shown,
	// in runes; longer ones end in "…". Other lines are cut at MaxText.
	MaxWidth = 240
	MaxText  = 4096
	// maxPending bounds the assistant text held while it streams in
	// pieces (gemini's deltas) before it is shown anyway.
	maxPending = 64 << 10
	// maxOpen bounds the tool calls remembered until their result.
	maxOpen = 1024
)

// Kind says what a Line is, for styling.
type Kind uint8

// The kinds of line.
const (
	Raw      Kind = iota // not an event (or one of a type not known here): the line as it was, escapes neutralised
	Text                 // a line of the assistant's words
	Thinking             // a line of the model's reasoning
	Tool                 // a tool call: Line.Tool its name, Text a summary of its arguments
	Output               // a line of a tool's result (Err: of a failed call)
	More                 // the count of a result's lines not shown
	Error                // an error the CLI reported
	Info                 // the session: model, directory
	Done                 // the final result (Err: failed): cost, tokens, duration
)

// Line is one line to show. Text is one line without newline or control
// character: colour sequences are stripped, every other control is shown
// escaped (\x1b[2J) as package termsafe does.
type Line struct {
	Kind Kind
	Tool string // Tool: the tool's name
	Text string
	Err  bool // Output, More: the call failed; Done: the run failed
}

// String is the line as plain text, the way `loopr logs` prints it.
func (l Line) String() string {
	switch l.Kind {
	case Tool:
		if l.Text == "" {
			return "▸ " + l.Tool
		}
		return "▸ " + l.Tool + "  " + l.Text
	case Output, More:
		bar := "  │ "
		if l.Err {
			bar = "  ✗ "
		}
		return strings.TrimRight(bar+l.Text, " ")
	case Thinking:
		return "· " + l.Text
	case Error:
		return "✗ " + l.Text
	case Info:
		return "● " + l.Text
	case Done:
		if l.Err {
			return "✗ " + l.Text
		}
		return "✓ " + l.Text
	}
	return l.Text
}

// Known reports whether the named preset's output can be rendered: the
// CLIs' structured formats. Anything else (a custom command, "") is
// sniffed from its first events by New.
func Known(preset string) bool { return formatOf(preset) != unknown }

type format uint8

const (
	unknown format = iota
	claude
	codex
	gemini
	opencode
)

func formatOf(preset string) format {
	switch preset {
	case "claude":
		return claude
	case "codex":
		return codex
	case "gemini":
		return gemini
	case "opencode":
		return opencode
	}
	return unknown
}

// Renderer renders one stream. The zero value is not usable: call New.
type Renderer struct {
	format format // the stream's, once an event said which
	hint   format // the preset's: for events that do not say
	// Dir, when set, is cut from the start of file paths in tool calls
	// (the agent's working directory); claude's init event sets it too.
	Dir string

	buf     []byte // the partial line
	dropped int64  // > 0: the current line is longer than MaxLine; its length so far
	out     []Line // lines of the current Feed

	pending strings.Builder // assistant text streaming in pieces (gemini)
	started map[string]bool // codex: the commands shown at their start, their result to come
	steps   stepSum         // opencode: what the steps reported so far
	said    string          // the assistant's last words (a failed result repeats them)
}

// New returns a Renderer for the output of the named preset ("claude",
// "codex", "gemini", "opencode"). The first event whose shape names its
// CLI decides the format (a profile may have changed its preset since the
// run, a custom command may run one of these CLIs); the preset's counts
// for the events before it that do not say. With another name and no such
// event, lines pass through.
func New(preset string) *Renderer {
	return &Renderer{hint: formatOf(preset), started: map[string]bool{}}
}

// Render renders a whole output at once.
func Render(preset string, out []byte) []Line {
	r := New(preset)
	lines := r.Feed(out)
	return append(lines, r.Flush()...)
}

// Feed reads the next bytes of the stream and returns the lines they
// complete. A partial line is held (at most MaxLine bytes) until its end.
func (r *Renderer) Feed(p []byte) []Line {
	r.out = nil
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		r.hold(chunk)
		if i < 0 {
			break
		}
		p = p[i+1:]
		r.endLine()
	}
	return r.out
}

// Flush ends the stream: the partial line and any text held are returned.
func (r *Renderer) Flush() []Line {
	r.out = nil
	if len(r.buf) > 0 || r.dropped > 0 {
		r.endLine()
	}
	r.flushText()
	return r.out
}

// hold adds a piece of the current line, or counts it when the line is
// too long to keep.
func (r *Renderer) hold(chunk []byte) {
	switch {
	case r.dropped > 0:
		r.dropped += int64(len(chunk))
	case len(r.buf)+len(chunk) > MaxLine:
		r.dropped = int64(len(r.buf) + len(chunk))
		r.buf = r.buf[:0]
	default:
		r.buf = append(r.buf, chunk...)
	}
}

func (r *Renderer) endLine() {
	if r.dropped > 0 {
		r.flushText()
		r.emit(Line{Kind: Raw, Text: fmt.Sprintf("… (a line of %s, too long to show)", size(r.dropped))})
		r.dropped = 0
		return
	}
	line := bytes.TrimRight(r.buf, "\r")
	r.line(line)
	r.buf = r.buf[:0]
	if cap(r.buf) > 64<<10 {
		r.buf = nil // one long line does not keep its buffer
	}
}

// line renders one whole line.
func (r *Renderer) line(line []byte) {
	t := bytes.TrimSpace(line)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' || !r.event(t) {
		r.flushText()
		r.emit(Line{Kind: Raw, Text: termsafe.Line(expandTabs(stripColours(string(line))))})
	}
}

// event renders a JSON object line; false: it is not an event of a known
// format (the caller shows it as it was).
func (r *Renderer) event(b []byte) bool {
	f := r.format
	if f == unknown {
		r.format = sniff(b)
		if f = r.format; f == unknown {
			f = r.hint
		}
	}
	switch f {
	case claude:
		return r.claude(b)
	case codex:
		return r.codex(b)
	case gemini:
		return r.gemini(b)
	case opencode:
		return r.opencode(b)
	}
	return false
}

// sniff names the format of an event line, unknown when it says nothing.
func sniff(b []byte) format {
	var p struct {
		Type      string         `json:"type"`
		Timestamp jsontext.Value `json:"timestamp"`
		SessionID jsontext.Value `json:"session_id"`
		OCSession jsontext.Value `json:"sessionID"`
		Part      jsontext.Value `json:"part"`
		ToolName  jsontext.Value `json:"tool_name"`
	}
	if decode(b, &p) != nil {
		return unknown
	}
	switch {
	case strings.HasPrefix(p.Type, "thread.") || strings.HasPrefix(p.Type, "turn.") || strings.HasPrefix(p.Type, "item."):
		return codex
	case len(p.OCSession) > 0 || len(p.Part) > 0:
		return opencode
	case len(p.Timestamp) > 0 && p.Timestamp.Kind() == '"' && (p.Type == "init" || p.Type == "message" || p.Type == "tool_result" || len(p.ToolName) > 0):
		return gemini
	case len(p.SessionID) > 0 && (p.Type == "system" || p.Type == "assistant" || p.Type == "user" || p.Type == "result"):
		return claude
	}
	return unknown
}

// decode unmarshals one event, tolerant of what agents write: invalid
// UTF-8 and duplicate names are accepted, unknown names ignored.
func decode(b []byte, v any) error {
	return json.Unmarshal(b, v, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
}

func (r *Renderer) emit(l Line) { r.out = append(r.out, l) }

// text emits the assistant's words (or reasoning, as kind), a line each;
// runs of blank lines become one, and none starts or ends the block.
func (r *Renderer) text(kind Kind, s string) {
	r.flushText()
	if kind == Text {
		r.said = strings.TrimSpace(s)
	}
	blank := false
	first := true
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		l = cleanTo(l, MaxText)
		if strings.TrimSpace(l) == "" {
			blank = true
			continue
		}
		if blank && !first {
			r.emit(Line{Kind: kind})
		}
		blank, first = false, false
		r.emit(Line{Kind: kind, Text: l})
	}
}

// stream adds a piece of streaming assistant text: whole lines are shown
// as they complete, the rest is held (bounded) until the next event.
func (r *Renderer) stream(s string) {
	r.pending.WriteString(s)
	p := r.pending.String()
	i := strings.LastIndexByte(p, '\n')
	if i < 0 && len(p) < maxPending {
		return
	}
	if i < 0 {
		i = len(p) - 1
	}
	done, rest := p[:i+1], p[i+1:]
	r.pending.Reset()
	r.pending.WriteString(rest)
	r.emitText(done)
}

func (r *Renderer) flushText() {
	if r.pending.Len() == 0 {
		return
	}
	s := r.pending.String()
	r.pending.Reset()
	r.emitText(s)
}

// emitText is text without the flush (the caller holds the rest).
func (r *Renderer) emitText(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		l = cleanTo(l, MaxText)
		if strings.TrimSpace(l) == "" && (len(r.out) == 0 || r.out[len(r.out)-1].Kind != Text || r.out[len(r.out)-1].Text == "") {
			continue
		}
		r.emit(Line{Kind: Text, Text: l})
	}
}

// result emits a tool's result: its first ResultLines lines, then how many
// more there were. failed marks them as the output of a failed call.
func (r *Renderer) result(s string, failed bool) {
	s = strings.Trim(s, "\n")
	if strings.TrimSpace(s) == "" {
		return
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if i == ResultLines && len(lines) > ResultLines+1 {
			r.emit(Line{Kind: More, Err: failed, Text: fmt.Sprintf("… (%d more lines)", len(lines)-i)})
			return
		}
		r.emit(Line{Kind: Output, Err: failed, Text: clean(l)})
	}
}

// clean makes s one safe line: colours and other escape sequences
// stripped, tabs expanded, what remains of controls escaped, and cut to
// MaxWidth runes.
func clean(s string) string { return cleanTo(s, MaxWidth) }

// cleanTo is clean with another length.
func cleanTo(s string, width int) string {
	if len(s) > width*4 {
		i := width * 4 // enough for width runes of any size
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	s = termsafe.Line(strings.TrimRight(expandTabs(stripColours(s)), " \r"))
	if utf8.RuneCountInString(s) > width {
		rs := []rune(s)
		s = string(rs[:width-1]) + "…"
	}
	return s
}

// stripColours removes the colour and style sequences (SGR: ESC [ … m)
// that CLIs print: harmless, and noise once escaped. Every other escape
// sequence stays, for termsafe to show escaped.
func stripColours(s string) string {
	if strings.IndexByte(s, 0x1b) < 0 {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			break
		}
		j := i + 2
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';' || s[j] == ':') {
			j++
		}
		if j < len(s) && s[j] == 'm' {
			b.WriteString(s[:i]) // drop ESC [ … m
			s = s[j+1:]
			continue
		}
		b.WriteString(s[:i+2]) // another sequence: kept, escaped later
		s = s[i+2:]
	}
	b.WriteString(s)
	return b.String()
}

func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

// size reads a byte count: 512 B, 3.4 kB, 105.0 MB.
func size(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
