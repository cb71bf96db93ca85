package tui

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
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
	"github.com/loopr-dev/loopr/scheduler"
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
	modeFeedback           // typing iterate feedback (or, with confirm.action answer, an answer)
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
	view    *outputView // text rendered (output.go)
}

// flash is the one-line message in the status line until the next key.
type flash struct {
	text string
	err  bool
	note bool // a notification from the event stream, not the answer to a key
	// names lists loops an action created or changed, by id: the status
	// line shows their titles after text (children an approve created
	// arrive on the event stream a moment after the answer).
	names []string
}

// Model is the dashboard's state. It implements tea.Model; create it with New.
type Model struct {
	ctx       context.Context
	clock     func() time.Time
	now       time.Time
	policy    scheduler.Policy // as configured
	plan      scheduler.Policy // policy with the daemon's caps: what the plan runs with
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
	doneHint    string
	sched       schedule              // scheduler.Plan over the loops held (sched.go)
	cv          capsView              // usage when the plan was made
	scratch     []scheduler.Candidate // reused by computeSchedule
	structDirty bool
	dirty       bool
	costs       map[string]float64 // dollars spent by each loop and its descendants

	// View state.
	rows         []row
	cursor       int
	offset       int
	sel          string
	flat         bool
	userFold     map[string]bool
	defaultOpen  map[string]bool
	filter       string
	prevFilter   string
	mode         inputMode
	showHelp     bool
	pane         paneKind
	confirm      confirmation
	why          whyPane
	out          outputPane
	outRaw       bool                   // R: the output pane shows the log as it was
	presetOf     func(loop.Loop) string // Options.Preset
	attach       func(string) *exec.Cmd // Options.Attach
	flash        flash
	interrupted  bool // quit by ctrl+c (Run reports it with Options.ReportInterrupt)
	art          artifactView
	readArtifact func(context.Context, loop.Loop) (string, error)
	diff         diffView // diff.go
	comment      func(ctx context.Context, id, path string, line int, text string) error
	noColor      bool

	// "Needs you" (needs.go).
	notifyOut  io.Writer
	focusKnown bool // the terminal reports focus
	focused    bool
	version2   int                 // bumped by every event: invalidates treeStats
	trees      map[string]treeStat // per plan, computed on demand
}

// New returns the dashboard's model. It starts nothing: Init subscribes to
// the event stream.
func New(o Options) Model {
	clock := o.Now
	if clock == nil {
		clock = time.Now
	}
	pol := o.Policy
	if pol.Base == nil && pol.MaxLoops == 0 {
		pol = scheduler.DefaultPolicy()
	}
	st := newStyles(lipgloss.NewRenderer(os.Stdout), o.NoColor)
	m := Model{
		ctx:          context.Background(),
		clock:        clock,
		now:          clock(),
		policy:       pol,
		plan:         pol,
		workspace:    shortPath(o.Workspace),
		version:      o.Version,
		doneHint:     o.DoneHint,
		readArtifact: o.ReadArtifact,
		comment:      o.Comment,
		noColor:      o.NoColor,
		presetOf:     o.Preset,
		attach:       o.Attach,
		notifyOut:    o.Notify,
		trees:        map[string]treeStat{},
		keys:         newKeyMap(),
		client:       o.Client,
		dial:         o.Dial,
		loops:        map[string]*loop.Loop{},
		children:     map[string][]string{},
		userFold:     map[string]bool{},
		defaultOpen:  map[string]bool{},
		width:        80,
		height:       24,
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

// Update handles one message: pure state changes, I/O in the returned commands.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width - 2
		m.sizeInput()
		m.syncSelection()
		m.wrapArtifact()
		if m.diff.open {
			m.moveDiffCursor(0)
		}
		return m, nil

	case artifactMsg:
		m.artifactLoaded(msg)
		return m, nil

	case diffMsg:
		m.diffLoaded(msg)
		return m, nil

	case commentMsg:
		m.commented(msg)
		return m, nil

	case tickMsg:
		m.now = msg.now
		if m.synced {
			m.rebuild() // the plan only when time changed it
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
			m.renderOutput()
		}
		gen := msg.gen
		return m, tea.Tick(outputEvery, func(time.Time) tea.Msg { return outputTickMsg{gen: gen} })

	case outputTickMsg:
		if msg.gen != m.out.gen || m.pane != paneOutput {
			return m, nil // the pane closed: the poll stops here
		}
		return m, m.fetchOutput()

	case attachedMsg:
		m.flash = attachedFlash(msg)
		return m, nil
	case actMsg:
		return m.actDone(msg)

	case tea.FocusMsg:
		m.focusKnown, m.focused = true, true
		return m, nil

	case tea.BlurMsg:
		m.focusKnown, m.focused = true, false
		return m, nil

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

// renderOutput renders what the last read of the log added.
func (m *Model) renderOutput() {
	if m.out.view == nil {
		m.out.view = &outputView{}
	}
	preset, dir := "", ""
	if l := m.loops[m.out.id]; l != nil {
		dir = l.Workdir
		if m.presetOf != nil {
			preset = m.presetOf(*l)
		}
	}
	m.out.view.feed(m.out.text, preset, dir, &m.st)
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
		m.interrupted = true
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
	if m.art.open {
		return m.artifactKey(k)
	}
	if m.diff.open {
		return m.diffKey(k)
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
	case key.Matches(k, ks.Artifact):
		return m.openArtifact()
	case key.Matches(k, ks.Diff):
		return m.openDiff()
	case key.Matches(k, ks.Raw):
		m.outRaw = !m.outRaw
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
	case key.Matches(k, ks.NextNeeds):
		m.nextNeeds()
	case key.Matches(k, ks.Answer):
		return m.startAction(api.ActionAnswer)
	case key.Matches(k, ks.Attach):
		return m.startAttach()
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
	m.input.Width = max(8, m.width-lipgloss.Width(m.input.Prompt)-inputReserve(m.mode))
}

// inputReserve is what the status line keeps beside a text input: the
// filter's match count, or the margins.
func inputReserve(mode inputMode) int {
	if mode == modeFilter {
		return 16
	}
	return 3
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
	if d < 0 {
		m.skipLabel(-1)
	}
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
		m.selectMatch()
	}
	return m, cmd
}

// selectMatch moves the cursor off ancestor-only context rows to the first
// row that matches the filter, so the keys that follow act on a match.
func (m *Model) selectMatch() {
	if m.cursor < len(m.rows) && !m.rows[m.cursor].context {
		return
	}
	for i := range m.rows {
		if !m.rows[i].context {
			m.cursor = i
			m.syncSelection()
			return
		}
	}
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
