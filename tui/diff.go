package tui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

// The diff view (d): full screen, what the selected loop's work changes
// (package changes computes it in the daemon). A list of the changed files
// on top, the selected file's hunks below with a gutter of line numbers
// and +/-, the code highlighted by chroma (lexer by file name). j/k move a
// line cursor, tab and ]/[ go from file to file, c comments on the line
// under the cursor, esc leaves.

// diffView is the diff view's state.
type diffView struct {
	open    bool
	gen     int
	id      string
	loading bool
	d       api.Diff
	err     error
	file    int       // the selected file
	rows    []diffRow // the selected file's rows
	rowsFor int       // the file rows were built for; -1: none
	cursor  int       // the row under the cursor
	offset  int       // the first row shown
}

// diffRow is one row of a file's hunks: a hunk header, a line, or a note.
type diffRow struct {
	kind   string // api.DiffAdd, api.DiffDel, api.DiffContext; "@@" a hunk header; "" a note
	gutter string // line numbers, before the sign
	text   string // tabs expanded, escaped for the terminal
	line   int    // the new file's line (0: none), for a comment
	styled string // text highlighted, once rendered (styleRows)
}

type diffMsg struct {
	gen int
	d   api.Diff
	err error
}

type commentMsg struct {
	where string
	err   error
}

// actionComment is the text prompt of a line comment (modeFeedback).
const actionComment = "comment"

// openDiff opens the diff view on the selected loop and asks the daemon
// for its diff.
func (m Model) openDiff() (Model, tea.Cmd) {
	l := m.selected()
	if l == nil {
		m.flash = flash{text: "no loop selected", err: true}
		return m, nil
	}
	m.diff = diffView{open: true, gen: m.diff.gen + 1, id: l.ID, loading: true, rowsFor: -1}
	if m.client == nil {
		m.diff.loading, m.diff.err = false, errors.New("not connected to the daemon")
		return m, nil
	}
	c, ctx, gen, id := m.client, m.ctx, m.diff.gen, l.ID
	return m, func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		d, err := c.Diff(ctx, id)
		return diffMsg{gen: gen, d: d, err: err}
	}
}

// diffLoaded takes the diff the daemon sent.
func (m *Model) diffLoaded(msg diffMsg) {
	if msg.gen != m.diff.gen || !m.diff.open {
		return
	}
	m.diff.loading, m.diff.err, m.diff.d = false, msg.err, msg.d
	m.selectFile(0)
}

// diffLayout splits the view's h lines: the title, the file list, a rule,
// then the hunks.
func (m *Model) diffLayout() (list, body int) {
	h := max(m.height-fixedLines, 1) + 1
	n := len(m.diff.d.Files)
	list = min(n, max(3, (h-2)/4))
	if m.diff.d.Truncated {
		list++ // the note that the diff was cut
	}
	return list, max(h-2-list, 1)
}

// selectFile shows file i (within the list) from its first row.
func (m *Model) selectFile(i int) {
	v := &m.diff
	v.file = min(max(i, 0), max(len(v.d.Files)-1, 0))
	v.rows, v.rowsFor = nil, -1
	if len(v.d.Files) > 0 {
		v.rows, v.rowsFor = fileRows(v.d.Files[v.file]), v.file
	}
	v.cursor, v.offset = 0, 0
	m.moveDiffCursor(0)
}

// moveDiffCursor moves the cursor by d rows and keeps it on screen, then
// highlights the rows shown.
func (m *Model) moveDiffCursor(d int) {
	v := &m.diff
	_, body := m.diffLayout()
	v.cursor = min(max(v.cursor+d, 0), max(len(v.rows)-1, 0))
	if v.cursor < v.offset {
		v.offset = v.cursor
	}
	if v.cursor >= v.offset+body {
		v.offset = v.cursor - body + 1
	}
	v.offset = min(max(v.offset, 0), max(len(v.rows)-body, 0))
	m.styleRows(v.offset, v.offset+body)
}

// fileRows turns a file's hunks into rows, numbered in a gutter as wide
// as its largest line number.
func fileRows(f api.DiffFile) []diffRow {
	switch {
	case f.Binary:
		return []diffRow{{text: "binary file: not shown (" + f.Status + ")"}}
	case len(f.Hunks) == 0:
		return []diffRow{{text: fileNote(f)}}
	}
	top := 0
	for _, h := range f.Hunks {
		top = max(top, h.OldStart+h.OldLines, h.NewStart+h.NewLines)
	}
	nw := max(3, len(strconv.Itoa(top)))
	num := func(n int) string {
		if n == 0 {
			return strings.Repeat(" ", nw)
		}
		return fmt.Sprintf("%*d", nw, n)
	}
	var rows []diffRow
	for _, h := range f.Hunks {
		rows = append(rows, diffRow{kind: "@@", text: termsafe.Line(h.Header)})
		for _, l := range h.Lines {
			text := termsafe.Line(expandTabs(strings.TrimSuffix(l.Text, "\r")))
			rows = append(rows, diffRow{kind: l.Kind, gutter: num(l.OldLine) + " " + num(l.NewLine), text: text, line: l.NewLine})
		}
	}
	return rows
}

// fileNote says what happened to a file with no hunks to show.
func fileNote(f api.DiffFile) string {
	switch f.Status {
	case api.DiffRenamed, api.DiffCopied:
		return f.Status + " from " + termsafe.Line(f.OldPath) + ", content unchanged"
	case api.DiffMode:
		return "mode " + f.OldMode + " → " + f.NewMode
	case api.DiffAdded:
		return "new empty file"
	case api.DiffDeleted:
		return "deleted empty file"
	}
	return "no text changes"
}

// styleRows highlights rows [from, to) of the selected file that are not
// yet: the code with chroma's lexer for the file's name, its tokens
// coloured through lipgloss (tokenColours). Without colour, the text stays
// plain.
func (m *Model) styleRows(from, to int) {
	v := &m.diff
	if v.rowsFor < 0 {
		return
	}
	var lexer chroma.Lexer
	for i := max(from, 0); i < min(to, len(v.rows)); i++ {
		r := &v.rows[i]
		if r.styled != "" || r.text == "" {
			continue
		}
		if r.kind == "@@" || r.kind == "" || m.noColor {
			r.styled = r.text
			continue
		}
		if lexer == nil {
			lexer = fileLexer(v.d.Files[v.file].Path)
		}
		r.styled = m.highlight(lexer, r.text)
	}
}

// fileLexer is chroma's lexer for a file name, else plain text.
func fileLexer(path string) chroma.Lexer {
	l := lexers.Match(path[strings.LastIndexByte(path, '/')+1:])
	if l == nil {
		l = lexers.Fallback
	}
	return chroma.Coalesce(l)
}

// tokenColours colours chroma's token types (a type, its subcategory or
// its category), in 256-colour codes lipgloss fits to the terminal's
// profile; other tokens keep the terminal's own colour. Chosen to read on
// dark and light backgrounds alike.
var tokenColours = []struct {
	t      chroma.TokenType
	colour string
}{
	{chroma.Comment, "244"},
	{chroma.LiteralString, "143"},
	{chroma.LiteralNumber, "141"},
	{chroma.Keyword, "39"},
	{chroma.NameFunction, "71"},
	{chroma.NameClass, "71"},
	{chroma.NameBuiltin, "38"},
	{chroma.NameTag, "168"},
	{chroma.NameAttribute, "71"},
	{chroma.Operator, "168"},
}

// tokenColour is the colour of tokens of type t, "" for none.
func tokenColour(t chroma.TokenType) string {
	for _, tc := range tokenColours {
		if t == tc.t || t.SubCategory() == tc.t || t.Category() == tc.t {
			return tc.colour
		}
	}
	return ""
}

// highlight colours one line of code. A line is lexed alone: a hunk is a
// fragment anyway, so a block comment or string that began before it
// shows as code.
func (m *Model) highlight(lexer chroma.Lexer, text string) string {
	it, err := lexer.Tokenise(nil, text)
	if err != nil {
		return text
	}
	var b strings.Builder
	for _, tok := range it.Tokens() {
		v := strings.TrimRight(tok.Value, "\n")
		if c := tokenColour(tok.Type); c != "" && v != "" {
			v = m.st.r.NewStyle().Foreground(lipgloss.Color(c)).Render(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

// diffKey handles a key while the diff view is open.
func (m Model) diffKey(k tea.KeyMsg) (Model, tea.Cmd) {
	ks := m.keys
	_, body := m.diffLayout()
	if d, ok := ks.scroll(k, max(1, body-1), len(m.diff.rows)); ok {
		m.moveDiffCursor(d)
		return m, nil
	}
	switch {
	case key.Matches(k, ks.NextFile):
		m.selectFile(m.diff.file + 1)
	case key.Matches(k, ks.PrevFile):
		m.selectFile(m.diff.file - 1)
	case key.Matches(k, ks.Comment):
		return m.startComment()
	case key.Matches(k, ks.Close, ks.Diff):
		m.diff.open = false
	case key.Matches(k, ks.Help):
		m.showHelp = true
	case key.Matches(k, ks.Quit):
		return m, tea.Quit
	}
	return m, nil
}

// diffTarget is the file and new-side line under the cursor, ok false
// (with why) when it is not a line that can take a comment.
func (m *Model) diffTarget() (path string, line int, why string) {
	v := &m.diff
	if len(v.rows) == 0 || v.rowsFor < 0 {
		return "", 0, "no line to comment on"
	}
	r := v.rows[v.cursor]
	switch {
	case r.kind == "@@" || r.kind == "":
		return "", 0, "move to a line of code (j/k) to comment on it"
	case r.line == 0:
		return "", 0, "a removed line is not in the new version: comment on a line around it"
	}
	return v.d.Files[v.file].Path, r.line, ""
}

// startComment opens the one-line prompt of a comment on the line under
// the cursor.
func (m Model) startComment() (Model, tea.Cmd) {
	path, line, why := m.diffTarget()
	switch {
	case why != "":
		m.flash = flash{text: why, err: true}
		return m, nil
	case m.comment == nil:
		m.flash = flash{text: "this dashboard cannot send comments: use loopr comment " + loop.ShortID(m.diff.id) + " " + termsafe.Line(path) + ":" + strconv.Itoa(line) + " TEXT", err: true}
		return m, nil
	}
	m.mode = modeFeedback
	m.confirm = confirmation{action: actionComment, id: m.diff.id, prompt: path + ":" + strconv.Itoa(line)}
	m.input.Prompt = "comment on " + termsafe.Line(path) + ":" + strconv.Itoa(line) + ": "
	if lipgloss.Width(m.input.Prompt) > m.width/2 {
		m.input.Prompt = "comment on line " + strconv.Itoa(line) + ": "
	}
	m.input.Placeholder = "what should change here? (enter: send)"
	m.input.SetValue("")
	m.sizeInput()
	return m, m.input.Focus()
}

// commentKey handles a key while the comment prompt is open.
func (m Model) commentKey(k tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Accept):
		text := strings.TrimSpace(m.input.Value())
		if text == "" {
			m.flash = flash{text: "the comment is empty: write it, or esc", err: true}
			return m, nil
		}
		m.mode = modeNormal
		m.input.Blur()
		path, line, _ := m.diffTarget()
		send, ctx, id, where := m.comment, m.ctx, m.diff.id, m.confirm.prompt
		return m, func() tea.Msg {
			ctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			return commentMsg{where: where, err: send(ctx, id, path, line, text)}
		}
	case k.Type == tea.KeyEsc:
		m.mode = modeNormal
		m.input.Blur()
		m.flash = flash{text: "comment cancelled"}
		return m, nil
	}
	m.flash = flash{}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

// commented says how sending a comment went.
func (m *Model) commented(msg commentMsg) {
	if msg.err != nil {
		m.flash = flash{text: "comment on " + termsafe.Line(msg.where) + ": " + firstLine(msg.err.Error()), err: true}
		return
	}
	m.flash = flash{text: "comment sent on " + termsafe.Line(msg.where)}
}

// diffLines renders the diff view in h lines: a title, the file list, a
// rule and the selected file's rows.
func (m *Model) diffLines(w, h int) []string {
	v := &m.diff
	l := m.loops[v.id]
	extra := ""
	if !v.loading && v.err == nil {
		extra = fmt.Sprintf("+%d −%d  %s", v.d.Added, v.d.Removed, diffWhat(v.d))
	}
	lines := []string{m.paneTitle("DIFF", l, termsafe.Line(extra), w)}
	switch {
	case v.err != nil:
		lines = append(lines, m.st.Error.Render(clip(" ✗ diff: "+firstLine(v.err.Error()), w)))
	case v.loading:
		lines = append(lines, m.st.Dim.Render(" loading…"))
	case len(v.d.Files) == 0:
		lines = append(lines, m.st.Dim.Render(clip(" no changes ("+termsafe.Line(v.d.Command)+")", w)))
	default:
		list, body := m.diffLayout()
		lines = append(lines, m.fileList(w, list)...)
		lines = append(lines, m.st.Rule.Render(strings.Repeat("─", w)))
		lines = append(lines, m.rowLines(w, body)...)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines[:h]
}

// diffWhat says what the diff compares, in a few words.
func diffWhat(d api.Diff) string {
	switch d.Kind {
	case api.DiffTask:
		return d.To.Branch + " vs " + d.From.Branch
	case api.DiffMerged:
		return "merged " + shortCommit(d.To.Commit) + " into " + d.From.Branch
	}
	if d.From.Branch != "" {
		return d.To.Branch + " vs " + d.From.Branch + "@" + shortCommit(d.From.Commit)
	}
	return d.To.Branch + " vs " + shortCommit(d.From.Commit)
}

func shortCommit(c string) string {
	if len(c) > 8 {
		return c[:8]
	}
	return c
}

// fileList renders n lines of the file list, the selected file kept in
// view, then the note of a cut diff.
func (m *Model) fileList(w, n int) []string {
	v := &m.diff
	var out []string
	if v.d.Truncated {
		n--
	}
	first := min(max(v.file-n/2, 0), max(len(v.d.Files)-n, 0))
	for i := first; i < min(first+n, len(v.d.Files)); i++ {
		f := v.d.Files[i]
		name := termsafe.Line(f.Path)
		if f.OldPath != "" {
			name = termsafe.Line(f.OldPath) + " → " + name
		}
		counts := fmt.Sprintf("+%d −%d", f.Added, f.Removed)
		if f.Binary {
			counts = "binary"
		}
		mark := "  "
		if i == v.file {
			mark = "▸ "
		}
		left := fmt.Sprintf("%s%s %s", mark, fileLetter(f.Status), name)
		right := fmt.Sprintf(" %s  %d/%d ", counts, i+1, len(v.d.Files))
		line := fit(left, w-ansi.StringWidth(right)) + right
		if i == v.file {
			line = m.st.Selected.Render(line)
		}
		out = append(out, line)
	}
	if v.d.Truncated {
		out = append(out, m.st.Warn.Render(clip(fmt.Sprintf(" ! diff cut at %d lines; see %s", v.d.Cut, termsafe.Line(v.d.Command)), w)))
	}
	return out
}

// fileLetter is git's one-letter status of a file.
func fileLetter(status string) string {
	switch status {
	case api.DiffAdded:
		return "A"
	case api.DiffDeleted:
		return "D"
	case api.DiffRenamed:
		return "R"
	case api.DiffCopied:
		return "C"
	}
	return "M"
}

// rowLines renders h rows of the selected file from the offset: gutter,
// sign and code, cut to w cells (never wrapped); the cursor's row in
// reverse.
func (m *Model) rowLines(w, h int) []string {
	v := &m.diff
	var out []string
	for i := v.offset; i < min(v.offset+h, len(v.rows)); i++ {
		r := v.rows[i]
		text := r.styled
		if text == "" {
			text = r.text
		}
		mark := " "
		if i == v.cursor {
			mark = "›"
		}
		var line string
		switch r.kind {
		case "@@":
			line = m.st.PaneLabel.Render(ansi.Truncate(mark+text, w, "…"))
		case "":
			line = m.st.Dim.Render(ansi.Truncate(mark+text, w, "…"))
		default:
			sign, style := " ", m.st.Dim
			switch r.kind {
			case api.DiffAdd:
				sign, style = "+", m.st.DiffAdd
			case api.DiffDel:
				sign, style = "-", m.st.DiffDel
			}
			gutter := mark + r.gutter + " " + sign + " "
			line = style.Render(gutter) + ansi.Truncate(text, max(w-ansi.StringWidth(gutter), 1), "…")
		}
		if i == v.cursor {
			line = m.st.Selected.Render(ansi.Strip(line)) // the cursor reads plainly in any profile
		}
		out = append(out, line)
	}
	return out
}

// diffFooter is the footer while the diff view is open.
func (m *Model) diffFooter() promptKeys {
	k := m.keys
	return promptKeys{shortly(k.moveHint, "line"), shortly(k.PageDown, "page"), shortly(k.NextFile, "file"),
		shortly(k.Comment, "comment"), shortly(k.Close, "close"), k.Quit}
}

// diffPosition is the status line's right side in the diff view.
func (m *Model) diffPosition() string {
	v := &m.diff
	if v.loading || v.err != nil || len(v.rows) == 0 {
		return ""
	}
	return fmt.Sprintf("file %d/%d · line %d/%d ", v.file+1, len(v.d.Files), v.cursor+1, len(v.rows))
}
