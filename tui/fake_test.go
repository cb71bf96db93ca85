package tui

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/muesli/termenv"
)

// fakeClient is a hand-written Client: fixed answers, recorded calls.
type fakeClient struct {
	mu      sync.Mutex
	acts    []actCall
	whys    []string
	outputs []string
	diffs   []string
	diff    map[string]api.Diff
	events  int

	stream  chan api.StreamMsg // returned by Events; nil: a fresh closed-never channel with snap
	snap    api.StreamMsg
	why     map[string]api.Why
	output  map[string]string
	actErr  error
	evErr   error
	actLoop func(id, action string) loop.Loop
}

type actCall struct {
	ID, Action string
	Req        api.ActionRequest
}

var _ Client = (*fakeClient)(nil)

func (f *fakeClient) Events(ctx context.Context) (<-chan api.StreamMsg, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events++
	if f.evErr != nil {
		return nil, f.evErr
	}
	if f.stream != nil {
		return f.stream, nil
	}
	ch := make(chan api.StreamMsg, 1)
	ch <- f.snap
	return ch, nil
}

func (f *fakeClient) Act(ctx context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, actCall{id, action, req})
	if f.actErr != nil {
		return api.ActionResult{}, f.actErr
	}
	var res api.ActionResult
	if f.actLoop != nil {
		res.Loop = f.actLoop(id, action)
	}
	return res, nil
}

func (f *fakeClient) Why(ctx context.Context, id string, now time.Time) (api.Why, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.whys = append(f.whys, id)
	w, ok := f.why[id]
	if !ok {
		return api.Why{}, errors.New("not_found: no such loop")
	}
	return w, nil
}

func (f *fakeClient) Output(ctx context.Context, id string, maxBytes int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outputs = append(f.outputs, id)
	return f.output[id], nil
}

func (f *fakeClient) Diff(ctx context.Context, id string) (api.Diff, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diffs = append(f.diffs, id)
	d, ok := f.diff[id]
	if !ok {
		return api.Diff{}, errors.New("invalid: loop has no branch yet: it has not run")
	}
	return d, nil
}

func (f *fakeClient) calls() []actCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]actCall(nil), f.acts...)
}

// testNow is the fixed clock of every test.
var testNow = time.Date(2026, 4, 20, 12, 4, 19, 0, time.UTC)

// The fixture's ids: ULIDs, as loopr makes them, whose order (creation
// order) is tree order; each names its loop in tests by its short id (the
// last 8 characters, lowercased). idLogout, idCheckout and idWebhooks are
// loops that arrive later in some tests.
const (
	idPlan      = "01JRZK4V8C000000109G6MA1TT"
	idSpec      = "01JRZK4V8C00000020468MYWTD"
	idPhase     = "01JRZK4V8C00000030CMNNV5ZS"
	idUsers     = "01JRZK4V8C000000405DF2C65C"
	idIndex     = "01JRZK4V8C00000050GJKGA71H"
	idSeed      = "01JRZK4V8C00000060EEF30KH8"
	idHandlers  = "01JRZK4V8C00000070NW9HVAAS"
	idLogin     = "01JRZK4V8C0000008078VPE73C"
	idLogout    = "01JRZK4V8C00000085VBB57J0M"
	idLimits    = "01JRZK4V8C00000090SX3A7XN0"
	idCookies   = "01JRZK4V8C00000100465NG5K2"
	idBilling   = "01JRZK4V8C000001101CE0A18K"
	idCheckout  = "01JRZK4V8C000001138TH6R6DF"
	idWebhooks  = "01JRZK4V8C00000116CE6K8R85"
	idOld       = "01JRZK4V8C00000120WZ0BCKS6"
	idPausedRal = "01JRZK4V8C00000130JDQK960H"
)

// fixtureLoops is the sketch of TUI.md as records: a plan whose spec holds a
// finished phase with ralphs waiting (one next to start, one in backoff, one
// failed), a running phase that holds the phase cap, a phase waiting on that
// cap with a child waiting on it, a spec next to start, a plan awaiting
// approval, a cancelled plan and a paused standalone ralph.
func fixtureLoops() []loop.Loop {
	ago := func(d time.Duration) time.Time { return testNow.Add(-d) }
	mk := func(id, typ, title string, st loop.Status, parent string, depth, iter, max int, created time.Duration) loop.Loop {
		return loop.Loop{ID: id, Type: typ, Title: title, Status: st, Parent: parent, Depth: depth,
			Iteration: iter, MaxIterations: max, CreatedAt: ago(created), UpdatedAt: ago(created)}
	}
	plan := mk(idPlan, loop.Plan, "Add OAuth login", loop.Complete, "", 0, 2, 10, 64*time.Minute)
	plan.Artifact = ".loopr/loops/" + idPlan + "/iterations/002/plan.md"
	spec := mk(idSpec, loop.Spec, "Token storage", loop.Complete, idPlan, 1, 1, 25, 58*time.Minute)
	phase := mk(idPhase, loop.Phase, "Migrations", loop.Complete, idSpec, 2, 1, 50, 30*time.Minute)
	users := mk(idUsers, loop.Ralph, "Create users table", loop.Pending, idPhase, 3, 1, 100, 5*time.Minute)
	index := mk(idIndex, loop.Ralph, "Add index", loop.Pending, idPhase, 3, 5, 100, time.Minute)
	index.RunnableAt = testNow.Add(12 * time.Second)
	index.Feedback = "iteration 4: exit 1\n--- FAIL: TestIndex (0.01s)\n    index_test.go:12: missing index users_email_idx"
	index.Workdir = "/home/dev/src/shop/.loopr/worktrees/" + idIndex
	index.TriggeredBy = ".loopr/loops/" + idPhase + "/iterations/001/phase.md"
	seed := mk(idSeed, loop.Ralph, "Seed data", loop.Failed, idPhase, 3, 100, 100, 25*time.Minute)
	seed.Reason = "budget exhausted: 100 iterations without passing validation"
	handlers := mk(idHandlers, loop.Phase, "API handlers", loop.Pending, idSpec, 2, 1, 50, 4*time.Minute)
	login := mk(idLogin, loop.Ralph, "Login handler", loop.Pending, idHandlers, 3, 1, 100, 4*time.Minute)
	limits := mk(idLimits, loop.Phase, "Rate limiting", loop.Running, idSpec, 2, 1, 50, 3*time.Minute)
	limits.StartedAt = ago(2*time.Minute + 10*time.Second)
	cookies := mk(idCookies, loop.Spec, "Session cookies", loop.Pending, idPlan, 1, 1, 25, 2*time.Minute)
	billing := mk(idBilling, loop.Plan, "Billing with Stripe", loop.AwaitingApproval, "", 0, 1, 10, 20*time.Minute)
	billing.Artifact = ".loopr/loops/" + idBilling + "/iterations/001/plan.md"
	billing.Task = "Add billing with Stripe: plans, checkout, webhooks"
	old := mk(idOld, loop.Plan, "Old experiment", loop.Cancelled, "", 0, 1, 10, 3*time.Hour)
	old.Reason = "cancelled by user"
	paused := mk(idPausedRal, loop.Ralph, "Tidy logging", loop.Paused, "", 0, 1, 100, 30*time.Minute)
	return []loop.Loop{plan, spec, phase, users, index, seed, handlers, login, limits, cookies, billing, old, paused}
}

func fixtureStatus() api.Status {
	return api.Status{
		Daemon: true, PID: 4242, Version: "v0.1.0", Protocol: api.ProtocolVersion,
		StartedAt: testNow.Add(-(2*time.Hour + 14*time.Minute)), Workspace: "~/src/shop",
		Counts: map[loop.Status]int{
			loop.Pending: 5, loop.Paused: 1, loop.Running: 1, loop.AwaitingApproval: 1,
			loop.Failed: 1, loop.Complete: 41, loop.Cancelled: 1,
		},
		Running: 1, MaxLoops: 50,
		Types:     []api.TypeUsage{{Type: "plan", Cap: 2}, {Type: "spec", Cap: 5}, {Type: "phase", Running: 1, Cap: 1}, {Type: "ralph", Cap: 50}},
		RateLimit: ratelimit.State{}, Accepting: true,
	}
}

func fixtureSnapshot() api.StreamMsg {
	st := fixtureStatus()
	return api.StreamMsg{Type: api.StreamSnapshot, Seq: 100, Loops: fixtureLoops(), Status: &st}
}

// fixtureWhy is the daemon's answer for "Add index", as in TUI.md.
func fixtureWhy() api.Why {
	return api.Why{
		Now: testNow, Scheduled: true,
		Formula: "priority 111 = base 100 + age 1 (1 min × 1, max 50) + depth 30 (3 × 10) − retry 20 ((5−1) × 5, max 30)",
		Gates: []api.Gate{
			{Code: "parent_incomplete", OK: true, Text: "parent complete"},
			{Code: "artifact_missing", OK: true, Text: "artifact present"},
			{Code: "backoff", OK: false, Text: "backoff until 12:04:31 (12s)"},
			{Code: "rate_limited", OK: true, Text: "not rate limited"},
			{Code: "type_cap", OK: true, Text: "type cap ralph 0/50"},
			{Code: "global_cap", OK: true, Text: "global cap 1/50"},
		},
		Row: api.SchedRow{ID: idIndex, Priority: 111},
	}
}

func newFake() *fakeClient {
	return &fakeClient{
		snap:   fixtureSnapshot(),
		why:    map[string]api.Why{idIndex: fixtureWhy()},
		output: map[string]string{idLimits: "reading migrations/\n\x1b[32mwriting\x1b[0m 0003_users.sql\nrunning go test ./...\nok  \tshop/db\t0.41s\n"},
	}
}

// testModel builds a model on fc with a fixed clock and plain (Ascii)
// styles, so renders are stable.
func testModel(fc Client) Model {
	m := New(Options{Client: fc, Workspace: "~/src/shop", Now: func() time.Time { return testNow }, NoColor: true, Version: "v0.1.0"})
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	m.setStyles(newStyles(r, true))
	return m
}

// loaded is testModel after the connection opened and the snapshot arrived,
// at size w×h.
func loaded(t testing.TB, fc *fakeClient, w, h int) Model {
	t.Helper()
	m := testModel(fc)
	m = update(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	m = update(t, m, streamOpenedMsg{gen: m.gen, client: fc, ch: make(chan api.StreamMsg)})
	m = update(t, m, streamMsg{gen: m.gen, msgs: []api.StreamMsg{fc.snap}, now: testNow})
	return m
}

// update applies msg and returns the new model, dropping the command.
func update(t testing.TB, m Model, msg tea.Msg) Model {
	t.Helper()
	nm, _ := m.Update(msg)
	return nm.(Model)
}

// runCmd executes cmd (and batches in it) and returns the messages that
// arrive within a short wait; timers (ticks) are left unfired.
func runCmd(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	go func() { ch <- cmd() }()
	select {
	case msg := <-ch:
		if b, ok := msg.(tea.BatchMsg); ok {
			var out []tea.Msg
			for _, c := range b {
				out = append(out, runCmd(c)...)
			}
			return out
		}
		if msg == nil {
			return nil
		}
		return []tea.Msg{msg}
	case <-time.After(300 * time.Millisecond):
		return nil
	}
}

// press sends keys (named as in key.Binding, e.g. "j", "enter", "esc") one
// by one, running each command and feeding its results back, and returns
// the final model.
func press(t testing.TB, m Model, keys ...string) Model {
	t.Helper()
	for _, k := range keys {
		nm, cmd := m.Update(keyMsg(k))
		m = nm.(Model)
		for _, msg := range runCmd(cmd) {
			if _, ok := msg.(tea.QuitMsg); ok {
				continue
			}
			m = update(t, m, msg)
		}
	}
	return m
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

func ansiWidth(s string) int { return ansi.StringWidth(s) }
