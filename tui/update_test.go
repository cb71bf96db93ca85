package tui

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/muesli/termenv"
)

// selectID moves the cursor down onto id.
func selectID(t testing.TB, m Model, id string) Model {
	t.Helper()
	m = press(t, m, "g")
	for i := 0; m.sel != id; i++ {
		if i > len(m.rows) {
			t.Fatalf("loop %s is not among the rows", id)
		}
		m = press(t, m, "j")
	}
	return m
}

func rowIDs(m Model) []string {
	ids := make([]string, len(m.rows))
	for i, r := range m.rows {
		ids[i] = r.id
	}
	return ids
}

// lineOf returns the rendered line that shows title.
func lineOf(view, title string) string {
	for _, l := range strings.Split(view, "\n") {
		if strings.Contains(l, title) {
			return l
		}
	}
	return ""
}

func TestUpdateKeys(t *testing.T) {
	t.Parallel()
	treeOrder := []string{idPlan, idSpec, idPhase, idUsers, idIndex, idSeed, idHandlers, idLogin, idLimits, idCookies, idBilling, idOld, idPausedRal}
	tests := []struct {
		name   string
		at     string   // loop selected first ("" leaves the cursor on the first row)
		keys   []string // pressed in order
		check  func(t *testing.T, m Model)
		wantAc []actCall // the Act calls the fake records
	}{
		{name: "j moves down", keys: []string{"j"}, check: wantSel(idSpec)},
		{name: "down arrow moves down", keys: []string{"down", "down"}, check: wantSel(idPhase)},
		{name: "k moves up", keys: []string{"j", "j", "k"}, check: wantSel(idSpec)},
		{name: "up arrow moves up", keys: []string{"j", "up"}, check: wantSel(idPlan)},
		{name: "k stops at the top", keys: []string{"k", "k"}, check: wantSel(idPlan)},
		{name: "j stops at the bottom", keys: []string{"G", "j"}, check: wantSel(idPausedRal)},
		{name: "rows in tree order", check: func(t *testing.T, m Model) {
			if diff := cmp.Diff(treeOrder, rowIDs(m)); diff != "" {
				t.Errorf("rows mismatch (-want +got):\n%s", diff)
			}
		}},
		{name: "h folds an open node", at: idPhase, keys: []string{"h"}, check: func(t *testing.T, m Model) {
			wantSel(idPhase)(t, m)
			if got := rowIDs(m); len(got) != len(treeOrder)-3 || m.rows[m.cursor].open {
				t.Errorf("after h rows = %v, open = %v; want the phase folded", got, m.rows[m.cursor].open)
			}
			if !strings.Contains(m.View(), "▶ ✓ phase Migrations") {
				t.Errorf("folded phase not marked ▶:\n%s", m.View())
			}
		}},
		{name: "left arrow on a leaf goes to its parent", at: idIndex, keys: []string{"left"}, check: wantSel(idPhase)},
		{name: "l unfolds", at: idPhase, keys: []string{"h", "l"}, check: func(t *testing.T, m Model) {
			if diff := cmp.Diff(treeOrder, rowIDs(m)); diff != "" {
				t.Errorf("rows after h l mismatch (-want +got):\n%s", diff)
			}
		}},
		{name: "right arrow on an open node steps to its first child", at: idPhase, keys: []string{"right"}, check: wantSel(idUsers)},
		{name: "enter opens details", at: idIndex, keys: []string{"enter"}, check: func(t *testing.T, m Model) {
			wantPane(paneDetails)(t, m)
			v := m.View()
			for _, want := range []string{"DETAILS", loop.ShortID(idIndex), "id           " + idIndex, "last feedback", "missing index users_email_idx", "runnable at"} {
				if !strings.Contains(v, want) {
					t.Errorf("details pane lacks %q:\n%s", want, v)
				}
			}
		}},
		{name: "enter twice closes details", keys: []string{"enter", "enter"}, check: wantPane(paneNone)},
		{name: "w asks the daemon why", at: idIndex, keys: []string{"w"}, check: func(t *testing.T, m Model) {
			wantPane(paneWhy)(t, m)
			if got := m.client.(*fakeClient).whys; !cmp.Equal(got, []string{idIndex}) {
				t.Errorf("Why calls = %v, want [%s]", got, idIndex)
			}
			v := m.View()
			for _, want := range []string{"priority 111 = base 100", "✗ backoff until 12:04:31 (12s)", "✓ global cap 1/50"} {
				if !strings.Contains(v, want) {
					t.Errorf("why pane lacks %q:\n%s", want, v)
				}
			}
		}},
		{name: "w follows the selection", at: idIndex, keys: []string{"w", "k"}, check: func(t *testing.T, m Model) {
			if got := m.client.(*fakeClient).whys; !cmp.Equal(got, []string{idIndex, idUsers}) {
				t.Errorf("Why calls = %v, want [%s %s]", got, idIndex, idUsers)
			}
			if !strings.Contains(m.View(), "✗ why: not_found") {
				t.Errorf("why error not shown:\n%s", m.View())
			}
		}},
		{name: "o tails the agent output", at: idLimits, keys: []string{"o"}, check: func(t *testing.T, m Model) {
			wantPane(paneOutput)(t, m)
			if got := m.client.(*fakeClient).outputs; !cmp.Equal(got, []string{idLimits}) {
				t.Errorf("Output calls = %v, want [%s]", got, idLimits)
			}
			v := m.View()
			if !strings.Contains(v, "writing 0003_users.sql") || strings.Contains(v, "\x1b[32m") {
				t.Errorf("output pane lacks the log tail or keeps its escapes:\n%q", v)
			}
		}},
		{name: "esc closes the pane", keys: []string{"w", "esc"}, check: wantPane(paneNone)},
		{name: "esc clears the filter", keys: []string{"/", "i", "n", "d", "enter", "esc"}, check: func(t *testing.T, m Model) {
			if m.filter != "" || len(m.rows) != len(treeOrder) {
				t.Errorf("filter = %q with %d rows, want cleared", m.filter, len(m.rows))
			}
		}},
		{name: "/ filters by title with ancestors for context", keys: []string{"/", "i", "n", "d", "e", "x"}, check: func(t *testing.T, m Model) {
			if m.mode != modeFilter {
				t.Errorf("mode = %v, want filter", m.mode)
			}
			want := []string{idPlan, idSpec, idPhase, idIndex}
			if diff := cmp.Diff(want, rowIDs(m)); diff != "" {
				t.Errorf("filtered rows mismatch (-want +got):\n%s", diff)
			}
		}},
		{name: "/ filters by type and status tokens", keys: append(append([]string{"/"}, strings.Split("type:ralph status:pending", "")...), "enter"), check: func(t *testing.T, m Model) {
			if m.mode != modeNormal || m.filter != "type:ralph status:pending" {
				t.Errorf("mode %v filter %q, want normal with the filter kept", m.mode, m.filter)
			}
			var matched []string
			for _, r := range m.rows {
				if !r.context {
					matched = append(matched, r.id)
				}
			}
			if diff := cmp.Diff([]string{idUsers, idIndex, idLogin}, matched); diff != "" {
				t.Errorf("matches mismatch (-want +got):\n%s", diff)
			}
		}},
		{name: "esc while typing restores the previous filter", keys: []string{"/", "x", "esc"}, check: func(t *testing.T, m Model) {
			if m.mode != modeNormal || m.filter != "" || len(m.rows) != len(treeOrder) {
				t.Errorf("mode %v filter %q rows %d, want the unfiltered tree", m.mode, m.filter, len(m.rows))
			}
		}},
		{name: "q while typing a filter is text", keys: []string{"/", "q"}, check: func(t *testing.T, m Model) {
			if m.filter != "q" {
				t.Errorf("filter = %q, want q", m.filter)
			}
		}},
		{name: "t shows waiting loops in scheduling order", keys: []string{"t"}, check: func(t *testing.T, m Model) {
			want := []string{idUsers, idLogin, idPausedRal, idIndex, idHandlers, idCookies}
			if diff := cmp.Diff(want, rowIDs(m)); diff != "" {
				t.Errorf("flat rows mismatch (-want +got):\n%s", diff)
			}
			if v := m.View(); !strings.Contains(v, "DEPTH") || !strings.Contains(lineOf(v, "Create users table"), "yes: next to start") {
				t.Errorf("flat view lacks scheduler columns:\n%s", v)
			}
		}},
		{name: "t twice is the tree again", at: idIndex, keys: []string{"t", "t"}, check: func(t *testing.T, m Model) {
			wantSel(idIndex)(t, m)
			if m.flat || len(m.rows) != len(treeOrder) {
				t.Errorf("flat = %v rows = %d, want the tree", m.flat, len(m.rows))
			}
		}},
		{name: "c y cancels the subtree", at: idHandlers, keys: []string{"c"}, check: func(t *testing.T, m Model) {
			if m.mode != modeConfirm || !strings.Contains(m.View(), `cancel phase "API handlers" and 1 unfinished loop under it?`) {
				t.Errorf("no confirmation shown:\n%s", m.View())
			}
		}},
		{name: "c then y calls cancel", at: idHandlers, keys: []string{"c", "y"},
			wantAc: []actCall{{ID: idHandlers, Action: api.ActionCancel}}, check: wantFlash(`cancelled phase "API handlers"`)},
		{name: "c then n does nothing", at: idHandlers, keys: []string{"c", "n"}, check: wantFlash("cancel not confirmed: nothing changed")},
		{name: "c on a complete loop offers to cancel what runs below it", at: idPhase, keys: []string{"c"}, check: func(t *testing.T, m Model) {
			if m.mode != modeConfirm || !strings.Contains(m.View(), `cancel the 2 unfinished loops under phase "Migrations" (it stays complete)?`) {
				t.Errorf("no confirmation shown:\n%s", m.View())
			}
		}},
		{name: "c then y on a complete loop calls cancel", at: idPhase, keys: []string{"c", "y"},
			wantAc: []actCall{{ID: idPhase, Action: api.ActionCancel}}},
		{name: "c on a finished loop with nothing live below says why not", at: idOld, keys: []string{"c"},
			check: wantFlash("can't cancel: this plan is already cancelled and nothing under it runs or waits")},
		{name: "r resets a failed loop", at: idSeed, keys: []string{"r"}, wantAc: []actCall{{ID: idSeed, Action: api.ActionReset}}},
		{name: "r on a pending loop says why not", at: idIndex, keys: []string{"r"}, check: wantFlash("can't reset: only failed loops reset, this ralph is pending")},
		{name: "p pauses a pending loop", at: idIndex, keys: []string{"p"}, wantAc: []actCall{{ID: idIndex, Action: api.ActionPause}}},
		{name: "p resumes a paused loop", at: idPausedRal, keys: []string{"p"}, wantAc: []actCall{{ID: idPausedRal, Action: api.ActionResume}}},
		{name: "p on a running loop says why not", at: idLimits, keys: []string{"p"}, check: wantFlash("can't pause: only pending loops pause (and paused ones resume), this phase is running")},
		{name: "T on a failed loop says why not", at: idSeed, keys: []string{"T"}, check: wantFlash("take over: " + loop.ShortID(idSeed) + " is failed; only a pending, running or paused loop can be taken over")},
		{name: "T without a way to attach names the command", at: idIndex, keys: []string{"T"}, check: wantFlash("taking over is not available here: run loopr attach " + loop.ShortID(idIndex))},
		{name: "a asks, then approves", at: idBilling, keys: []string{"a", "y"}, wantAc: []actCall{{ID: idBilling, Action: api.ActionApprove}}},
		{name: "a asks first", at: idBilling, keys: []string{"a"}, check: func(t *testing.T, m Model) {
			if m.mode != modeConfirm || !strings.Contains(m.View(), `approve plan "Billing with Stripe"? its specs are created and start y/n`) {
				t.Errorf("a did not ask:\n%s", m.View())
			}
		}},
		{name: "a then n keeps the plan", at: idBilling, keys: []string{"a", "n"}, check: wantFlash("approval not confirmed: nothing changed")},
		{name: "a elsewhere says why not", at: idIndex, keys: []string{"a"}, check: wantFlash("can't approve: only a plan awaiting approval or a task awaiting review can be approved, this ralph is pending")},
		{name: "x asks, then rejects", at: idBilling, keys: []string{"x", "y"}, wantAc: []actCall{{ID: idBilling, Action: api.ActionReject}}},
		{name: "x then n keeps the plan", at: idBilling, keys: []string{"x", "esc"}, check: wantFlash("reject not confirmed: nothing changed")},
		{name: "x elsewhere says why not", at: idPlan, keys: []string{"x"}, check: wantFlash("can't reject: only a plan awaiting approval or a task awaiting review can be rejected, this plan is complete")},
		{name: "i prompts for feedback", at: idBilling, keys: []string{"i", "u", "s", "e"}, check: func(t *testing.T, m Model) {
			if m.mode != modeFeedback || m.input.Value() != "use" || !strings.Contains(m.View(), `feedback for plan "Billing with Stripe": use`) {
				t.Errorf("mode %v value %q, want the feedback prompt:\n%s", m.mode, m.input.Value(), m.View())
			}
		}},
		{name: "i sends the feedback", at: idBilling, keys: append(append([]string{"i"}, strings.Split("use webhooks", "")...), "enter"),
			wantAc: []actCall{{ID: idBilling, Action: api.ActionIterate, Req: api.ActionRequest{Feedback: "use webhooks"}}}},
		{name: "i with empty feedback sends nothing", at: idBilling, keys: []string{"i", "enter"}, check: func(t *testing.T, m Model) {
			if m.mode != modeFeedback || !m.flash.err {
				t.Errorf("mode %v flash %+v, want the prompt kept with an error", m.mode, m.flash)
			}
		}},
		{name: "i elsewhere says why not", at: idCookies, keys: []string{"i"}, check: wantFlash("can't iterate: only a plan awaiting approval or a task awaiting review can be iterated, this spec is pending")},
		{name: "? opens help", keys: []string{"?"}, check: func(t *testing.T, m Model) {
			if !m.showHelp || !strings.Contains(m.View(), "cancel loop + subtree") {
				t.Errorf("help not shown:\n%s", m.View())
			}
		}},
		{name: "? again closes help", keys: []string{"?", "?"}, check: func(t *testing.T, m Model) {
			if m.showHelp {
				t.Error("help still shown")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := newFake()
			m := loaded(t, fc, 120, 30)
			if tt.at != "" {
				m = selectID(t, m, tt.at)
			}
			m = press(t, m, tt.keys...)
			if tt.check != nil {
				tt.check(t, m)
			}
			if diff := cmp.Diff(tt.wantAc, fc.calls()); diff != "" {
				t.Errorf("Act calls mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func wantSel(id string) func(*testing.T, Model) {
	return func(t *testing.T, m Model) {
		t.Helper()
		if m.sel != id {
			t.Errorf("selected %q, want %q", m.sel, id)
		}
		if !strings.HasPrefix(lineOf(m.View(), m.loops[id].Title), "›") {
			t.Errorf("the row of %s is not marked selected:\n%s", id, m.View())
		}
	}
}

func wantPane(p paneKind) func(*testing.T, Model) {
	return func(t *testing.T, m Model) {
		t.Helper()
		if m.pane != p {
			t.Errorf("pane = %v, want %v", m.pane, p)
		}
	}
}

func wantFlash(text string) func(*testing.T, Model) {
	return func(t *testing.T, m Model) {
		t.Helper()
		if !strings.Contains(m.flash.text, text) {
			t.Errorf("status line %q, want %q", m.flash.text, text)
		}
		if !strings.Contains(m.View(), text) {
			t.Errorf("view lacks %q:\n%s", text, m.View())
		}
	}
}

func TestQuit(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"q", "ctrl+c"} {
		m := loaded(t, newFake(), 80, 24)
		_, cmd := m.Update(keyMsg(k))
		if cmd == nil {
			t.Fatalf("%s: no command, want tea.Quit", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s: command does not quit", k)
		}
	}
	// ctrl+c quits even from a prompt; q there is text.
	m := press(t, loaded(t, newFake(), 80, 24), "/")
	if _, cmd := m.Update(keyMsg("ctrl+c")); cmd == nil {
		t.Error("ctrl+c in the filter prompt does not quit")
	}
}

// TestRunesReadTogether: keys typed fast arrive as one message with several
// runes; each counts as a key press. A paste never runs commands.
func TestRunesReadTogether(t *testing.T) {
	t.Parallel()
	fc := newFake()
	m := loaded(t, fc, 120, 30)
	m = update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jjjj")})
	if m.sel != idIndex {
		t.Errorf("after jjjj selected %q, want %q", m.sel, idIndex)
	}
	m = update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/seed")})
	if m.mode != modeFilter || m.filter != "seed" {
		t.Errorf("after /seed mode %v filter %q, want the filter prompt with seed", m.mode, m.filter)
	}
	m = loaded(t, fc, 120, 30)
	m = selectID(t, m, idIndex)
	nm, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("cy"), Paste: true})
	if m = nm.(Model); m.mode != modeNormal || cmd != nil {
		t.Errorf("a paste in the list ran commands: mode %v", m.mode)
	}
	if got := fc.calls(); len(got) != 0 {
		t.Errorf("a paste called Act: %v", got)
	}
}

func TestActionErrorShowsInStatusLine(t *testing.T) {
	t.Parallel()
	fc := newFake()
	fc.actErr = errors.New("conflict: loop " + idIndex + ": cannot go from pending to pending")
	m := selectID(t, loaded(t, fc, 120, 30), idIndex)
	m = press(t, m, "p")
	if line := lineOf(m.View(), "cannot go from"); !strings.Contains(line, "✗ pause gjkga71h: conflict: loop gjkga71h: cannot go") {
		t.Errorf("error not in the status line:\n%s", m.View())
	}
}

func TestActionResultAppliesAtOnce(t *testing.T) {
	t.Parallel()
	fc := newFake()
	fc.actLoop = func(id, action string) loop.Loop {
		l := fixtureLoops()[4] // Add index
		l.Status, l.UpdatedAt = loop.Paused, testNow
		return l
	}
	m := press(t, selectID(t, loaded(t, fc, 120, 30), idIndex), "p")
	if line := lineOf(m.View(), "Add index"); !strings.Contains(line, "⏸ ralph Add index") || !strings.Contains(line, "paused") {
		t.Errorf("row not updated from the action's result: %q", line)
	}
}

// TestEventRendersOnNextView: a status change from the stream shows in the
// very next frame.
func TestEventRendersOnNextView(t *testing.T) {
	t.Parallel()
	m := loaded(t, newFake(), 120, 30)
	if line := lineOf(m.View(), "Create users table"); !strings.Contains(line, "○ ralph Create users table") || !strings.Contains(line, "pending") {
		t.Fatalf("before: %q", line)
	}
	l := fixtureLoops()[3]
	before := l
	l.Status, l.StartedAt, l.UpdatedAt = loop.Running, testNow.Add(-3*time.Second), testNow
	ev := loop.TransitionEvent(before, l, "")
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamEvent, Seq: 101, Event: &ev, Loop: &l}}})

	v := m.View()
	line := lineOf(v, "Create users table")
	for _, want := range []string{"● ralph Create users table", "running", "agent 3s"} {
		if !strings.Contains(line, want) {
			t.Errorf("after the event the row %q lacks %q", line, want)
		}
	}
	if head := strings.SplitN(v, "\n", 2)[0]; !strings.Contains(head, "○4") || !strings.Contains(head, "●2") || !strings.Contains(head, "run 2/50") || !strings.Contains(head, "ralph 1/50") {
		t.Errorf("header counts not moved: %q", head)
	}

	// A loop created by an event appears under its parent.
	nl := loop.Loop{ID: idLogout, Type: loop.Ralph, Title: "Logout handler", Status: loop.Pending, Parent: idHandlers,
		Depth: 3, Iteration: 1, MaxIterations: 100, CreatedAt: testNow, UpdatedAt: testNow}
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamEvent, Loop: &nl,
		Event: &loop.Event{Kind: loop.EventCreated, Loop: nl.ID, To: loop.Pending}}}})
	ids := rowIDs(m)
	if i := indexOfID(ids, nl.ID); i < 0 || ids[i-1] != idLogin {
		t.Errorf("new loop not under its parent: %v", ids)
	}
}

func indexOfID(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

func TestReconnect(t *testing.T) {
	t.Parallel()
	fc := newFake()
	fresh := newFake()
	only := fixtureLoops()[:3]
	st := fixtureStatus()
	fresh.snap = api.StreamMsg{Type: api.StreamSnapshot, Loops: only, Status: &st}
	dials := 0
	m := testModel(fc)
	m.dial = func(ctx2 context.Context) (Client, error) {
		dials++
		if dials == 1 {
			return nil, errors.New("dial unix .loopr/loopr.sock: connect: connection refused")
		}
		return fresh, nil
	}
	m = update(t, m, tea.WindowSizeMsg{Width: 100, Height: 24})
	m = update(t, m, streamOpenedMsg{gen: m.gen, client: fc, ch: nil})
	m = update(t, m, streamMsg{gen: m.gen, msgs: []api.StreamMsg{fc.snap}, now: testNow})

	// The stream closes: a banner, a redial scheduled after 1s.
	nm, cmd := m.Update(streamMsg{gen: m.gen, closed: true, now: testNow})
	m = nm.(Model)
	if cmd == nil || m.conn != connDown {
		t.Fatalf("conn = %v, cmd = %v; want down with a redial scheduled", m.conn, cmd)
	}
	if line := strings.Split(m.View(), "\n")[1]; !strings.Contains(line, "daemon disconnected — reconnecting in 1s") {
		t.Errorf("banner = %q", line)
	}
	if len(m.rows) != len(fixtureLoops()) {
		t.Errorf("the last known tree should stay on screen, got %d rows", len(m.rows))
	}

	// First redial fails: the next wait doubles.
	m = redial(t, m)
	if m.conn != connDown || !strings.Contains(strings.Split(m.View(), "\n")[1], "reconnecting in 2s   (dial unix") {
		t.Errorf("after a failed dial: conn %v banner %q", m.conn, strings.Split(m.View(), "\n")[1])
	}
	// Second redial works; the new snapshot replaces the state.
	m = redial(t, m)
	if m.conn != connConnected {
		t.Fatalf("conn = %v after a good dial", m.conn)
	}
	// A finished tree opens folded.
	if diff := cmp.Diff([]string{idPlan}, rowIDs(m)); diff != "" {
		t.Errorf("rows after the new snapshot (-want +got):\n%s", diff)
	}
	if m.attempt != 0 {
		t.Errorf("attempt = %d after a snapshot, want 0", m.attempt)
	}
	if strings.Contains(m.View(), "disconnected") {
		t.Error("banner still shown after reconnecting")
	}
}

// redial fires the scheduled redial and feeds the connection's results back.
func redial(t *testing.T, m Model) Model {
	t.Helper()
	nm, cmd := m.Update(redialMsg{gen: m.gen})
	m = nm.(Model)
	for _, msg := range runCmd(cmd) {
		nm, cmd := m.Update(msg)
		m = nm.(Model)
		if _, ok := msg.(streamOpenedMsg); ok {
			for _, msg := range runCmd(cmd) { // the snapshot
				m = update(t, m, msg)
			}
		}
	}
	return m
}

func TestRedialDelay(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for n := range 7 {
		got = append(got, redialDelay(n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("redialDelay mismatch (-want +got):\n%s", diff)
	}
}

// TestScoreSeedExamples: with no policy given the dashboard scores with
// seed 004's, and its examples hold exactly.
func TestScoreSeedExamples(t *testing.T) {
	t.Parallel()
	p := New(Options{}).plan
	now := testNow
	tests := []struct {
		name string
		l    loop.Loop
		want int
	}{
		{"ralph 5 min old at depth 3", loop.Loop{Type: loop.Ralph, Depth: 3, Iteration: 1, CreatedAt: now.Add(-5*time.Minute - 59*time.Second)}, 135},
		{"phase 30 min old at depth 2", loop.Loop{Type: loop.Phase, Depth: 2, Iteration: 1, CreatedAt: now.Add(-30 * time.Minute)}, 130},
		{"ralph on iteration 5", loop.Loop{Type: loop.Ralph, Depth: 3, Iteration: 5, CreatedAt: now.Add(-time.Minute)}, 111},
		{"age boost caps at 50", loop.Loop{Type: loop.Plan, Iteration: 1, CreatedAt: now.Add(-3 * time.Hour)}, 90},
		{"retry penalty caps at 30", loop.Loop{Type: loop.Spec, Depth: 1, Iteration: 40, CreatedAt: now}, 40},
		{"unknown type has base 0", loop.Loop{Type: "review", Iteration: 1, CreatedAt: now.Add(time.Minute)}, 0},
	}
	for _, tt := range tests {
		if got := scheduler.ScoreOf(&tt.l, now, p).Priority; got != tt.want {
			t.Errorf("%s: priority %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestFirstReason(t *testing.T) {
	t.Parallel()
	limited := fixtureStatus()
	limited.RateLimit = ratelimit.State{Hits: 2, BackoffUntil: testNow.Add(37 * time.Second), RecoveryUntil: testNow.Add(67 * time.Second)}
	full := fixtureStatus()
	full.MaxLoops = 1
	pre := fixtureStatus()
	pre.Problems = []api.Problem{{Types: []string{"spec"}, TypesText: "spec", What: `agent "x" is not on PATH`}}
	shared := fixtureStatus()
	shared.NoGit = "no git"
	tests := []struct {
		name   string
		status api.Status
		want   map[string]string
	}{
		{"fixture", fixtureStatus(), map[string]string{
			idUsers: "next to start", idIndex: "backoff 12s", idHandlers: "type cap phase 1/1",
			idLogin: "waiting for parent (pending)", idPausedRal: "paused", idCookies: "next to start",
		}},
		{"rate limited", limited, map[string]string{idUsers: "rate limited 37s", idIndex: "backoff 12s", idCookies: "rate limited 37s"}},
		{"global cap", full, map[string]string{idUsers: "global cap 1/1", idCookies: "global cap 1/1"}},
		{"preflight", pre, map[string]string{idUsers: "next to start", idCookies: `agent "x" is not on PATH`}},
		{"no git: the first ralph starts", shared, map[string]string{idUsers: "next to start", idIndex: "backoff 12s", idCookies: "next to start"}},
	}
	for _, tt := range tests {
		fc := newFake()
		fc.snap.Status = &tt.status
		m := loaded(t, fc, 160, 30)
		for id, want := range tt.want {
			if got := m.reasonText(m.reasonOf(id)); got != want {
				t.Errorf("%s: %s reason %q, want %q", tt.name, id, got, want)
			}
		}
	}
}

func TestRateLimitHeader(t *testing.T) {
	t.Parallel()
	st := fixtureStatus()
	st.RateLimit = ratelimit.State{Hits: 2, BackoffUntil: testNow.Add(37 * time.Second), RecoveryUntil: testNow.Add(67 * time.Second)}
	fc := newFake()
	fc.snap.Status = &st
	m := loaded(t, fc, 160, 30)
	if head := strings.SplitN(m.View(), "\n", 2)[0]; !strings.Contains(head, "429 backoff 37s then ramp 30s") {
		t.Errorf("header = %q, want the backoff countdown and ramp", head)
	}
	// 40s later: the ramp, counting down; the ticks move the clock.
	m = update(t, m, tickMsg{now: testNow.Add(40 * time.Second)})
	if head := strings.SplitN(m.View(), "\n", 2)[0]; !strings.Contains(head, "429 recovery 27s") {
		t.Errorf("header = %q, want the recovery ramp", head)
	}
	// After the ramp nothing is shown.
	m = update(t, m, tickMsg{now: testNow.Add(2 * time.Minute)})
	if head := strings.SplitN(m.View(), "\n", 2)[0]; strings.Contains(head, "429") {
		t.Errorf("header = %q, want no rate limit", head)
	}
}

// TestWorkspaceGatesHeader: the header says once that there are preflight
// problems and that leaf loops run one at a time without git.
func TestWorkspaceGatesHeader(t *testing.T) {
	t.Parallel()
	st := fixtureStatus()
	st.Problems = []api.Problem{{Types: []string{"ralph"}, What: "validate needs a go.mod"}}
	st.NoGit = "the workspace is not a git repository"
	fc := newFake()
	fc.snap.Status = &st
	m := loaded(t, fc, 200, 30)
	head := strings.SplitN(m.View(), "\n", 2)[0]
	for _, want := range []string{"1 preflight problem: loopr status", "no git: ralph one at a time"} {
		if strings.Count(head, want) != 1 {
			t.Errorf("header = %q, want %q once", head, want)
		}
	}
	if got := m.reasonText(m.reasonOf(idUsers)); got != "validate needs a go.mod" {
		t.Errorf("ralph reason %q, want the preflight problem", got)
	}
}

// TestUntrustedHeader: an untrusted loopr.yml shows in the header and as
// every waiting loop's reason; a held reload only in the header.
func TestUntrustedHeader(t *testing.T) {
	t.Parallel()
	st := fixtureStatus()
	st.Trust = &api.Trust{Text: "untrusted loopr.yml: none of its commands runs", Action: "loopr trust"}
	fc := newFake()
	fc.snap.Status = &st
	m := loaded(t, fc, 200, 30)
	if head := strings.SplitN(m.View(), "\n", 2)[0]; !strings.Contains(head, "loopr.yml untrusted: loopr trust") {
		t.Errorf("header = %q, want the untrusted loopr.yml", head)
	}
	if got := m.reasonText(m.reasonOf(idUsers)); got != "untrusted loopr.yml: loopr trust" {
		t.Errorf("ralph reason %q, want the untrusted gate", got)
	}
	held := fixtureStatus()
	held.Trust = &api.Trust{Held: true, Text: "held", Action: "loopr trust"}
	fc = newFake()
	fc.snap.Status = &held
	m = loaded(t, fc, 200, 30)
	if head := strings.SplitN(m.View(), "\n", 2)[0]; !strings.Contains(head, "loopr.yml change held: loopr trust") {
		t.Errorf("header = %q, want the held reload", head)
	}
	if got := m.reasonText(m.reasonOf(idUsers)); strings.Contains(got, "untrusted") {
		t.Errorf("ralph reason %q with a held reload: the trusted configuration runs", got)
	}
}

// TestTickAgesPriorities: priorities grow with age on the clock tick alone.
func TestTickAgesPriorities(t *testing.T) {
	t.Parallel()
	m := loaded(t, newFake(), 120, 30)
	m = update(t, m, tickMsg{now: testNow.Add(3 * time.Minute)})
	if line := lineOf(m.View(), "Session cookies"); !strings.Contains(line, " 75 ") {
		t.Errorf("spec priority after 3 more minutes: %q, want 75", line)
	}
}

// TestNeverWraps: at every size each line fits the width and the screen has
// exactly the terminal's height.
func TestNeverWraps(t *testing.T) {
	t.Parallel()
	fc := newFake()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.ANSI256)
	colour := newStyles(r, false)
	for _, w := range []int{20, 40, 60, 80, 100, 120, 160, 250} {
		for _, h := range []int{8, 24, 50} {
			for i, keys := range [][]string{nil, {"w"}, {"enter"}, {"?"}, {"t"}, {"o"}, {"/"}} {
				m := loaded(t, fc, w, h)
				if i%2 == 0 {
					m.setStyles(colour)
					m = update(t, m, tea.WindowSizeMsg{Width: w, Height: h})
				}
				m = press(t, selectID(t, m, idIndex), keys...)
				lines := strings.Split(m.View(), "\n")
				if len(lines) != h && h >= fixedLines+4 {
					t.Errorf("%dx%d %v: %d lines", w, h, keys, len(lines))
				}
				for i, l := range lines {
					if lw := ansiWidth(l); lw > w {
						t.Errorf("%dx%d %v: line %d is %d wide: %q", w, h, keys, i, lw, l)
					}
				}
			}
		}
	}
}

func TestDoneHint(t *testing.T) {
	t.Parallel()
	fc := newFake()
	m := loaded(t, fc, 120, 30)
	m.doneHint = "all done: press q"
	if strings.Contains(m.View(), "all done") {
		t.Fatal("done hint shown while loops are still pending and running")
	}
	st := fixtureStatus()
	st.Counts = map[loop.Status]int{loop.Complete: 41, loop.Failed: 1, loop.Cancelled: 1}
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamStatus, Status: &st}}})
	if !strings.Contains(m.View(), "all done: press q") {
		t.Error("done hint not shown once every loop has settled")
	}
}

// TestFilterSelectsAMatch: under a filter, ancestors are shown for context,
// but the cursor lands on a match so `w` or `c` act on it.
func TestFilterSelectsAMatch(t *testing.T) {
	t.Parallel()
	m := loaded(t, newFake(), 120, 30)
	m = update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/")})
	for _, r := range "users table" {
		m = update(t, m, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	m = update(t, m, tea.KeyMsg{Type: tea.KeyEnter})
	if l := m.selected(); l == nil || !strings.Contains(l.Title, "users table") {
		t.Fatalf("selected %+v, want the matching loop", l)
	}
}
