package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/loopr-dev/loopr/transcript"
)

// The output pane (o) shows the agent's log rendered (package transcript:
// the words, a line per tool call, results cut short, errors, the final
// result) or, after R, as it was. The pane reads the log's tail each
// second; only what is new since the last read is rendered, and only the
// new lines are styled and wrapped: a frame draws the last screenful.

// maxOutputLines bounds the rendered lines the pane keeps.
const maxOutputLines = 2000

// anchorBytes is how much of the previous tail (at most its second half)
// is looked for in the next one to find where the new bytes start.
const anchorBytes = 256

// outputView is the rendered transcript of one loop's log.
type outputView struct {
	r     *transcript.Renderer
	tail  string            // the last tail of agent.log read
	lines []transcript.Line // rendered so far, oldest first
	width int               // of shown; 0: to build
	shown []string          // lines styled and wrapped at width
	// partial is the log's last line while it has no end yet, when it is
	// not an event: shown below the rest (the renderer holds it).
	partial string
}

// feed takes the latest tail of agent.log (its last outputBytes at most)
// and renders what it adds to the previous one. A tail that does not
// continue the previous one (a new iteration, or more than outputBytes
// written in one poll) starts over.
func (v *outputView) feed(tail, preset, dir string, st *styles) {
	if tail == v.tail && v.r != nil {
		return
	}
	delta, ok := continuation(v.tail, tail)
	if !ok || v.r == nil {
		*v = outputView{r: transcript.New(preset)}
		v.r.Dir = dir
		delta = tail
		if len(tail) >= outputBytes { // cut at the front: its first line is partial
			_, delta, _ = strings.Cut(tail, "\n")
		}
	}
	v.tail = tail
	v.add(v.r.Feed([]byte(delta)), st)
	v.partial = ""
	if i := strings.LastIndexByte(tail, '\n'); i < len(tail)-1 && !strings.HasPrefix(strings.TrimSpace(tail[i+1:]), "{") {
		v.partial = tail[i+1:]
	}
}

// continuation is what cur adds to prev, when cur continues it.
func continuation(prev, cur string) (string, bool) {
	if prev == "" {
		return "", false
	}
	if strings.HasPrefix(cur, prev) {
		return cur[len(prev):], true
	}
	a := prev[len(prev)-min(anchorBytes, len(prev)/2):]
	if i := strings.LastIndex(cur, a); i >= 0 {
		return cur[i+len(a):], true
	}
	return "", false
}

// add appends rendered lines, styling them at once when the width is
// known; past maxOutputLines the older half goes (and the rest is styled
// again at the next frame: rarely).
func (v *outputView) add(lines []transcript.Line, st *styles) {
	v.lines = append(v.lines, lines...)
	if len(v.lines) > maxOutputLines {
		v.lines = append([]transcript.Line(nil), v.lines[len(v.lines)-maxOutputLines/2:]...)
		v.width, v.shown = 0, nil
		return
	}
	if v.width > 0 {
		for _, l := range lines {
			v.shown = append(v.shown, styleLine(st, l, v.width)...)
		}
	}
}

// last returns the last h display lines at width w.
func (v *outputView) last(st *styles, w, h int) []string {
	if v.width != w {
		v.width, v.shown = w, v.shown[:0]
		for _, l := range v.lines {
			v.shown = append(v.shown, styleLine(st, l, w)...)
		}
	}
	if v.partial != "" && h > 0 {
		l := styleLine(st, transcript.Render("", []byte(v.partial))[0], w)
		return append(append([]string(nil), v.shown[max(0, len(v.shown)-(h-1)):]...), l[0])
	}
	return v.shown[max(0, len(v.shown)-h):]
}

// styleLine is one rendered line as the pane shows it: the words wrapped,
// everything else on one line cut to w.
func styleLine(st *styles, l transcript.Line, w int) []string {
	wrap := func(s string, style func(...string) string, indent string) []string {
		var out []string
		for _, p := range strings.Split(ansi.Wrap(s, max(w-1-len(indent), 10), ""), "\n") {
			out = append(out, clip(" "+indent+style(p), w))
		}
		return out
	}
	switch l.Kind {
	case transcript.Text:
		return wrap(l.Text, fmtPlain, "")
	case transcript.Thinking:
		return wrap(l.Text, st.Dim.Render, "· ")
	case transcript.Error:
		return wrap("✗ "+l.Text, st.Error.Render, "")
	case transcript.Tool:
		s := " " + st.OutTool.Render("▸ "+l.Tool)
		if l.Text != "" {
			s += "  " + l.Text
		}
		return []string{clip(s, w)}
	case transcript.Output, transcript.More:
		if l.Err {
			return []string{clip(" "+st.Error.Render("  ✗ ")+st.Error.Render(l.Text), w)}
		}
		return []string{clip(" "+st.Dim.Render("  │ "+l.Text), w)}
	case transcript.Info:
		return []string{clip(" "+st.Dim.Render(l.String()), w)}
	case transcript.Done:
		if l.Err {
			return []string{clip(" "+st.Error.Render(l.String()), w)}
		}
		return []string{clip(" "+st.OutDone.Render(l.String()), w)}
	}
	return []string{clip(" "+l.Text, w)}
}

func fmtPlain(s ...string) string { return strings.Join(s, " ") }

func (m *Model) outputLines(w, h int) []string {
	l := m.loops[m.out.id]
	mode := "rendered · R raw"
	if m.outRaw {
		mode = "raw · R rendered"
	}
	extra := "live, every 1s · " + mode
	if l != nil {
		extra = "iteration " + strconv.Itoa(l.Iteration) + " · " + extra
	}
	lines := []string{m.paneTitle("OUTPUT", l, extra, w)}
	switch {
	case m.out.err != nil:
		return append(lines, m.st.Error.Render(clip(" ✗ output: "+m.out.err.Error(), w)))
	case m.out.loading && m.out.text == "":
		return append(lines, m.st.Dim.Render(" reading agent.log…"))
	case strings.TrimSpace(m.out.text) == "":
		return append(lines, m.st.Dim.Render(" no output yet"))
	}
	room := h - 1
	if !m.outRaw && m.out.view != nil {
		return append(lines, m.out.view.last(&m.st, w, room)...)
	}
	text := strings.TrimRight(ansi.Strip(m.out.text), "\n")
	all := strings.Split(text, "\n")
	if len(all) > room {
		all = all[len(all)-room:]
	}
	for _, s := range all {
		lines = append(lines, clip(" "+expandTabs(strings.TrimRight(s, "\r")), w))
	}
	return lines
}
