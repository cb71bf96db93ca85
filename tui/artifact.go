package tui

import (
	"context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

// artifactView is the full-screen, scrollable view of a loop's accepted
// artifact (v): the plan you approve, read before you approve it.
type artifactView struct {
	open    bool
	gen     int
	id      string
	loading bool
	text    string   // escaped for the terminal
	lines   []string // text wrapped to the width of the screen
	wrapW   int
	err     error
	offset  int // first line shown
}

type artifactMsg struct {
	gen  int
	text string
	err  error
}

// openArtifact opens the artifact view on the selected loop, or says in the
// status line why there is nothing to show.
func (m Model) openArtifact() (Model, tea.Cmd) {
	l := m.selected()
	switch {
	case l == nil:
		m.flash = flash{text: "no loop selected", err: true}
		return m, nil
	case l.Artifact == "":
		if _, writes := artifact.FormatOf(l.Type); !writes {
			m.flash = flash{text: fmt.Sprintf("a %s loop changes code and writes no artifact: o shows its agent output", l.Type), err: true}
		} else {
			m.flash = flash{text: fmt.Sprintf("no accepted artifact yet: %s %q is %s", l.Type, title(l), statusText(l.Status, false)), err: true}
		}
		return m, nil
	case m.readArtifact == nil:
		m.flash = flash{text: "this dashboard cannot read artifacts: use loopr show " + l.ID, err: true}
		return m, nil
	}
	m.art = artifactView{open: true, gen: m.art.gen + 1, id: l.ID, loading: true}
	read, ctx, gen, rec := m.readArtifact, m.ctx, m.art.gen, *l
	return m, func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		text, err := read(ctx, rec)
		return artifactMsg{gen: gen, text: text, err: err}
	}
}

// artifactLoaded takes the text the read returned.
func (m *Model) artifactLoaded(msg artifactMsg) {
	if msg.gen != m.art.gen || !m.art.open {
		return
	}
	m.art.loading, m.art.err = false, msg.err
	m.art.text = termsafe.Text(strings.ReplaceAll(msg.text, "\r\n", "\n"))
	m.art.wrapW = 0
	m.wrapArtifact()
}

// wrapArtifact wraps the artifact to the screen's width, once per width.
func (m *Model) wrapArtifact() {
	w := max(m.width, 20) - 2
	if !m.art.open || m.art.wrapW == w {
		return
	}
	m.art.wrapW = w
	text := strings.TrimRight(expandTabs(m.art.text), "\n")
	m.art.lines = strings.Split(ansi.Wrap(text, w, ""), "\n")
	m.scrollArtifact(0)
}

// artifactHeight is how many lines of the artifact fit on the screen.
func (m *Model) artifactHeight() int { return max(m.height-fixedLines, 1) }

// scrollArtifact moves the view by d lines, within the text.
func (m *Model) scrollArtifact(d int) {
	last := max(len(m.art.lines)-m.artifactHeight(), 0)
	m.art.offset = min(max(m.art.offset+d, 0), last)
}

// artifactKey handles a key while the artifact view is open: it scrolls,
// closes, or decides on the plan shown.
func (m Model) artifactKey(k tea.KeyMsg) (Model, tea.Cmd) {
	ks := m.keys
	if d, ok := ks.scroll(k, max(1, m.artifactHeight()-1), len(m.art.lines)); ok {
		m.scrollArtifact(d)
		return m, nil
	}
	switch {
	case key.Matches(k, ks.Close, ks.Artifact):
		m.art.open = false
	case key.Matches(k, ks.Approve):
		return m.startAction(api.ActionApprove)
	case key.Matches(k, ks.Reject):
		return m.startAction(api.ActionReject)
	case key.Matches(k, ks.Iterate):
		return m.startAction(api.ActionIterate)
	case key.Matches(k, ks.Help):
		m.showHelp = true
	case key.Matches(k, ks.Quit):
		return m, tea.Quit
	}
	return m, nil
}

// artifactLines renders the artifact view in h lines: a title, then the text.
func (m *Model) artifactLines(w, h int) []string {
	l := m.loops[m.art.id]
	lines := []string{m.paneTitle("ARTIFACT", l, "", w)}
	switch {
	case m.art.err != nil:
		lines = append(lines, m.st.Error.Render(clip(" ✗ artifact: "+firstLine(m.art.err.Error()), w)))
	case m.art.loading:
		lines = append(lines, m.st.Dim.Render(" reading the accepted artifact…"))
	default:
		end := min(m.art.offset+h-1, len(m.art.lines))
		for _, s := range m.art.lines[m.art.offset:end] {
			lines = append(lines, clip(" "+s, w))
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines[:h]
}

// artifactFooter is the footer while the artifact view is open.
func (m *Model) artifactFooter() promptKeys {
	k := m.keys
	keys := promptKeys{shortly(k.moveHint, "scroll"), shortly(k.PageDown, "page")}
	if l := m.loops[m.art.id]; l != nil && l.Status == loop.AwaitingApproval {
		keys = append(keys, shortly(k.Approve, "approve"), shortly(k.Reject, "reject"), shortly(k.Iterate, "iterate"))
	}
	return append(keys, shortly(k.Close, "close"), k.Quit)
}

// artifactPosition is the status line's right side in the artifact view:
// which lines show, of how many.
func (m *Model) artifactPosition() string {
	n := len(m.art.lines)
	if n == 0 || m.art.loading || m.art.err != nil {
		return ""
	}
	last := min(m.art.offset+m.artifactHeight(), n)
	return fmt.Sprintf("lines %d–%d of %d ", m.art.offset+1, last, n)
}
