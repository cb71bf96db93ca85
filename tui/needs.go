package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

// "Needs you" (issue 12): the loops that wait for a person head the tree
// view as a group of their own; n jumps to the next one and A answers it;
// a plan's row shows its tree's progress; a loop that starts needing you,
// a parked loop and a finished tree ring the terminal.

// needsYou reports whether a loop in status s waits for a person in the
// "Needs you" group: needs_human, or a task awaiting review.
func needsYou(s loop.Status) bool { return s == loop.NeedsHuman || s == loop.AwaitingReview }

// needsLoops returns the loops that need a person, longest waiting first.
func (m *Model) needsLoops() []*loop.Loop {
	var out []*loop.Loop
	for _, l := range m.loops {
		if needsYou(l.Status) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b *loop.Loop) int {
		return cmp.Or(needsSince(a).Compare(needsSince(b)), strings.Compare(a.ID, b.ID))
	})
	return out
}

// needsSince is when l started to need a person.
func needsSince(l *loop.Loop) time.Time {
	if l.Needs != nil {
		return l.Needs.Since
	}
	return l.UpdatedAt
}

// needsCount is how many loops need a person (the header shows it).
func (m *Model) needsCount() int {
	if m.counts != nil {
		return m.counts[loop.NeedsHuman] + m.counts[loop.AwaitingReview]
	}
	return len(m.needsLoops())
}

// needsRows appends the "Needs you" group to rows: a title line, the
// loops, and a title line over the tree that follows. Nothing when no loop
// needs you.
func (m *Model) needsRows(rows []row) []row {
	ls := m.needsLoops()
	if len(ls) == 0 {
		return rows
	}
	rows = append(rows, row{label: fmt.Sprintf("NEEDS YOU (%d)   n next   A answer", len(ls))})
	for _, l := range ls {
		rows = append(rows, row{id: l.ID})
	}
	return append(rows, row{label: "ALL LOOPS"})
}

// labelRow renders a group's title line.
func (m *Model) labelRow(text string, w int) string {
	if strings.HasPrefix(text, "NEEDS YOU") {
		return clip("  "+m.st.statusStyle(loop.NeedsHuman).Render(text), w)
	}
	return clip("  "+m.st.Dim.Render(text), w)
}

// skipLabel moves the cursor off a title line, in direction dir, or the
// other way at the end of the list.
func (m *Model) skipLabel(dir int) {
	for range 2 {
		for m.cursor >= 0 && m.cursor < len(m.rows) && m.rows[m.cursor].label != "" {
			m.cursor += dir
		}
		if m.cursor >= 0 && m.cursor < len(m.rows) {
			return
		}
		m.cursor = max(0, min(m.cursor, len(m.rows)-1))
		dir = -dir
	}
}

// nextNeeds selects the next row, after the cursor and wrapping, of a loop
// that needs you. When none shows (a filter or the flat view hides them)
// the tree comes back first.
func (m *Model) nextNeeds() {
	if m.needsCount() == 0 && len(m.needsLoops()) == 0 {
		m.flash = flash{text: "no loop needs you"}
		return
	}
	for attempt := 0; attempt < 2; attempt++ {
		n := len(m.rows)
		for k := 1; k <= n; k++ {
			i := (m.cursor + k) % n
			if l := m.loops[m.rows[i].id]; l != nil && needsYou(l.Status) {
				m.cursor = i
				m.syncSelection()
				return
			}
		}
		m.flat, m.filter = false, ""
		m.buildRows()
	}
	m.flash = flash{text: "no loop needs you"}
}

// needsWhy is the NEXT / WHY text of a loop that needs you.
func needsWhy(l *loop.Loop) string {
	if l.Needs == nil {
		return "needs you: A answers"
	}
	d := firstLine(l.Needs.Detail)
	if d == "" {
		return fmt.Sprintf("needs you (%s): %s", l.Needs.Reason, resumeHint(l))
	}
	return fmt.Sprintf("%s: %s  (%s)", l.Needs.Reason, d, resumeHint(l))
}

// resumeHint says how to resume l, a loop that needs you: A answers it,
// but a spent budget wants `loopr budget` (an answer would put the loop
// back behind the same gate).
func resumeHint(l *loop.Loop) string {
	if l.Needs != nil && l.Needs.Reason == loop.NeedsBudget {
		return loop.ShortIDs(l.NeedsAction())
	}
	return "A answers"
}

// treeStat sums up a plan's tree.
type treeStat struct {
	version                                int
	total, done, needs, failed, live, kids int
	cancelled                              int
	cost                                   float64
}

// tree returns the stats of root's tree, cached until the next event.
func (m *Model) tree(root *loop.Loop) treeStat {
	if t, ok := m.trees[root.ID]; ok && t.version == m.version2 {
		return t
	}
	t := treeStat{version: m.version2, kids: len(m.children[root.ID])}
	var walk func(l *loop.Loop)
	walk = func(l *loop.Loop) {
		t.total++
		t.cost += l.Usage.CostUSD
		switch {
		case l.Status == loop.Complete:
			t.done++
		case l.Status == loop.Cancelled:
			t.cancelled++
		case needsYou(l.Status):
			t.needs++
		case l.Status == loop.Failed:
			t.failed++
		case !l.Status.Terminal():
			t.live++
		}
		for _, c := range m.children[l.ID] {
			if k := m.loops[c]; k != nil {
				walk(k)
			}
		}
	}
	walk(root)
	if m.trees != nil {
		m.trees[root.ID] = t
	}
	return t
}

// treeText is the NEXT / WHY text of a complete root plan that has
// children: its tree's progress, cost and state; "" for every other loop
// (a plan still in the works shows its own state). A done tree leads with
// what to do about it, "ready to land", so that the 20 columns NEXT / WHY
// has at 80 say it; a landed one with where it landed.
func (m *Model) treeText(l *loop.Loop) string {
	if l.Type != loop.Plan || l.Parent != "" || l.Status != loop.Complete || len(m.children[l.ID]) == 0 {
		return ""
	}
	t := m.tree(l)
	s := fmt.Sprintf("tree %d/%d done", t.done, t.total)
	if t.cancelled > 0 {
		s += fmt.Sprintf(", %d cancelled", t.cancelled)
	}
	if t.cost > 0 {
		s += fmt.Sprintf(" · $%.2f", t.cost)
	}
	switch {
	case t.needs > 0:
		s += fmt.Sprintf(" · needs you (%d)", t.needs)
	case t.failed > 0:
		s += fmt.Sprintf(" · failed (%d)", t.failed)
	case t.done+t.cancelled == t.total: // done means done: a cancelled loop is not waited for
		if l.Landed.Into != "" && !l.ReadyToLand() {
			return "landed on " + l.Landed.Into + " · " + s
		}
		return "ready to land: loopr land " + loop.ShortID(l.ID) + " · " + s + " · " + planBranch(l)
	case t.live > 0:
		s += " · running"
	}
	return s
}

// planBranch is a plan's branch, as recorded or as named.
func planBranch(l *loop.Loop) string {
	if l.Branch != "" {
		return l.Branch
	}
	return gitflow.BranchName(l.ID, l.Title)
}

// noteOf is the notification a stream event deserves, or "": a loop that
// starts needing you, a parked (failed) loop, a plan whose tree is done.
func noteOf(sm api.StreamMsg) string {
	ev, l := sm.Event, sm.Loop
	if ev == nil || l == nil {
		return ""
	}
	name := fmt.Sprintf("%s %q", l.Type, termsafe.Line(title(l)))
	switch {
	case ev.Kind == loop.EventTransition && ev.To == loop.NeedsHuman:
		why := "needs you"
		if l.Needs != nil {
			why += " (" + string(l.Needs.Reason) + ")"
		}
		return fmt.Sprintf("%s %s: %s", name, why, loop.ShortIDs(l.NeedsAction()))
	case ev.Kind == loop.EventTransition && ev.To == loop.AwaitingReview:
		return fmt.Sprintf("%s awaits your review: loopr diff %s, then a approves, i iterates, x rejects", name, loop.ShortID(l.ID))
	case ev.Kind == loop.EventTransition && ev.To == loop.Failed:
		return fmt.Sprintf("%s failed: %s; loopr reset %s", name, termsafe.Line(firstLine(l.Reason)), loop.ShortID(l.ID))
	case ev.Kind == loop.EventTreeComplete:
		return fmt.Sprintf("%s: its whole tree is done on %s; loopr land %s", name, planBranch(l), loop.ShortID(l.ID))
	}
	return ""
}

// notify rings the terminal for each note: a bell, and a desktop
// notification (OSC 9, and OSC 777 for the terminals that read that one)
// unless the terminal reports that it has the focus.
func (m *Model) notify(notes []string) tea.Cmd {
	out := m.notifyOut
	if out == nil || len(notes) == 0 {
		return nil
	}
	desktop := !m.focusKnown || !m.focused
	var b strings.Builder
	b.WriteString("\a")
	if desktop {
		for _, n := range notes {
			n = oscSafe(n)
			b.WriteString("\x1b]9;loopr: " + n + "\a")
			b.WriteString("\x1b]777;notify;loopr;" + n + "\a")
		}
	}
	seq := b.String()
	return func() tea.Msg {
		_, _ = out.Write([]byte(seq))
		return nil
	}
}

// oscSafe keeps only printable text: nothing in a note can end the OSC
// sequence early or start another.
func oscSafe(s string) string {
	s = termsafe.Line(s)
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return -1
		}
		return r
	}, s)
}
