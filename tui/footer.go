// The dashboard's bottom lines: the status line, a flash message and the
// footer's key hints.

package tui

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/loopr-dev/loopr/loop"
)

// statusLine is the line above the footer: a prompt's input (confirm,
// filter, feedback), else a flash message, the daemon's warning or the
// caller's done hint, else what is shown (tree, flat, artifact, diff).
func (m *Model) statusLine(w int) string {
	st := m.st
	switch m.mode {
	case modeConfirm:
		// The question gives way to its answer keys, never the reverse.
		return " " + st.Prompt.Render(clip(m.confirm.prompt, max(w-5, 1))) + " " + st.HelpKey.Render("y") + st.HelpDesc.Render("/") + st.HelpKey.Render("n")
	case modeFilter:
		return clip(" "+m.input.View()+st.Dim.Render(fmt.Sprintf("   %d shown", len(m.rows))), w)
	case modeFeedback:
		line := " " + m.input.View()
		if m.flash.text != "" {
			line += "  " + st.Error.Render(m.flash.text)
		}
		return clip(line, w)
	}
	// Once everything has settled, the caller's hint (the demo's "press q
	// for the summary") says more than the last notification did.
	if m.doneHint != "" && m.settled() && (m.flash.text == "" || m.flash.note) {
		return clip(" "+st.Info.Render(m.doneHint), w)
	}
	if m.flash.text != "" {
		if m.flash.err {
			return clip(" "+st.Error.Render("✗ "+m.flash.text), w)
		}
		return clip(" "+st.Info.Render(m.flashText(w-1)), w)
	}
	if m.haveStatus && m.status.Warning != "" {
		return clip(" "+st.Warn.Render("! "+m.status.Warning), w)
	}
	if m.doneHint != "" && m.settled() {
		return clip(" "+st.Info.Render(m.doneHint), w)
	}
	left := " tree"
	if m.art.open || m.diff.open {
		what, id, right := " artifact", m.art.id, m.artifactPosition()
		if m.diff.open {
			what, id, right = " diff", m.diff.id, m.diffPosition()
		}
		left = what
		if l := m.loops[id]; l != nil {
			left += fmt.Sprintf(" of %s %q", l.Type, title(l))
		}
		if pad := w - ansi.StringWidth(right); ansi.StringWidth(left) > pad-1 {
			left = clip(left, max(pad-1, 1))
		}
		return st.Dim.Render(left + strings.Repeat(" ", max(w-ansi.StringWidth(left)-ansi.StringWidth(right), 1)) + right)
	}
	if m.flat {
		left = " flat: waiting loops in scheduling order"
		if m.plan.Fairness.Enabled {
			left += " (fairness: approximate, w asks the daemon)"
		}
	}
	if m.filter != "" {
		left += "   filter /" + m.filter
	}
	right := ""
	if len(m.rows) > 0 {
		right = fmt.Sprintf("%d/%d ", m.cursor+1, len(m.rows))
	}
	pad := w - ansi.StringWidth(left) - ansi.StringWidth(right)
	if pad < 1 {
		return st.Dim.Render(clip(left, w))
	}
	return st.Dim.Render(left + strings.Repeat(" ", pad) + right)
}

// flashText is the flash message with the titles of the loops it names,
// as many as fit in w cells; the rest are counted.
func (m *Model) flashText(w int) string {
	text := m.flash.text
	var titles []string
	unknown := 0
	for _, id := range m.flash.names {
		if l := m.loops[id]; l != nil {
			titles = append(titles, fmt.Sprintf("%q", title(l)))
		} else {
			unknown++ // not on the stream yet
		}
	}
	if len(titles) == 0 {
		return text
	}
	more := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(" and %d more", n)
	}
	shown := text + ": " + titles[0]
	if ansi.StringWidth(shown+more(len(titles)-1+unknown)) > w {
		return text // not even one title fits: the count says it
	}
	for i := 1; i < len(titles); i++ {
		next := shown + ", " + titles[i]
		if ansi.StringWidth(next+more(len(titles)-i-1+unknown)) > w {
			return shown + more(len(titles)-i+unknown)
		}
		shown = next
	}
	return shown + more(unknown)
}

func (m *Model) footer(w int) string {
	hm := m.help
	hm.Width = w - 1
	switch m.mode {
	case modeConfirm:
		return clip(" "+hm.View(promptKeys{m.keys.Yes, m.keys.No}), w)
	case modeFilter:
		return clip(" "+hm.View(promptKeys{shortly(m.keys.Accept, "keep filter"), shortly(m.keys.Close, "restore")}), w)
	case modeFeedback:
		return clip(" "+hm.View(promptKeys{shortly(m.keys.Accept, "send"), shortly(m.keys.Close, "cancel")}), w)
	}
	if m.showHelp {
		return clip(" "+hm.View(promptKeys{shortly(m.keys.Close, "close help"), m.keys.Quit}), w)
	}
	if m.art.open {
		return clip(" "+hm.View(m.artifactFooter()), w)
	}
	if m.diff.open {
		return clip(" "+hm.View(m.diffFooter()), w)
	}
	// Drop the hints a user needs least until the rest fits; ? help and q
	// quit always stay.
	hm.Width = 0 // measure untruncated
	items := m.keys.ShortHelp()
	if m.needsCount() == 0 { // n and A only when a loop needs you
		items = slices.DeleteFunc(items, func(b key.Binding) bool { k := b.Help().Key; return k == "n" || k == "A" })
	}
	for _, drop := range []string{"t", "r", "p", "h/l", "d", "o", "enter", "w", "/", "v", "c", "a/x/i", "j/k"} {
		if ansi.StringWidth(hm.ShortHelpView(items)) <= w-1 {
			break
		}
		items = slices.DeleteFunc(items, func(b key.Binding) bool { return b.Help().Key == drop })
	}
	return clip(" "+hm.ShortHelpView(items), w)
}

// settled reports whether loops exist and none can still change on its own
// or wait for a person.
func (m *Model) settled() bool {
	total := 0
	for _, n := range m.counts {
		total += n
	}
	return total > 0 && m.counts[loop.Pending]+m.counts[loop.Paused]+m.counts[loop.Running]+m.counts[loop.Merging]+m.counts[loop.AwaitingApproval]+m.counts[loop.AwaitingReview]+m.counts[loop.NeedsHuman] == 0
}
