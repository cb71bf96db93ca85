package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

const gap = "  "

// screen is how the terminal's lines are shared out.
type screen struct {
	body int // loop rows
	pane int // lines of the open pane, its title included (0: none)
}

// fixedLines are the header, the rule (or banner), the column titles, the
// rule above the status line, the status line and the footer.
const fixedLines = 6

func (m *Model) layout() screen {
	avail := max(m.height-fixedLines, 1)
	if m.pane == paneNone {
		return screen{body: avail}
	}
	pane := min(max(avail*2/5, 5), 16)
	if m.pane == paneDetails {
		// Details carry the failure reason and the feedback: half the room.
		pane = min(max(avail/2, 5), 16)
	}
	body := avail - pane - 1 // a rule separates the body from the pane
	if body < 3 {
		body = min(3, avail)
		pane = max(avail-body-1, 0)
	}
	return screen{body: body, pane: pane}
}

// View renders the screen. It formats only the visible rows, so its cost
// does not grow with the number of loops.
func (m Model) View() string {
	w := max(m.width, 20)
	lines := make([]string, 0, m.height)
	lines = append(lines, m.headerLine(w), m.bannerOrRule(w))
	lay := m.layout()
	switch {
	case m.showHelp:
		lines = append(lines, m.helpLines(w, max(m.height-fixedLines, 1)+1)...)
	case m.art.open:
		lines = append(lines, m.artifactLines(w, max(m.height-fixedLines, 1)+1)...)
	case m.diff.open:
		lines = append(lines, m.diffLines(w, max(m.height-fixedLines, 1)+1)...)
	default:
		lines = append(lines, m.columnTitles(w))
		lines = append(lines, m.bodyLines(w, lay.body)...)
		if lay.pane > 0 {
			lines = append(lines, m.st.Rule.Render(strings.Repeat("─", w)))
			lines = append(lines, m.paneLines(w, lay.pane)...)
		}
	}
	lines = append(lines, m.st.Rule.Render(strings.Repeat("─", w)), m.statusLine(w), m.footer(w))
	return strings.Join(lines, "\n")
}

// fit pads or truncates plain text s to exactly n cells.
func fit(s string, n int) string {
	if n <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > n {
		s = ansi.Truncate(s, n, "…")
		sw = ansi.StringWidth(s)
	}
	if sw < n {
		s += strings.Repeat(" ", n-sw)
	}
	return s
}

// fitRight right-aligns plain text s in n cells.
func fitRight(s string, n int) string {
	if n <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw >= n {
		return fit(s, n)
	}
	return strings.Repeat(" ", n-sw) + s
}

// clip cuts a styled line to w cells.
func clip(s string, w int) string {
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// ---- header ----------------------------------------------------------------

type segment struct {
	text string // styled
	drop int    // 0: always kept; higher numbers go first when narrow
	alt  string // a shorter form tried before dropping; "" drops at once
}

func (m *Model) headerLine(w int) string {
	st := m.st
	var segs []segment
	switch m.conn {
	case connConnected:
		segs = append(segs, segment{text: st.Connected.Render("●") + " " + st.Brand.Render("loopr")})
	case connConnecting:
		segs = append(segs, segment{text: st.Warn.Render("◌") + " " + st.Brand.Render("loopr") + " " + st.Warn.Render("connecting")})
	default:
		segs = append(segs, segment{text: st.Error.Render("✗") + " " + st.Brand.Render("loopr") + " " + st.Error.Render("offline")})
	}
	if m.workspace != "" {
		segs = append(segs, segment{text: st.HeaderDim.Render(m.workspace), drop: 4})
	}
	if m.haveStatus {
		up := time.Duration(m.status.UptimeSecs) * time.Second
		if !m.status.StartedAt.IsZero() {
			up = m.now.Sub(m.status.StartedAt)
		}
		segs = append(segs, segment{text: st.HeaderDim.Render("up ") + age(up), drop: 3})
	}
	cv := m.caps()
	run := fmt.Sprintf("run %d/%d", cv.total, cv.maxLoops)
	if cv.maxLoops <= 0 {
		run = fmt.Sprintf("run %d", cv.total)
	}
	if cv.maxLoops > 0 && cv.total >= cv.maxLoops {
		run = st.Warn.Render(run)
	}
	segs = append(segs, segment{text: run})
	var types, busy []string
	for _, t := range cv.types {
		u := fmt.Sprintf("%s %d/%d", t, cv.running[t], cv.cap[t])
		if cv.cap[t] <= 0 {
			u = fmt.Sprintf("%s %d", t, cv.running[t])
		}
		if cv.cap[t] > 0 && cv.running[t] >= cv.cap[t] {
			u = st.Warn.Render(u)
		}
		types = append(types, u)
		if cv.running[t] > 0 {
			busy = append(busy, u)
		}
	}
	if len(types) > 0 {
		segs = append(segs, segment{text: strings.Join(types, " "), drop: 2, alt: strings.Join(busy, " ")})
	}
	if m.haveStatus && m.status.Limits != nil {
		// Each limited agent profile, and when its loops resume.
		for _, p := range m.status.Profiles {
			rl := m.status.Limits[p.Agent]
			switch {
			case rl.Blocked(m.now):
				segs = append(segs, segment{text: st.Warn.Render("429 " + p.Agent + " " + countdown(rl.Remaining(m.now)))})
			case rl.Recovering(m.now):
				segs = append(segs, segment{text: st.Info.Render("429 " + p.Agent + " ramp " + countdown(rl.RecoveryUntil.Sub(m.now))), drop: 1})
			}
		}
	}
	if m.haveStatus && m.status.SpentToday.CostUSD > 0 {
		segs = append(segs, segment{text: fmt.Sprintf("$%.2f today", m.status.SpentToday.CostUSD), drop: 3})
	}
	if m.haveStatus {
		rl := m.status.RateLimit
		if m.status.Limits != nil {
			rl = ratelimit.State{} // shown per profile above
		}
		switch {
		case rl.Blocked(m.now):
			backoff := st.Warn.Render("429 backoff " + countdown(rl.Remaining(m.now)))
			// Narrow: the countdown stays, the ramp after it goes.
			segs = append(segs, segment{text: backoff + st.HeaderDim.Render(" then ramp "+countdown(rl.RecoveryUntil.Sub(rl.BackoffUntil))),
				drop: 1, alt: backoff})
		case rl.Recovering(m.now):
			segs = append(segs, segment{text: st.Info.Render("429 recovery " + countdown(rl.RecoveryUntil.Sub(m.now)) + ": one start per poll")})
		}
		if m.status.DiskLow {
			segs = append(segs, segment{text: st.Warn.Render(fmt.Sprintf("disk low %.1f GB", m.status.DiskFreeGB)), drop: 1})
		}
		if n := len(m.status.Problems); n > 0 {
			segs = append(segs, segment{text: st.Warn.Render(fmt.Sprintf("%d preflight %s: loopr status", n, map[bool]string{true: "problem", false: "problems"}[n == 1])), drop: 1})
		}
		if m.status.NoGit != "" {
			segs = append(segs, segment{text: st.Info.Render("no git: ralph one at a time"), drop: 1})
		}
		switch t := m.status.Trust; {
		case t != nil && t.Held:
			segs = append(segs, segment{text: st.Warn.Render("loopr.yml change held: loopr trust")})
		case t != nil:
			segs = append(segs, segment{text: st.Warn.Render("loopr.yml untrusted: loopr trust")})
		}
	}
	if n := m.needsCount(); n > 0 {
		segs = append(segs, segment{text: st.statusStyle(loop.NeedsHuman).Render(fmt.Sprintf("needs you %d", n))})
	}
	segs = append(segs, segment{text: m.countsText()})

	// Tighten the spacing, then drop optional segments, the least useful
	// first, until the line fits.
	sep := "   "
	for level := 4; level >= 1; level-- {
		if segWidth(segs, 3) <= w {
			break
		}
		if segWidth(segs, 2) <= w {
			sep = "  "
			break
		}
		kept := segs[:0:0]
		for _, s := range segs {
			switch {
			case s.drop != level:
				kept = append(kept, s)
			case s.alt != "":
				kept = append(kept, segment{text: s.alt, drop: s.drop})
			}
		}
		segs = kept
		if segWidth(segs, 2) <= w {
			sep = "  "
			break
		}
	}
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = s.text
	}
	return clip(" "+strings.Join(parts, sep), w)
}

// segWidth is the width of the header made of segs, sep cells apart.
func segWidth(segs []segment, sep int) int {
	n := 1
	for i, s := range segs {
		if i > 0 {
			n += sep
		}
		n += ansi.StringWidth(s.text)
	}
	return n
}

// countGroups is the order of the header's counts; the ⊘ group sums the
// three ways a loop ends without completing.
var countGroups = []struct {
	icon     string
	statuses []loop.Status
}{
	{"○", []loop.Status{loop.Pending}},
	{"⏸", []loop.Status{loop.Paused}},
	{"●", []loop.Status{loop.Running}},
	{"⇢", []loop.Status{loop.Merging}},
	{"◆", []loop.Status{loop.AwaitingApproval}},
	{"◇", []loop.Status{loop.AwaitingReview}},
	{"!", []loop.Status{loop.NeedsHuman}},
	{"✗", []loop.Status{loop.Failed}},
	{"✓", []loop.Status{loop.Complete}},
	{"⊘", []loop.Status{loop.Cancelled, loop.Invalidated, loop.Expired}},
}

func (m *Model) countsText() string {
	counts := m.counts
	if counts == nil {
		counts = map[loop.Status]int{}
		for _, l := range m.loops {
			counts[l.Status]++
		}
	}
	var parts []string
	for _, g := range countGroups {
		n := 0
		for _, s := range g.statuses {
			n += counts[s]
		}
		if n > 0 || g.statuses[0] == loop.Pending || g.statuses[0] == loop.Running {
			parts = append(parts, m.st.statusStyle(g.statuses[0]).Render(g.icon)+strconv.Itoa(n))
		}
	}
	return strings.Join(parts, " ")
}

func (m *Model) bannerOrRule(w int) string {
	st := m.st
	switch {
	case m.conn == connDown && m.connErr != nil && m.dial == nil && m.client == nil:
		return st.Banner.Render(fit(" no daemon client: "+m.connErr.Error(), w))
	case m.conn == connDown:
		text := " daemon disconnected — reconnecting in " + countdown(m.retryAt.Sub(m.now))
		if m.connErr != nil {
			text += "   (" + firstLine(m.connErr.Error()) + ")"
		}
		return st.Banner.Render(fit(text, w))
	case m.conn == connConnecting && m.attempt > 0:
		return st.Banner.Render(fit(" daemon disconnected — reconnecting…", w))
	case m.haveStatus && m.status.Protocol != 0 && m.status.Protocol != api.ProtocolVersion:
		return st.Banner.Render(fit(fmt.Sprintf(" daemon speaks protocol %d, this loopr %d: restart the daemon (loopr daemon)", m.status.Protocol, api.ProtocolVersion), w))
	}
	return st.Rule.Render(strings.Repeat("─", w))
}

// ---- the loop list ---------------------------------------------------------

// treeCols are the widths of the tree's columns; 0 hides a column.
type treeCols struct {
	loop, id, status, prio, iter, cost, age, why int
	short                                        bool // short status words
}

const (
	idW      = loop.ShortIDLen // the ID column: a short id
	gutterW  = 2               // selection mark and a space
	minLoopW = 28
	minWhyW  = 20
)

// treeColumns shares width w out. Narrow terminals first shorten the status
// words, then drop AGE, ITER, PRIO and STATUS (from the right, NEXT / WHY
// last: it says what the user most wants to know). The short ID column
// shows only where there is room to spare for it (136 columns and more),
// taken from LOOP beyond its 40 columns or from NEXT / WHY beyond 64. The
// panes' titles name the selected loop's short id at any width.
func treeColumns(w int, cost bool) treeCols {
	c := treeCols{status: 17, prio: 4, iter: 7, age: 5, why: minWhyW}
	if cost {
		c.cost = 7
	}
	used := func() int {
		n := gutterW
		for _, x := range []int{c.status, c.prio, c.iter, c.cost, c.age, c.why} {
			if x > 0 {
				n += len(gap) + x
			}
		}
		return n
	}
	if w-used() < minLoopW+12 {
		c.status, c.short = 11, true
	}
	for _, col := range []*int{&c.cost, &c.age, &c.iter, &c.prio, &c.status} {
		if w-used() >= minLoopW {
			break
		}
		*col = 0
	}
	rest := w - used()
	if rest < minLoopW { // very narrow: NEXT / WHY gives way to the tree
		c.why = max(0, c.why-(minLoopW-rest))
		rest = w - used()
		if c.why == 0 {
			rest = w - gutterW
		}
	}
	c.loop = max(rest, 1)
	if rest > 40 {
		c.loop = min(40+(rest-40)/3, 64)
		c.why += rest - c.loop
	}
	if c.loop >= 40+idW+len(gap) { // from spare room: LOOP's, or NEXT / WHY's when it has plenty
		c.id = idW
		if c.why >= 64+idW+len(gap) {
			c.why -= idW + len(gap)
		} else {
			c.loop -= idW + len(gap)
		}
	}
	return c
}

// flatCols are the widths of the flat view's columns (debug scheduler).
type flatCols struct {
	pos, id, typ, prio, age, depth, iter, title, why int
}

func (m *Model) flatColumns(w int) flatCols {
	c := flatCols{pos: 4, id: idW, typ: m.typeWidth(), prio: 4, age: 5, depth: 5, iter: 7, why: 24}
	used := func() int {
		n := gutterW + 2 // the icon and its space
		for _, x := range []int{c.pos, c.id, c.typ, c.prio, c.age, c.depth, c.iter, c.why} {
			if x > 0 {
				n += x + len(gap)
			}
		}
		return n
	}
	const minTitle = 20
	for _, step := range []func(){
		func() { c.depth = 0 },
		func() { c.age = 0 },
		func() { c.id = 0 },
		func() { c.iter = 0 },
	} {
		if w-used() >= minTitle {
			break
		}
		step()
	}
	if short := minTitle - (w - used()); short > 0 {
		c.why = max(8, c.why-short)
	}
	rest := max(w-used(), 1)
	c.title = rest
	if rest > 40 {
		c.title = 40 + (rest-40)/2
		c.why += rest - c.title
	}
	return c
}

// typeWidth is the widest type name held, at least "phase" and at most 10.
func (m *Model) typeWidth() int {
	n := 5
	for _, t := range m.caps().types {
		n = max(n, min(len(t), 10))
	}
	return n
}

func (m *Model) columnTitles(w int) string {
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", gutterW))
	if m.flat {
		c := m.flatColumns(w)
		b.WriteString(fitRight("#", c.pos) + gap + "  ")
		if c.id > 0 {
			b.WriteString(fit("ID", c.id) + gap)
		}
		b.WriteString(fit("TYPE", c.typ) + gap + fitRight("PRIO", c.prio) + gap)
		if c.age > 0 {
			b.WriteString(fitRight("AGE", c.age) + gap)
		}
		if c.depth > 0 {
			b.WriteString(fitRight("DEPTH", c.depth) + gap)
		}
		if c.iter > 0 {
			b.WriteString(fit("ITER", c.iter) + gap)
		}
		b.WriteString(fit("TITLE", c.title) + gap + fit("RUNNABLE / WHY", c.why))
	} else {
		c := treeColumns(w, m.hasCost())
		b.WriteString(fit("  LOOP", c.loop))
		if c.id > 0 {
			b.WriteString(gap + fit("ID", c.id))
		}
		if c.status > 0 {
			b.WriteString(gap + fit("STATUS", c.status))
		}
		if c.prio > 0 {
			b.WriteString(gap + fitRight("PRIO", c.prio))
		}
		if c.iter > 0 {
			b.WriteString(gap + fit("ITER", c.iter))
		}
		if c.cost > 0 {
			b.WriteString(gap + fitRight("COST", c.cost))
		}
		if c.age > 0 {
			b.WriteString(gap + fit("AGE", c.age))
		}
		if c.why > 0 {
			b.WriteString(gap + fit("NEXT / WHY", c.why))
		}
	}
	return m.st.ColHeader.Render(clip(b.String(), w))
}

func (m *Model) bodyLines(w, h int) []string {
	lines := make([]string, 0, h)
	switch {
	case !m.synced && m.conn != connDown:
		lines = append(lines, m.st.Dim.Render(fit("   connecting to the daemon…", w)))
	case !m.synced:
		lines = append(lines, m.st.Dim.Render(fit("   waiting for the daemon", w)))
	case len(m.rows) == 0 && m.filter != "":
		lines = append(lines, m.st.Dim.Render(fit("   nothing matches /"+m.filter+"   (esc clears the filter)", w)))
	case len(m.rows) == 0 && m.flat:
		lines = append(lines, m.st.Dim.Render(fit("   no loop is waiting: nothing to schedule", w)))
	case len(m.rows) == 0:
		lines = append(lines, m.st.Dim.Render(fit(`   no loops yet: start one with  loopr plan "what to build"`, w)))
	}
	off := max(0, min(m.offset, len(m.rows)-h))
	if m.cursor < off {
		off = m.cursor
	} else if m.cursor >= off+h {
		off = m.cursor - h + 1
	}
	var tc treeCols
	var fc flatCols
	if m.flat {
		fc = m.flatColumns(w)
	} else {
		tc = treeColumns(w, m.hasCost())
	}
	typeW := m.typeWidth()
	for i := off; i < len(m.rows) && len(lines) < h; i++ {
		if lb := m.rows[i].label; lb != "" {
			lines = append(lines, m.labelRow(lb, w))
			continue
		}
		l := m.loops[m.rows[i].id]
		if l == nil {
			continue
		}
		if m.flat {
			lines = append(lines, m.flatRow(m.rows[i].rank, l, fc, w, i == m.cursor))
		} else {
			lines = append(lines, m.treeRow(m.rows[i], l, tc, typeW, w, i == m.cursor))
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return lines
}

// rowCell is one cell of a row: its text and whether it takes the status colour.
type rowCell struct {
	text  string
	style int // cellPlain, cellStatus, cellWhy
}

const (
	cellPlain = iota
	cellStatus
	cellWhy
	cellDim
)

// renderRow joins cells into one line of width w: the selected line in one
// reverse style, other lines with the status colour on icon and status.
func (m *Model) renderRow(cells []rowCell, l *loop.Loop, whyCode string, dim, selected bool, w int) string {
	if selected {
		var b strings.Builder
		b.WriteString("› ")
		for _, c := range cells {
			b.WriteString(c.text)
		}
		return m.st.Selected.Render(fit(b.String(), w))
	}
	st := m.st
	sts := st.statusStyle(l.Status)
	base := st.Header
	if dim {
		base = st.Dim
	}
	var b strings.Builder
	b.WriteString("  ")
	for _, c := range cells {
		if c.text == "" {
			continue
		}
		switch c.style {
		case cellStatus:
			b.WriteString(sts.Render(c.text))
		case cellWhy:
			b.WriteString(m.whyStyle(l, whyCode).Render(c.text))
		case cellDim:
			b.WriteString(st.Dim.Render(c.text))
		default:
			b.WriteString(base.Render(c.text))
		}
	}
	return clip(b.String(), w)
}

func (m *Model) whyStyle(l *loop.Loop, code string) lipgloss.Style {
	switch {
	case code == codeNext:
		return m.st.GateOK
	case l.Status == loop.NeedsHuman:
		return m.st.statusStyle(loop.NeedsHuman)
	case l.Status == loop.Failed:
		return m.st.Error
	case code != "":
		return m.st.Warn
	case l.Status.AwaitsPerson():
		return m.st.statusStyle(l.Status)
	case l.Status.Terminal():
		return m.st.Dim
	}
	return m.st.Header
}

// nextWhy is the NEXT / WHY text of l and its reason code.
// progressText is what the agent last reported (MCP report_progress):
// "40% text", or the text alone without a percentage; "" for none.
func progressText(p *loop.Progress) string {
	if p == nil {
		return ""
	}
	if p.Percent >= 0 {
		return strconv.Itoa(p.Percent) + "% " + p.Text
	}
	return p.Text
}

func (m *Model) nextWhy(l *loop.Loop) (string, string) {
	switch l.Status {
	case loop.Pending, loop.Paused:
		r := m.reasonOf(l.ID)
		return m.reasonText(r), r.Code
	case loop.Running:
		run := "agent"
		if !l.StartedAt.IsZero() {
			run += " " + elapsed(m.now.Sub(l.StartedAt))
		}
		if p := progressText(l.Progress); p != "" {
			run += ": " + p // report_progress (MCP)
		}
		return run, ""
	case loop.Merging:
		return "merge queue " + elapsed(m.now.Sub(l.UpdatedAt)), ""
	case loop.AwaitingApproval:
		return "your call: a / x / i", ""
	case loop.AwaitingReview:
		return "review: a merges / x / i", ""
	case loop.NeedsHuman:
		return needsWhy(l), ""
	case loop.Failed:
		if l.Reason != "" {
			return firstLine(l.Reason), ""
		}
		return "r resets it", ""
	}
	return firstLine(l.Reason), ""
}

func (m *Model) prioText(l *loop.Loop) string {
	switch {
	case l.Status == loop.NeedsHuman:
		return "" // not scheduled until answered
	case l.Status.Waiting():
		return strconv.Itoa(scheduler.ScoreOf(l, m.now, m.plan).Priority)
	case l.Status == loop.Running:
		return "—"
	}
	return ""
}

// costCell reads "$1.23" (rolled up: the loop and its descendants), "" for nothing.
func costCell(usd float64) string {
	switch {
	case usd <= 0:
		return ""
	case usd >= 1000:
		return fmt.Sprintf("$%.0f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

// hasCost reports whether some loop spent money: the COST column shows.
func (m *Model) hasCost() bool {
	for _, c := range m.costs {
		if c > 0 {
			return true
		}
	}
	return false
}

func iterText(l *loop.Loop) string {
	return strconv.Itoa(l.Iteration) + "/" + strconv.Itoa(l.MaxIterations)
}

func (m *Model) treeRow(r row, l *loop.Loop, c treeCols, typeW, w int, selected bool) string {
	// LOOP: indent, fold mark, icon, type, title.
	indent := strings.Repeat("  ", r.depth)
	fold := " "
	if r.hasKids {
		fold = "▶"
		if r.open {
			fold = "▼"
		}
	}
	head := indent + fold + " "
	typ := fit(l.Type, typeW) + " "
	titleW := c.loop - ansi.StringWidth(head) - 2 - len(typ)
	var loopCells []rowCell
	if titleW < 1 { // deeper than the column: keep the icon at least
		loopCells = []rowCell{{fit(head+icon(l.Status)+" "+typ, c.loop), cellPlain}}
	} else {
		loopCells = []rowCell{{head, cellDim}, {icon(l.Status), cellStatus}, {" " + typ, cellPlain}, {fit(title(l), titleW), cellPlain}}
	}
	cells := loopCells
	if c.id > 0 {
		cells = append(cells, rowCell{gap + fit(loop.ShortID(l.ID), c.id), cellDim})
	}
	if c.status > 0 {
		cells = append(cells, rowCell{gap, cellPlain}, rowCell{fit(statusText(l.Status, c.short), c.status), cellStatus})
	}
	if c.prio > 0 {
		cells = append(cells, rowCell{gap + fitRight(m.prioText(l), c.prio), cellPlain})
	}
	if c.iter > 0 {
		cells = append(cells, rowCell{gap + fit(iterText(l), c.iter), cellPlain})
	}
	if c.cost > 0 {
		cells = append(cells, rowCell{gap + fitRight(costCell(m.costs[l.ID]), c.cost), cellPlain})
	}
	if c.age > 0 {
		cells = append(cells, rowCell{gap + fit(age(m.now.Sub(l.CreatedAt)), c.age), cellPlain})
	}
	why, code := "", ""
	if c.why > 0 {
		why, code = m.nextWhy(l)
		if t := m.treeText(l); t != "" {
			why, code = t, ""
		}
		cells = append(cells, rowCell{gap, cellPlain}, rowCell{fit(why, c.why), cellWhy})
	}
	dim := r.context || (l.Status.Terminal() && l.Status != loop.Failed)
	return m.renderRow(cells, l, code, dim, selected, w)
}

func (m *Model) flatRow(rank int, l *loop.Loop, c flatCols, w int, selected bool) string {
	cells := []rowCell{{fitRight(strconv.Itoa(rank), c.pos) + gap, cellDim}, {icon(l.Status), cellStatus}, {" ", cellPlain}}
	if c.id > 0 {
		cells = append(cells, rowCell{fit(loop.ShortID(l.ID), c.id) + gap, cellDim})
	}
	cells = append(cells, rowCell{fit(l.Type, c.typ) + gap + fitRight(m.prioText(l), c.prio) + gap, cellPlain})
	if c.age > 0 {
		cells = append(cells, rowCell{fitRight(age(m.now.Sub(l.CreatedAt)), c.age) + gap, cellPlain})
	}
	if c.depth > 0 {
		cells = append(cells, rowCell{fitRight(strconv.Itoa(l.Depth), c.depth) + gap, cellPlain})
	}
	if c.iter > 0 {
		cells = append(cells, rowCell{fit(iterText(l), c.iter) + gap, cellPlain})
	}
	cells = append(cells, rowCell{fit(title(l), c.title) + gap, cellPlain})
	why, code := m.nextWhy(l)
	if code == codeNext {
		why = "yes: next to start"
	} else if why != "" {
		why = "no: " + why
	}
	cells = append(cells, rowCell{fit(why, c.why), cellWhy})
	return m.renderRow(cells, l, code, false, selected, w)
}
