package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// Timeouts and sizes of the requests the dashboard makes.
const (
	requestTimeout = 10 * time.Second
	outputBytes    = 32 << 10 // tail of agent.log asked for each second
	outputEvery    = time.Second
	maxBatch       = 512 // stream messages folded into one update
	redialMax      = 10 * time.Second
)

var errNoClient = errors.New("no daemon client configured")

type inputMode int

const (
	modeNormal   inputMode = iota
	modeFilter             // typing a / filter
	modeConfirm            // a y/n question is open
	modeFeedback           // typing iterate feedback
)

type paneKind int

const (
	paneNone paneKind = iota
	paneDetails
	paneWhy
	paneOutput
)

type connState int

const (
	connConnecting connState = iota
	connConnected
	connDown
)

// Messages. Each result carries the generation it was asked for, so that a
// late answer for a closed pane or a dropped connection is ignored.
type (
	tickMsg         struct{ now time.Time }
	streamOpenedMsg struct {
		gen    int
		client Client
		ch     <-chan api.StreamMsg
	}
	streamMsg struct {
		gen    int
		msgs   []api.StreamMsg
		closed bool
		now    time.Time
	}
	streamFailedMsg struct {
		gen int
		err error
	}
	redialMsg struct{ gen int }
	whyMsg    struct {
		gen int
		why api.Why
		err error
	}
	outputMsg struct {
		gen  int
		text string
		err  error
	}
	outputTickMsg struct{ gen int }
	actMsg        struct {
		action string
		id     string
		res    api.ActionResult
		err    error
	}
)

// confirmation is an open y/n question about an action.
type confirmation struct {
	action, id, prompt string
}

type whyPane struct {
	gen     int
	id      string
	loading bool
	why     api.Why
	err     error
}

type outputPane struct {
	gen     int
	id      string
	loading bool
	text    string
	err     error
}

// flash is the one-line message in the status line until the next key.
type flash struct {
	text string
	err  bool
}

// Model is the dashboard's state. It implements tea.Model; create it with New.
type Model struct {
	ctx       context.Context
	clock     func() time.Time
	now       time.Time
	policy    PolicyView
	workspace string
	version   string
	keys      keyMap
	st        styles
	help      help.Model
	input     textinput.Model

	width, height int

	// Connection to the daemon.
	client  Client
	dial    func(context.Context) (Client, error)
	conn    connState
	gen     int
	stream  <-chan api.StreamMsg
	attempt int
	retryAt time.Time
	connErr error
	synced  bool // a snapshot has arrived

	// What the daemon told us.
	loops       map[string]*loop.Loop
	children    map[string][]string
	status      api.Status
	haveStatus  bool
	counts      map[loop.Status]int
	sched       schedule
	cv          capsView // usage when the schedule was computed
	structDirty bool
	dirty       bool

	// View state.
	rows        []row
	cursor      int
	offset      int
	sel         string
	flat        bool
	userFold    map[string]bool
	defaultOpen map[string]bool
	filter      string
	prevFilter  string
	mode        inputMode
	showHelp    bool
	pane        paneKind
	confirm     confirmation
	why         whyPane
	out         outputPane
	flash       flash
}

// New returns the dashboard's model. It starts nothing: Init subscribes to
// the event stream.
func New(o Options) Model {
	clock := o.Now
	if clock == nil {
		clock = time.Now
	}
	pol := o.Policy
	if pol.Base == nil {
		pol = DefaultPolicyView()
	}
	st := newStyles(lipgloss.NewRenderer(os.Stdout), o.NoColor)
	m := Model{
		ctx:         context.Background(),
		clock:       clock,
		now:         clock(),
		policy:      pol,
		workspace:   shortPath(o.Workspace),
		version:     o.Version,
		keys:        newKeyMap(),
		client:      o.Client,
		dial:        o.Dial,
		loops:       map[string]*loop.Loop{},
		children:    map[string][]string{},
		userFold:    map[string]bool{},
		defaultOpen: map[string]bool{},
		width:       80,
		height:      24,
	}
	m.setStyles(st)
	return m
}

// setStyles installs st in the model and in the bubbles it embeds.
func (m *Model) setStyles(st styles) {
	m.st = st
	h := help.New()
	h.ShortSeparator = "  "
	h.FullSeparator = "    "
	h.Styles = help.Styles{
		ShortKey: st.HelpKey, ShortDesc: st.HelpDesc, ShortSeparator: st.HelpSep, Ellipsis: st.HelpSep,
		FullKey: st.HelpKey, FullDesc: st.HelpDesc, FullSeparator: st.HelpSep,
	}
	h.Width = m.help.Width
	m.help = h
	in := textinput.New()
	in.Cursor.SetMode(cursor.CursorStatic)
	in.Cursor.Style = st.r.NewStyle().Reverse(true)
	in.Cursor.TextStyle = st.r.NewStyle()
	in.PromptStyle = st.Prompt
	in.TextStyle = st.r.NewStyle()
	in.PlaceholderStyle = st.Dim
	in.CharLimit = 2000
	m.input = in
}

// shortPath writes the user's home directory as ~.
func shortPath(p string) string {
	if p == "" {
		return ""
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if p == home {
			return "~"
		}
		if rel, err := filepath.Rel(home, p); err == nil && !strings.HasPrefix(rel, "..") {
			return "~" + string(filepath.Separator) + rel
		}
	}
	return p
}

// Init subscribes to the event stream and starts the clock.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.connect(m.gen, m.client == nil), m.tick())
}

// tick reads the clock once a second, for ages, countdowns and live priorities.
func (m Model) tick() tea.Cmd {
	clock := m.clock
	return tea.Tick(time.Second, func(time.Time) tea.Msg { return tickMsg{now: clock()} })
}

// connect opens the event stream, dialling first when useDial.
func (m Model) connect(gen int, useDial bool) tea.Cmd {
	ctx, c, dial := m.ctx, m.client, m.dial
	return func() tea.Msg {
		if useDial && dial != nil {
			nc, err := dial(ctx)
			if err != nil {
				return streamFailedMsg{gen: gen, err: err}
			}
			c = nc
		}
		if c == nil {
			return streamFailedMsg{gen: gen, err: errNoClient}
		}
		ch, err := c.Events(ctx)
		if err != nil {
			return streamFailedMsg{gen: gen, err: err}
		}
		return streamOpenedMsg{gen: gen, client: c, ch: ch}
	}
}

// waitStream reads the next stream message, plus every message already
// queued behind it (up to maxBatch), so a burst costs one rebuild and a
// single change is shown on the very next frame.
func (m Model) waitStream() tea.Cmd {
	gen, ch, clock := m.gen, m.stream, m.clock
	return func() tea.Msg {
		first, ok := <-ch
		if !ok {
			return streamMsg{gen: gen, closed: true, now: clock()}
		}
		msgs := []api.StreamMsg{first}
		for len(msgs) < maxBatch {
			select {
			case sm, ok := <-ch:
				if !ok {
					return streamMsg{gen: gen, msgs: msgs, closed: true, now: clock()}
				}
				msgs = append(msgs, sm)
			default:
				return streamMsg{gen: gen, msgs: msgs, now: clock()}
			}
		}
		return streamMsg{gen: gen, msgs: msgs, now: clock()}
	}
}

// redialDelay is the wait before reconnect attempt n (0-based): 1s, 2s, 4s, 8s, 10s …
func redialDelay(n int) time.Duration {
	d := time.Second
	for i := 0; i < n && d < redialMax; i++ {
		d *= 2
	}
	return min(d, redialMax)
}

// disconnected records a lost (or failed) connection and schedules a redial.
func (m *Model) disconnected(err error) tea.Cmd {
	m.conn = connDown
	m.stream = nil
	m.connErr = err
	if errors.Is(err, errNoClient) && m.dial == nil {
		return nil // nothing to retry with
	}
	d := redialDelay(m.attempt)
	m.attempt++
	m.retryAt = m.now.Add(d)
	gen := m.gen
	return tea.Tick(d, func(time.Time) tea.Msg { return redialMsg{gen: gen} })
}

// Update handles one message: pure state changes, I/O in the returned commands.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width - 2
		m.sizeInput()
		m.syncSelection()
		return m, nil

	case tickMsg:
		m.now = msg.now
		if m.synced {
			m.computeSchedule()
			if m.flat || m.dirty {
				m.buildRows()
			}
		}
		return m, m.tick()

	case streamOpenedMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		old := m.client
		m.client, m.stream = msg.client, msg.ch
		m.conn, m.connErr = connConnected, nil
		cmd := m.waitStream()
		if c, ok := old.(io.Closer); ok && old != msg.client {
			cmd = tea.Batch(cmd, func() tea.Msg { _ = c.Close(); return nil }) // the redialled client replaces it
		}
		return m, cmd

	case streamFailedMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		return m, m.disconnected(msg.err)

	case streamMsg:
		if msg.gen != m.gen {
			return m, nil
		}
		return m.applyStream(msg)

	case redialMsg:
		if msg.gen != m.gen || m.conn != connDown {
			return m, nil
		}
		m.gen++
		m.conn = connConnecting
		return m, m.connect(m.gen, true)

	case whyMsg:
		if msg.gen == m.why.gen {
			m.why.loading, m.why.why, m.why.err = false, msg.why, msg.err
		}
		return m, nil

	case outputMsg:
		if msg.gen != m.out.gen || m.pane != paneOutput {
			return m, nil
		}
		m.out.loading = false
		m.out.err = msg.err
		if msg.err == nil {
			m.out.text = msg.text
		}
		gen := msg.gen
		return m, tea.Tick(outputEvery, func(time.Time) tea.Msg { return outputTickMsg{gen: gen} })

	case outputTickMsg:
		if msg.gen != m.out.gen || m.pane != paneOutput {
			return m, nil // the pane closed: the poll stops here
		}
		return m, m.fetchOutput()

	case actMsg:
		return m.actDone(msg)

	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 {
			return m.keyRunes(msg)
		}
		before := m.sel
		m2, cmd := m.handleKey(msg)
		if m2.sel != before && m2.sel != "" {
			cmd = tea.Batch(cmd, m2.follow())
		}
		return m2, cmd
	}
	if m.mode == modeFilter || m.mode == modeFeedback {
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	return m, nil
}

// keyRunes handles several runes read at once. Typed fast (or sent by a
// script) keys arrive together; each is one key press. A paste is text: it
// goes to an open prompt whole and is ignored elsewhere, so pasting "cy"
// never cancels a loop.
func (m Model) keyRunes(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if msg.Paste {
		if m.mode != modeFilter && m.mode != modeFeedback {
			return m, nil
		}
		before := m.sel
		m2, cmd := m.handleKey(msg)
		if m2.sel != before && m2.sel != "" {
			cmd = tea.Batch(cmd, m2.follow())
		}
		return m2, cmd
	}
	var cmds []tea.Cmd
	var cur tea.Model = m
	for _, r := range msg.Runes {
		var cmd tea.Cmd
		cur, cmd = cur.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt})
		cmds = append(cmds, cmd)
	}
	return cur, tea.Batch(cmds...)
}

// applyStream folds a batch of stream messages into the model.
func (m Model) applyStream(msg streamMsg) (tea.Model, tea.Cmd) {
	m.now = msg.now
	refetchWhy := false
	for _, sm := range msg.msgs {
		switch sm.Type {
		case api.StreamSnapshot:
			m.applySnapshot(sm)
			m.attempt = 0
			refetchWhy = true
		case api.StreamEvent:
			m.applyEvent(sm)
			if sm.Loop != nil && sm.Loop.ID == m.why.id {
				refetchWhy = true
			}
		case api.StreamStatus:
			if sm.Status != nil {
				m.setStatus(*sm.Status)
			}
		}
	}
	var cmds []tea.Cmd
	if m.synced {
		m.rebuild()
	}
	if refetchWhy && m.pane == paneWhy && m.sel != "" {
		cmds = append(cmds, m.openWhy())
	}
	if msg.closed {
		cmds = append(cmds, m.disconnected(nil))
	} else {
		cmds = append(cmds, m.waitStream())
	}
	return m, tea.Batch(cmds...)
}

// follow refreshes the open pane after the selection moved.
func (m *Model) follow() tea.Cmd {
	switch m.pane {
	case paneWhy:
		return m.openWhy()
	case paneOutput:
		return m.openOutput()
	}
	return nil
}

// openWhy asks the daemon to explain the selected loop.
func (m *Model) openWhy() tea.Cmd {
	m.why.gen++
	m.why.id = m.sel
	m.why.loading = true
	m.why.err = nil
	if m.client == nil || m.sel == "" {
		m.why.loading = false
		m.why.err = errors.New("not connected to the daemon")
		return nil
	}
	c, ctx, gen, id, now := m.client, m.ctx, m.why.gen, m.sel, m.now
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		w, err := c.Why(ctx, id, now)
		return whyMsg{gen: gen, why: w, err: err}
	}
}

// openOutput starts following the selected loop's agent output.
func (m *Model) openOutput() tea.Cmd {
	m.out = outputPane{gen: m.out.gen + 1, id: m.sel, loading: true}
	return m.fetchOutput()
}

func (m *Model) fetchOutput() tea.Cmd {
	if m.client == nil || m.out.id == "" {
		m.out.loading = false
		m.out.err = errors.New("not connected to the daemon")
		return nil
	}
	c, ctx, gen, id := m.client, m.ctx, m.out.gen, m.out.id
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		text, err := c.Output(ctx, id, outputBytes)
		return outputMsg{gen: gen, text: text, err: err}
	}
}

// handleKey routes a key by what has the focus: a prompt, the help overlay
// or the list.
func (m Model) handleKey(k tea.KeyMsg) (Model, tea.Cmd) {
	if key.Matches(k, m.keys.ForceQuit) {
		return m, tea.Quit
	}
	switch m.mode {
	case modeFilter:
		return m.filterKey(k)
	case modeFeedback:
		return m.feedbackKey(k)
	case modeConfirm:
		return m.confirmKey(k)
	}
	m.flash = flash{}
	if m.showHelp {
		switch {
		case key.Matches(k, m.keys.Quit):
			return m, tea.Quit
		case key.Matches(k, m.keys.Help, m.keys.Close):
			m.showHelp = false
		}
		return m, nil
	}
	ks := m.keys
	switch {
	case key.Matches(k, ks.Up):
		m.move(-1)
	case key.Matches(k, ks.Down):
		m.move(1)
	case key.Matches(k, ks.PageUp):
		m.move(-max(1, m.layout().body-1))
	case key.Matches(k, ks.PageDown):
		m.move(max(1, m.layout().body-1))
	case key.Matches(k, ks.Top):
		m.move(-len(m.rows))
	case key.Matches(k, ks.Bottom):
		m.move(len(m.rows))
	case key.Matches(k, ks.Collapse):
		m.collapse()
	case key.Matches(k, ks.Expand):
		m.expand()
	case key.Matches(k, ks.Details):
		m.togglePane(paneDetails)
	case key.Matches(k, ks.Why):
		if m.togglePane(paneWhy) {
			return m, m.openWhy()
		}
	case key.Matches(k, ks.Output):
		if m.togglePane(paneOutput) {
			return m, m.openOutput()
		}
	case key.Matches(k, ks.Filter):
		m.mode = modeFilter
		m.prevFilter = m.filter
		m.input.Prompt = "/"
		m.input.Placeholder = "words, type:ralph, status:pending"
		m.input.SetValue(m.filter)
		m.input.CursorEnd()
		m.sizeInput()
		return m, m.input.Focus()
	case key.Matches(k, ks.Flat):
		m.flat = !m.flat
		m.buildRows()
	case key.Matches(k, ks.Close):
		switch {
		case m.pane != paneNone:
			m.pane = paneNone
			m.out.gen++ // stop the output poll
			m.syncSelection()
		case m.filter != "":
			m.filter = ""
			m.buildRows()
		}
	case key.Matches(k, ks.Cancel):
		return m.startAction(api.ActionCancel)
	case key.Matches(k, ks.Reset):
		return m.startAction(api.ActionReset)
	case key.Matches(k, ks.Pause):
		return m.startAction(api.ActionPause)
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

// sizeInput fits the text input between its prompt and the end of the
// status line (leaving room for the filter's match count).
func (m *Model) sizeInput() {
	m.input.Width = max(8, m.width-lipgloss.Width(m.input.Prompt)-16)
}

// togglePane opens pane p, or closes it when it is already open. It reports
// whether p is now open.
func (m *Model) togglePane(p paneKind) bool {
	if m.pane == p {
		m.pane = paneNone
		m.out.gen++
		m.syncSelection()
		return false
	}
	if m.pane == paneOutput {
		m.out.gen++
	}
	m.pane = p
	m.syncSelection()
	return true
}

func (m *Model) move(d int) {
	if len(m.rows) == 0 {
		return
	}
	m.cursor = max(0, min(m.cursor+d, len(m.rows)-1))
	m.syncSelection()
}

// collapse folds the selected loop, or goes to its parent when it is a leaf
// or already folded.
func (m *Model) collapse() {
	if len(m.rows) == 0 || m.flat {
		return
	}
	r := m.rows[m.cursor]
	if r.hasKids && r.open && m.filter == "" {
		m.userFold[r.id] = false
		m.buildRows()
		return
	}
	for i := m.cursor - 1; i >= 0; i-- {
		if m.rows[i].depth < r.depth {
			m.cursor = i
			m.syncSelection()
			return
		}
	}
}

// expand unfolds the selected loop, or steps onto its first child when it
// is already open.
func (m *Model) expand() {
	if len(m.rows) == 0 || m.flat {
		return
	}
	r := m.rows[m.cursor]
	if !r.hasKids {
		return
	}
	if !r.open {
		m.userFold[r.id] = true
		m.buildRows()
		return
	}
	if m.cursor+1 < len(m.rows) && m.rows[m.cursor+1].depth > r.depth {
		m.move(1)
	}
}

func (m Model) filterKey(k tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Accept):
		m.mode = modeNormal
		m.input.Blur()
		return m, nil
	case k.Type == tea.KeyEsc:
		m.mode = modeNormal
		m.input.Blur()
		m.filter = m.prevFilter
		m.buildRows()
		return m, nil
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	if v := m.input.Value(); v != m.filter {
		m.filter = v
		m.buildRows()
	}
	return m, cmd
}

func (m Model) feedbackKey(k tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Accept):
		text := strings.TrimSpace(m.input.Value())
		if text == "" {
			m.flash = flash{text: "feedback is empty: write what the next iteration should change, or esc", err: true}
			return m, nil
		}
		m.mode = modeNormal
		m.input.Blur()
		return m, m.act(m.confirm.id, api.ActionIterate, api.ActionRequest{Feedback: text})
	case k.Type == tea.KeyEsc:
		m.mode = modeNormal
		m.input.Blur()
		m.flash = flash{text: "iterate cancelled"}
		return m, nil
	}
	m.flash = flash{}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

func (m Model) confirmKey(k tea.KeyMsg) (Model, tea.Cmd) {
	switch {
	case key.Matches(k, m.keys.Yes):
		m.mode = modeNormal
		c := m.confirm
		return m, m.act(c.id, c.action, api.ActionRequest{})
	case key.Matches(k, m.keys.No):
		m.mode = modeNormal
		m.flash = flash{text: verbNoun(m.confirm.action) + " not confirmed: nothing changed"}
	}
	return m, nil
}

// startAction checks that the action fits the selected loop's status, then
// asks for confirmation or feedback where it must, or acts at once. A refusal
// says why in the status line.
func (m Model) startAction(action string) (Model, tea.Cmd) {
	l := m.selected()
	if l == nil {
		m.flash = flash{text: "no loop selected", err: true}
		return m, nil
	}
	if refusal := refuse(action, l); refusal != "" {
		m.flash = flash{text: refusal, err: true}
		return m, nil
	}
	if m.client == nil || m.conn != connConnected {
		m.flash = flash{text: "not connected to the daemon: try again when it is back", err: true}
		return m, nil
	}
	name := fmt.Sprintf("%s %q", l.Type, title(l))
	switch action {
	case api.ActionCancel:
		what := name
		if n := m.descendants(l.ID); n > 0 {
			what += fmt.Sprintf(" and %d unfinished loop%s under it", n, plural(n))
		}
		m.mode = modeConfirm
		m.confirm = confirmation{action: action, id: l.ID, prompt: "cancel " + what + "?"}
		return m, nil
	case api.ActionReject:
		m.mode = modeConfirm
		m.confirm = confirmation{action: action, id: l.ID, prompt: "reject " + name + "? it fails and spawns nothing"}
		return m, nil
	case api.ActionIterate:
		m.mode = modeFeedback
		m.confirm = confirmation{action: action, id: l.ID}
		m.input.Prompt = "feedback for " + name + ": "
		m.input.Placeholder = "what should the next iteration change?"
		m.input.SetValue("")
		m.sizeInput()
		return m, m.input.Focus()
	case api.ActionPause:
		if l.Status == loop.Paused {
			action = api.ActionResume
		}
	}
	return m, m.act(l.ID, action, api.ActionRequest{})
}

// refuse returns why action does not apply to l, or "" when it does.
func refuse(action string, l *loop.Loop) string {
	st := statusText(l.Status, false)
	switch action {
	case api.ActionCancel:
		if !loop.CanTransition(l.Status, loop.Cancelled) {
			return fmt.Sprintf("can't cancel: this %s is already %s", l.Type, st)
		}
	case api.ActionReset:
		if l.Status != loop.Failed {
			return fmt.Sprintf("can't reset: only failed loops reset, this %s is %s", l.Type, st)
		}
	case api.ActionPause:
		if !l.Status.Waiting() {
			return fmt.Sprintf("can't pause: only pending loops pause (and paused ones resume), this %s is %s", l.Type, st)
		}
	case api.ActionApprove, api.ActionReject, api.ActionIterate:
		if l.Status != loop.AwaitingApproval {
			return fmt.Sprintf("can't %s: only a plan awaiting approval can be %s, this %s is %s",
				action, pastTense(action), l.Type, st)
		}
	}
	return ""
}

// act sends an action to the daemon.
func (m Model) act(id, action string, req api.ActionRequest) tea.Cmd {
	c, ctx := m.client, m.ctx
	if c == nil {
		return nil
	}
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		res, err := c.Act(ctx, id, action, req)
		return actMsg{action: action, id: id, res: res, err: err}
	}
}

func (m Model) actDone(msg actMsg) (tea.Model, tea.Cmd) {
	if msg.err != nil {
		m.flash = flash{text: fmt.Sprintf("%s %s: %v", msg.action, msg.id, msg.err), err: true}
		return m, nil
	}
	m.applyLoop(msg.res.Loop)
	name := msg.id
	if l := m.loops[msg.id]; l != nil {
		name = fmt.Sprintf("%s %q", l.Type, title(l))
	}
	text := pastTense(msg.action) + " " + name
	if msg.action == api.ActionIterate {
		text = name + " goes back for another iteration with your feedback"
	}
	if n := len(msg.res.Affected); n > 0 {
		text += fmt.Sprintf(" (+%d more)", n)
	}
	m.flash = flash{text: text}
	if m.synced {
		m.rebuild()
	}
	return m, nil
}

func pastTense(action string) string {
	switch action {
	case api.ActionCancel:
		return "cancelled"
	case api.ActionReset:
		return "reset"
	case api.ActionPause:
		return "paused"
	case api.ActionResume:
		return "resumed"
	case api.ActionApprove:
		return "approved"
	case api.ActionReject:
		return "rejected"
	case api.ActionIterate:
		return "iterated"
	}
	return action + "ed"
}

func verbNoun(action string) string {
	switch action {
	case api.ActionCancel:
		return "cancel"
	case api.ActionReject:
		return "reject"
	}
	return action
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// title is a loop's display name: its title, else its id.
func title(l *loop.Loop) string {
	if l.Title != "" {
		return l.Title
	}
	return l.ID
}
