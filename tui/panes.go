package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/transcript"
)

func (m *Model) paneTitle(kind string, l *loop.Loop, extra string, w int) string {
	t := " " + m.st.PaneTitle.Render(kind)
	if l != nil {
		t += "  " + fmt.Sprintf("%s %q", l.Type, title(l)) + "  " + m.st.Dim.Render(loop.ShortID(l.ID))
	}
	if extra != "" {
		t += "  " + m.st.Dim.Render(extra)
	}
	return clip(t, w)
}

func (m *Model) paneLines(w, h int) []string {
	var lines []string
	switch m.pane {
	case paneDetails:
		lines = m.detailsLines(w, h)
	case paneWhy:
		lines = m.whyLines(w, h)
	case paneOutput:
		lines = m.outputLines(w, h)
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

func (m *Model) detailsLines(w, h int) []string {
	l := m.selected()
	if l == nil {
		return []string{m.paneTitle("DETAILS", nil, "no loop selected", w)}
	}
	lines := []string{m.paneTitle("DETAILS", l, "", w)}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		rel := m.now.Sub(t)
		when := age(rel) + " ago"
		if rel < 0 {
			when = "in " + countdown(-rel)
		}
		return m.clockTime(t) + " (" + when + ")"
	}
	parent := ""
	if l.Parent != "" {
		parent = loop.ShortID(l.Parent)
	}
	if p := m.loops[l.Parent]; p != nil {
		parent += fmt.Sprintf("  %s %q %s", p.Type, title(p), statusText(p.Status, false))
	}
	lease := ""
	if l.Lease != nil {
		lease = l.Lease.Owner + ", expires " + ts(l.Lease.ExpiresAt)
	}
	// Rows in display order; rank says which stay when the pane is short
	// (lower stays longer). The status and the reason always show, the
	// reason wrapped, never cut; the latest feedback comes next.
	type row struct {
		k, v string
		rank int
	}
	rows := []row{
		{"parent", parent, 1},
		{"created", ts(l.CreatedAt), 6},
		{"started", ts(l.StartedAt), 4},
		{"finished", ts(l.FinishedAt), 7},
		{"runnable at", ts(l.RunnableAt), 3},
		{"deadline", ts(l.Deadline), 5},
		{"artifact", l.Artifact, 8},
		{"workdir", m.workdirText(l), 9},
		{"branch", l.Branch, 8},
		{"base", l.Base.String(), 8},
		{"landed", landedText(l), 7},
		{"id", l.ID, 12},
		{"triggered by", l.TriggeredBy, 10},
		{"lease", lease, 11},
		{"answer", firstLine(l.Answer), 2},
		{"progress", progressText(l.Progress), 2},
		{"agent", l.Agent, 5},
		{"spent", usageLine(l.Usage, m.costs[l.ID]), 3},
		{"budget", budgetLine(l.Budget), 4},
		{"task", firstLine(l.Task), 2},
	}
	rows = slices.DeleteFunc(rows, func(r row) bool { return r.v == "" })
	const labelW = 13
	label := func(k string) string { return " " + m.st.PaneLabel.Render(fit(k, labelW)) }
	lines = append(lines, clip(label("status")+icon(l.Status)+" "+statusText(l.Status, false)+"   iteration "+iterText(l)+"   depth "+strconv.Itoa(l.Depth), w))
	if r := strings.TrimSpace(l.Reason); r != "" {
		for i, part := range strings.Split(ansi.Wrap(strings.Join(strings.Fields(r), " "), max(w-1-labelW, 10), ""), "\n") {
			k := ""
			if i == 0 {
				k = "reason"
			}
			lines = append(lines, label(k)+m.st.Error.Render(part))
		}
	}
	if n := l.Needs; n != nil && len(lines) < h {
		lines = append(lines, clip(" "+m.st.statusStyle(loop.NeedsHuman).Render(fit("needs you", labelW))+
			string(n.Reason)+" since "+ts(n.Since)+"   "+resumeHint(l), w))
		if d := strings.TrimSpace(n.Detail); d != "" {
			dl := strings.Split(ansi.Strip(d), "\n")
			room := max(h-len(lines)-2, 1)
			if len(dl) > room {
				dl = dl[:room]
			}
			for _, s := range dl {
				lines = append(lines, clip("   "+expandTabs(s), w))
			}
		}
	}
	var fb []string // the latest iteration's feedback, wrapped
	if text := latestFeedback(l.Feedback); text != "" {
		for _, s := range strings.Split(ansi.Wrap(expandTabs(text), max(w-3, 10), ""), "\n") {
			fb = append(fb, clip("   "+s, w))
		}
	}
	room := max(h-len(lines), 0)
	fbRoom := 0
	if len(fb) > 0 {
		// At least the heading and three lines, more when the rows leave room.
		fbRoom = min(1+len(fb), max(room-len(rows), min(4, room)))
	}
	keep := room - fbRoom
	if keep < len(rows) {
		ranks := make([]int, len(rows))
		for i, r := range rows {
			ranks[i] = r.rank
		}
		slices.Sort(ranks)
		cut := 1 << 30
		if keep > 0 {
			cut = ranks[keep-1]
		} else {
			cut = -1
		}
		rows = slices.DeleteFunc(rows, func(r row) bool { return r.rank > cut })
	}
	for _, r := range rows {
		lines = append(lines, clip(label(r.k)+r.v, w))
	}
	if fbRoom > 0 {
		lines = append(lines, " "+m.st.PaneLabel.Render("last feedback"))
		body := fbRoom - 1
		if len(fb) > body && body >= 3 {
			// Its first line says what failed; its end, the log's last words.
			fb = append([]string{fb[0], m.st.Dim.Render("   …")}, fb[len(fb)-(body-2):]...)
		}
		lines = append(lines, fb[:min(body, len(fb))]...)
	}
	return lines
}

// latestFeedback is the feedback of the latest failed iteration: the
// record keeps the newest first, older ones after a "--- earlier ---" line.
func latestFeedback(fb string) string {
	fb = strings.TrimSpace(ansi.Strip(fb))
	if i := strings.Index(fb, "\n--- earlier ---"); i >= 0 {
		fb = strings.TrimSpace(fb[:i])
	}
	return fb
}

func (m *Model) clockTime(t time.Time) string {
	t = t.In(m.now.Location())
	y1, m1, d1 := t.Date()
	y2, m2, d2 := m.now.Date()
	if y1 == y2 && m1 == m2 && d1 == d2 {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}

func (m *Model) whyLines(w, h int) []string {
	l := m.loops[m.why.id]
	if l == nil {
		l = m.selected()
	}
	wy := m.why
	switch {
	case wy.loading:
		return []string{m.paneTitle("WHY", l, "", w), m.st.Dim.Render(" asking the daemon…")}
	case wy.err != nil:
		return []string{m.paneTitle("WHY", l, "", w), m.st.Error.Render(clip(" ✗ why: "+wy.err.Error(), w))}
	}
	extra := ""
	if !wy.why.Now.IsZero() {
		extra = "as of " + m.clockTime(wy.why.Now)
	}
	lines := []string{m.paneTitle("WHY", l, extra, w)}
	for _, text := range []string{wy.why.Formula, wy.why.Tree} { // the score, then what the tree term did
		if text == "" {
			continue
		}
		for _, fl := range strings.Split(ansi.Wordwrap(text, w-2, ""), "\n") {
			lines = append(lines, clip(" "+fl, w))
		}
	}
	if f := wy.why.Loop.Fanout; f != nil {
		lines = append(lines, clip(" "+f.Text(wy.why.Loop.ID), w))
	}
	// Gates flow across lines, three spaces apart; a gate never splits.
	cur, curW := " ", 1
	for _, g := range wy.why.Gates {
		mark, sty := "✓", m.st.GateOK
		if !g.OK {
			mark, sty = "✗", m.st.GateBad
		}
		text := g.Text
		if text == "" {
			text = strings.ReplaceAll(g.Code, "_", " ")
		}
		gw := ansi.StringWidth(mark + " " + text)
		if curW > 1 && curW+3+gw > w {
			lines = append(lines, cur)
			cur, curW = " ", 1
		}
		if curW > 1 {
			cur += "   "
			curW += 3
		}
		cur += sty.Render(mark) + " " + clip(text, w-curW-2)
		curW += gw
	}
	if curW > 1 {
		lines = append(lines, cur)
	}
	if wy.why.Scheduled {
		if wy.why.Row.Runnable {
			lines = append(lines, m.st.GateOK.Render(" runnable: it starts when a slot frees, in priority order"))
		}
	}
	return append(lines, m.conflictLines(wy.why, w)...)
}

// conflictLines are the loop's predicted merge conflicts (the conflict
// radar, in api.Why): one line each, "⚠ conflicts with …", the other side
// from this loop's point of view.
func (m *Model) conflictLines(why api.Why, w int) []string {
	var lines []string
	for _, c := range why.Conflicts {
		other := "the plan tip"
		switch {
		case c.With == api.ConflictWithPlan:
		case c.Other == why.Loop.ID:
			other = loop.ShortID(c.Loop) + " " + strconv.Quote(c.Title)
		default:
			other = loop.ShortID(c.Other) + " " + strconv.Quote(c.OtherTitle)
		}
		text := termsafe.Line("conflicts with " + other + " in " + strings.Join(c.Files, ", "))
		lines = append(lines, " "+m.st.GateBad.Render("⚠")+" "+clip(text, w-3))
	}
	if why.ConflictCheck != "" {
		lines = append(lines, m.st.Dim.Render(clip(" ? conflict radar: "+termsafe.Line(why.ConflictCheck), w)))
	}
	return lines
}

func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func (m *Model) helpLines(w, h int) []string {
	title := " " + m.st.HelpTitle.Render("loopr tui")
	if m.version != "" {
		title += " " + m.st.Dim.Render(m.version)
	}
	title += m.st.Dim.Render("   keys   (? or esc closes)")
	lines := []string{title, ""}
	hm := m.help
	hm.Width = 0
	groups := m.keys.FullHelp()
	full := hm.FullHelpView(groups)
	if lipgloss.Width(full) > w-2 { // narrow: the actions go under the rest
		full = hm.FullHelpView(groups[:2]) + "\n\n" + hm.FullHelpView(groups[2:])
	}
	for _, s := range strings.Split(full, "\n") {
		lines = append(lines, clip(" "+s, w))
	}
	lines = append(lines, "", " "+m.st.HelpTitle.Render("status"))
	var legend []string
	for _, s := range []loop.Status{loop.Pending, loop.Running, loop.Merging, loop.AwaitingApproval, loop.Failed, loop.Complete, loop.Cancelled, loop.Paused} {
		name := statusText(s, false)
		if s == loop.Cancelled {
			name = "cancelled/invalidated/expired"
		}
		legend = append(legend, m.st.statusStyle(s).Render(icon(s))+" "+name)
	}
	// As many entries a line as fit, the rest on the next.
	line := ""
	for _, e := range legend {
		if line != "" && lipgloss.Width(line+"   "+e)+1 > w {
			lines = append(lines, " "+line)
			line = ""
		}
		if line != "" {
			line += "   "
		}
		line += e
	}
	lines = append(lines, clip(" "+line, w))
	lines = append(lines, "",
		" "+m.st.HelpTitle.Render("filter")+m.st.HelpDesc.Render("  words match title or id · type:ralph · status:pending (prefixes work) · esc clears"),
		" "+m.st.HelpTitle.Render("prio")+m.st.HelpDesc.Render("    base + age (per minute, capped) + depth − retry penalty; w shows the daemon's breakdown"),
		" "+m.st.HelpTitle.Render("diff")+m.st.HelpDesc.Render("    d opens · j/k line · tab/] next file, ⇧tab/[ previous · c comment on the line · esc closes"))
	for i := range lines {
		lines[i] = clip(lines[i], w)
	}
	if len(lines) > h {
		lines = lines[:h]
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

// usageLine reads "$0.42, 12k tokens, agent 3m; with its tree $1.90", "" for nothing.
func usageLine(u loop.Usage, tree float64) string {
	if u == (loop.Usage{}) && tree <= 0 {
		return ""
	}
	s := fmt.Sprintf("$%.2f, %s tokens, agent %s", u.CostUSD, transcript.Tokens(u.Tokens()),
		time.Duration(u.AgentSeconds*float64(time.Second)).Round(time.Second))
	if tree > u.CostUSD+0.005 {
		s += fmt.Sprintf("; with the loops below it $%.2f", tree)
	}
	return s
}

// budgetLine reads "$5.00, 1.2M tokens", "" for none.
func budgetLine(b loop.Budget) string {
	var parts []string
	if b.USD > 0 {
		parts = append(parts, fmt.Sprintf("$%.2f", b.USD))
	}
	if b.Tokens > 0 {
		parts = append(parts, transcript.Tokens(b.Tokens)+" tokens")
	}
	return strings.Join(parts, ", ")
}

// workdirText is l's workdir, marked removed once loopr removed it: a
// finished loop's worktree goes when it finishes, a plan's when its whole
// tree has (loopmgr's cleanup and TidyTree). A failed loop's is kept.
func (m *Model) workdirText(l *loop.Loop) string {
	if l.Workdir == "" || !l.Status.Terminal() || l.Status == loop.Failed {
		return l.Workdir
	}
	if l.Type == loop.Plan && l.Parent == "" && len(m.children[l.ID]) > 0 && m.tree(l).live > 0 {
		return l.Workdir
	}
	return l.Workdir + " (removed)"
}

// landedText says where and when `loopr land` landed a plan; "" before.
func landedText(l *loop.Loop) string {
	ld := l.Landed
	if ld.Into == "" {
		return ""
	}
	c := loop.ShortCommit(ld.Commit)
	return fmt.Sprintf("on %s at %s (%s), %s", ld.Into, c, ld.Mode, ld.At.UTC().Format("2006-01-02 15:04"))
}
