package tui

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// row is one visible line of the loop list.
type row struct {
	id      string
	depth   int    // tree indent (0 in the flat view)
	hasKids bool   // has children in the tree
	open    bool   // children shown
	context bool   // shown only as the ancestor of a filter match
	rank    int    // flat view: 1-based place in the scheduling order
	label   string // a group's title line ("NEEDS YOU (2)"); id is then ""
}

// applySnapshot replaces the model's state with a stream snapshot.
func (m *Model) applySnapshot(sm api.StreamMsg) {
	m.loops = make(map[string]*loop.Loop, len(sm.Loops))
	for i := range sm.Loops {
		l := displayable(sm.Loops[i])
		m.loops[l.ID] = &l
	}
	if sm.Status != nil {
		m.setStatus(*sm.Status)
	}
	m.synced = true
	m.costs = map[string]float64{}
	for _, l := range m.loops {
		m.addCost(l, l.Usage.CostUSD)
	}
	m.rebuildChildren()
	m.defaultFolds()
	m.dirty = true
	m.sched.stale = true
}

// setStatus takes a fresh daemon status; its counts replace the ones kept
// up to date from events since the last status.
func (m *Model) setStatus(st api.Status) {
	old, had := m.status, m.haveStatus
	m.status = st
	m.haveStatus = true
	if !had || old.DiskLow != st.DiskLow || !sameRateLimit(old.RateLimit, st.RateLimit) ||
		old.NoGit != st.NoGit || !reflect.DeepEqual(old.Problems, st.Problems) || untrusted(old) != untrusted(st) ||
		!maps.EqualFunc(old.Limits, st.Limits, sameRateLimit) || !maps.Equal(old.Spent, st.Spent) {
		m.sched.stale = true
	}
	m.usePolicy()
	m.counts = make(map[loop.Status]int, len(st.Counts))
	for k, v := range st.Counts {
		m.counts[k] = v
	}
}

// untrusted is the untrusted gate's text in st: "" unless loopr.yml's
// commands in force are not trusted (a held reload leaves them trusted).
func untrusted(st api.Status) string {
	if st.Trust == nil || st.Trust.Held {
		return ""
	}
	return st.Trust.Text
}

// applyEvent folds one stream event into the model: the loop as it is after
// the event replaces the old record, and the status counts move with it.
func (m *Model) applyEvent(sm api.StreamMsg) {
	m.version2++
	var old *loop.Loop
	if sm.Loop != nil {
		old = m.loops[sm.Loop.ID]
		if old != nil && sm.Loop.UpdatedAt.Before(old.UpdatedAt) {
			return // an action's result already gave us a newer record
		}
		l := displayable(*sm.Loop)
		m.loops[l.ID] = &l
		if delta := l.Usage.CostUSD - costOf(old); delta != 0 {
			m.addCost(&l, delta)
		}
		if schedChange(old, &l) {
			m.sched.stale = true
		}
		if old == nil || old.Parent != l.Parent {
			m.structDirty = true
			m.dirty = true
		}
		if m.flat || m.filter != "" || (old == nil || old.Status != l.Status) && (needsYou(l.Status) || old != nil && needsYou(old.Status)) {
			m.dirty = true // the rows depend on statuses (the "Needs you" group too)
		}
	}
	if m.counts != nil && sm.Loop != nil {
		to := sm.Loop.Status
		switch {
		case old != nil:
			if old.Status != to {
				m.counts[old.Status]--
				m.counts[to]++
			}
		case sm.Event != nil && sm.Event.From != "":
			m.counts[sm.Event.From]--
			m.counts[to]++
		default:
			m.counts[to]++
		}
	}
}

// displayable escapes the text agents write (titles, tasks, feedback,
// reasons) as a record enters the model, so that no view can put an escape
// sequence on the user's terminal (termsafe).
func displayable(l loop.Loop) loop.Loop {
	l.Title = termsafe.Line(l.Title)
	l.Task = termsafe.Text(l.Task)
	l.Feedback = termsafe.Text(l.Feedback)
	l.Reason = termsafe.Text(l.Reason)
	l.TriggeredBy = termsafe.Line(l.TriggeredBy)
	l.ConflictKey = termsafe.Line(l.ConflictKey) // from artifacts too
	l.Answer = termsafe.Text(l.Answer)
	if l.Progress != nil {
		p := *l.Progress
		p.Text = termsafe.Line(p.Text) // an agent's words
		l.Progress = &p
	}
	if l.Needs != nil {
		n := *l.Needs
		n.Detail = termsafe.Text(n.Detail) // an agent's question
		l.Needs = &n
	}
	return l
}

// schedChange reports whether replacing old (nil: new) with l can change
// the plan. A running loop's progress (iterations, output) cannot: the plan
// reads only its type, owner and conflict key, and its children only its
// status.
func schedChange(old, l *loop.Loop) bool {
	return old == nil || old.Status != l.Status || l.Status.Waiting() || old.Parent != l.Parent ||
		old.Type != l.Type || old.Owner != l.Owner || old.ConflictKey != l.ConflictKey
}

// sameRateLimit reports whether two rate-limit states block and ramp alike.
func sameRateLimit(a, b ratelimit.State) bool {
	return a.BackoffUntil.Equal(b.BackoffUntil) && a.RecoveryUntil.Equal(b.RecoveryUntil)
}

// applyLoop takes the record an action returned, ahead of its event.
func (m *Model) applyLoop(l loop.Loop) {
	if l.ID == "" {
		return
	}
	m.applyEvent(api.StreamMsg{Type: api.StreamEvent, Loop: &l})
}

// rebuildChildren indexes the tree: children by parent, sorted by id. A loop
// whose parent the model does not hold (finished long ago) is shown as a root.
func (m *Model) rebuildChildren() {
	ch := make(map[string][]string, len(m.loops)/4+1)
	for id, l := range m.loops {
		p := l.Parent
		if _, ok := m.loops[p]; !ok {
			p = ""
		}
		ch[p] = append(ch[p], id)
	}
	for _, ids := range ch {
		slices.Sort(ids)
	}
	m.children = ch
	m.structDirty = false
}

// defaultFolds opens the subtrees that hold unfinished work and folds the
// finished ones, so a long-lived workspace opens calm. It runs on each
// snapshot; the user's own folds win over it.
func (m *Model) defaultFolds() {
	m.defaultOpen = make(map[string]bool)
	var walk func(id string) bool
	walk = func(id string) bool {
		active := !m.loops[id].Status.Terminal()
		kids := m.children[id]
		for _, c := range kids {
			if walk(c) {
				active = true
			}
		}
		if len(kids) > 0 {
			m.defaultOpen[id] = active
		}
		return active
	}
	for _, r := range m.children[""] {
		walk(r)
	}
}

// isOpen reports whether id's children are shown.
func (m *Model) isOpen(id string) bool {
	if v, ok := m.userFold[id]; ok {
		return v
	}
	if v, ok := m.defaultOpen[id]; ok {
		return v
	}
	return true
}

// rebuild recomputes what depends on the loops, the clock and the view
// settings: the plan, when its inputs changed or time changed it, and the
// visible rows. The selection stays on the same loop when it is still
// visible.
func (m *Model) rebuild() {
	if m.structDirty {
		m.rebuildChildren()
	}
	if m.refreshSchedule() && m.flat {
		m.dirty = true // the flat rows are the plan's order
	}
	if m.dirty {
		m.buildRows()
	}
}

// buildRows lays out the visible rows: the tree (folds applied) or, in the
// flat view, the waiting loops in scheduling order; both under the filter.
func (m *Model) buildRows() {
	f := parseFilter(m.filter)
	rows := m.rows[:0:0]
	if m.flat {
		for i := range m.sched.rows {
			id := m.sched.rows[i].Loop.ID
			if f.match(m.loops[id]) {
				rows = append(rows, row{id: id, rank: i + 1})
			}
		}
	} else if f.empty() {
		rows = m.needsRows(rows)
		var walk func(id string, depth int)
		walk = func(id string, depth int) {
			kids := m.children[id]
			open := len(kids) > 0 && m.isOpen(id)
			rows = append(rows, row{id: id, depth: depth, hasKids: len(kids) > 0, open: open})
			if open {
				for _, c := range kids {
					walk(c, depth+1)
				}
			}
		}
		for _, r := range m.children[""] {
			walk(r, 0)
		}
	} else {
		// Under a filter the tree shows every match with its ancestors for
		// context, whatever the folds.
		keep := map[string]bool{}
		var mark func(id string) bool
		mark = func(id string) bool {
			k := f.match(m.loops[id])
			for _, c := range m.children[id] {
				if mark(c) {
					k = true
				}
			}
			if k {
				keep[id] = true
			}
			return k
		}
		for _, r := range m.children[""] {
			mark(r)
		}
		var walk func(id string, depth int)
		walk = func(id string, depth int) {
			kids := m.children[id]
			rows = append(rows, row{id: id, depth: depth, hasKids: len(kids) > 0, open: true, context: !f.match(m.loops[id])})
			for _, c := range kids {
				if keep[c] {
					walk(c, depth+1)
				}
			}
		}
		for _, r := range m.children[""] {
			if keep[r] {
				walk(r, 0)
			}
		}
	}
	m.rows = rows
	m.dirty = false
	m.cursor = m.indexOf(m.sel, m.cursor)
	m.syncSelection()
}

// indexOf finds id in the rows (the row nearest fallback when it shows
// twice: in the "Needs you" group and in its tree), or clamps fallback
// into range.
func (m *Model) indexOf(id string, fallback int) int {
	best := -1
	if id != "" {
		for i := range m.rows {
			if m.rows[i].id == id && (best < 0 || abs(i-fallback) < abs(best-fallback)) {
				best = i
			}
		}
	}
	if best >= 0 {
		return best
	}
	return max(0, min(fallback, len(m.rows)-1))
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// syncSelection records the selected loop's id and keeps the cursor inside
// the viewport.
func (m *Model) syncSelection() {
	if len(m.rows) == 0 {
		m.cursor, m.offset = 0, 0
		m.sel = ""
		return
	}
	m.cursor = max(0, min(m.cursor, len(m.rows)-1))
	m.skipLabel(1)
	m.sel = m.rows[m.cursor].id
	h := max(1, m.layout().body)
	if m.cursor < m.offset {
		m.offset = m.cursor
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.rows)-h))
}

// selected returns the selected loop, or nil.
func (m *Model) selected() *loop.Loop {
	if m.sel == "" {
		return nil
	}
	return m.loops[m.sel]
}

// descendants counts the unfinished loops below id (a cancel takes them too).
func (m *Model) descendants(id string) int {
	n := 0
	for _, c := range m.children[id] {
		if !m.loops[c].Status.Terminal() {
			n++
		}
		n += m.descendants(c)
	}
	return n
}

// filter is a parsed `/` query: free words match the title or id
// (case-insensitive, all must match); type:T and status:S narrow by type and
// status (prefixes work: status:await). Several values of one key are ORed.
type filter struct {
	words, types, statuses []string
}

func parseFilter(q string) filter {
	var f filter
	for _, tok := range strings.Fields(strings.ToLower(q)) {
		switch {
		case strings.HasPrefix(tok, "type:") && len(tok) > 5:
			f.types = append(f.types, tok[5:])
		case strings.HasPrefix(tok, "status:") && len(tok) > 7:
			f.statuses = append(f.statuses, tok[7:])
		default:
			f.words = append(f.words, tok)
		}
	}
	return f
}

func (f filter) empty() bool { return len(f.words)+len(f.types)+len(f.statuses) == 0 }

func (f filter) match(l *loop.Loop) bool {
	if l == nil {
		return false
	}
	if len(f.types) > 0 && !slices.ContainsFunc(f.types, func(t string) bool { return strings.HasPrefix(l.Type, t) }) {
		return false
	}
	if len(f.statuses) > 0 && !slices.ContainsFunc(f.statuses, func(s string) bool { return strings.HasPrefix(string(l.Status), s) }) {
		return false
	}
	if len(f.words) == 0 {
		return true
	}
	title, id := strings.ToLower(l.Title), strings.ToLower(l.ID)
	for _, w := range f.words {
		if !strings.Contains(title, w) && !strings.Contains(id, w) {
			return false
		}
	}
	return true
}

// costOf is what a record says its loop spent, 0 for none.
func costOf(l *loop.Loop) float64 {
	if l == nil {
		return 0
	}
	return l.Usage.CostUSD
}

// addCost adds delta dollars to l's rolled-up cost and its ancestors'.
func (m *Model) addCost(l *loop.Loop, delta float64) {
	if delta == 0 {
		return
	}
	if m.costs == nil {
		m.costs = map[string]float64{}
	}
	for i := 0; l != nil && i < 1000; i++ {
		m.costs[l.ID] += delta
		if l.Parent == "" {
			return
		}
		l = m.loops[l.Parent]
	}
}
