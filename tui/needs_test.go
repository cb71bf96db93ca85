package tui

import (
	"bytes"
	"github.com/charmbracelet/x/ansi"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

const idAsk = "r8"

// needsFake is the fixture with two loops that need you: a standalone
// ralph that asked a question, and "Add index" in the plan's tree, stopped
// for repeating one failure.
func needsFake() *fakeClient {
	fc := newFake()
	loops := fixtureLoops()
	for i := range loops {
		if loops[i].ID == idIndex {
			loops[i].Status = loop.NeedsHuman
			loops[i].Needs = &loop.Needs{Reason: loop.NeedsNoProgress, Detail: "3 iterations in a row failed the same way: validate exited 1", Since: testNow.Add(-time.Minute)}
		}
	}
	ask := loop.Loop{ID: idAsk, Type: loop.Ralph, Title: "Pick a port", Status: loop.NeedsHuman, Iteration: 1, MaxIterations: 10,
		CreatedAt: testNow.Add(-time.Hour), UpdatedAt: testNow.Add(-2 * time.Minute),
		Needs: &loop.Needs{Reason: loop.NeedsQuestion, Detail: "Which port?\x1b]0;evil\x07\nmore", Since: testNow.Add(-2 * time.Minute)}}
	loops = append(loops, ask)
	st := fixtureStatus()
	st.Counts[loop.Pending]--
	st.Counts[loop.NeedsHuman] = 2
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Seq: 100, Loops: loops, Status: &st}
	return fc
}

func TestNeedsYouGroup(t *testing.T) {
	t.Parallel()
	fc := needsFake()
	m := loaded(t, fc, 120, 30)
	if m.rows[0].label == "" || m.rows[1].id != idAsk || m.rows[2].id != idIndex || m.rows[3].label != "ALL LOOPS" {
		t.Fatalf("rows start %+v; want the NEEDS YOU title, %s (longest waiting), %s, then ALL LOOPS", m.rows[:4], idAsk, idIndex)
	}
	if m.sel != idAsk {
		t.Errorf("selection %q; want the first loop that needs you, never a title line", m.sel)
	}
	v := m.View()
	for _, want := range []string{"NEEDS YOU (2)", "needs you 2", "question: Which port?", "no_progress: 3 iterations in", "tree 3/10 done · needs you (1)", "n needs you", "A answer"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "\x1b]0;evil") {
		t.Errorf("an agent's question reached the terminal unescaped")
	}
	// k at the top stays off the title line.
	if m2 := press(t, m, "k"); m2.sel != idAsk || m2.rows[m2.cursor].label != "" {
		t.Errorf("k from the first loop: sel %q cursor %d", m2.sel, m2.cursor)
	}
	// n jumps to the next loop that needs you, wrapping.
	m = press(t, m, "G", "n")
	if m.sel != idAsk {
		t.Errorf("n from the bottom = %q; want %s (wrapped)", m.sel, idAsk)
	}
	m = press(t, m, "n")
	if m.sel != idIndex {
		t.Errorf("n = %q; want %s", m.sel, idIndex)
	}
	// The filter hides the group; n brings the tree back.
	m = press(t, m, "/", "s", "e", "e", "d", "enter", "n")
	if l := m.selected(); l == nil || l.Status != loop.NeedsHuman || m.filter != "" {
		t.Errorf("n under a filter: sel %v filter %q; want a loop that needs you, filter cleared", l, m.filter)
	}
}

func TestNeedsYouAnswer(t *testing.T) {
	t.Parallel()
	fc := needsFake()
	m := loaded(t, fc, 120, 30)
	m = press(t, m, "A")
	if m.mode != modeFeedback || !strings.Contains(m.View(), `answer ralph "Pick a port": `) {
		t.Fatalf("A did not open the answer prompt:\n%s", m.View())
	}
	m = press(t, m, "u", "s", "e", " ", "9", "0", "9", "0", "enter")
	calls := fc.calls()
	if len(calls) != 1 || calls[0].ID != idAsk || calls[0].Action != api.ActionAnswer || calls[0].Req.Answer != "use 9090" {
		t.Errorf("Act calls %+v; want answer %s with %q", calls, idAsk, "use 9090")
	}
	// A on a loop that does not need you says why.
	m = selectID(t, m, idUsers)
	m = press(t, m, "A")
	if m.mode != modeNormal || !strings.Contains(m.flash.text, "can't answer") {
		t.Errorf("A on a pending loop: mode %v flash %q", m.mode, m.flash.text)
	}
}

func TestNeedsYouNotifies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		focus   tea.Msg
		desktop bool
	}{
		{"focus unknown", nil, true},
		{"terminal focused", tea.FocusMsg{}, false},
		{"terminal in the background", tea.BlurMsg{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			fc := newFake()
			m := loaded(t, fc, 120, 30)
			m.notifyOut = &out
			if tc.focus != nil {
				m = update(t, m, tc.focus)
			}
			l := fixtureLoops()[3] // "Create users table"
			l.Status = loop.NeedsHuman
			l.Needs = &loop.Needs{Reason: loop.NeedsStalled, Since: testNow}
			l.UpdatedAt = testNow
			ev := loop.Event{Kind: loop.EventTransition, Loop: l.ID, From: loop.Running, To: loop.NeedsHuman}
			nm, cmd := m.Update(streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamEvent, Event: &ev, Loop: &l}}})
			m = nm.(Model)
			runCmd(cmd)
			got := out.String()
			if !strings.HasPrefix(got, "\a") {
				t.Errorf("no bell: %q", got)
			}
			osc := strings.Contains(got, "\x1b]9;loopr: ralph \"Create users table\" needs you (stalled): loopr answer "+loop.ShortID(l.ID)) &&
				strings.Contains(got, "\x1b]777;notify;loopr;")
			if osc != tc.desktop {
				t.Errorf("desktop notification sent = %v, want %v: %q", osc, tc.desktop, got)
			}
			if !strings.Contains(m.flash.text, "needs you (stalled)") {
				t.Errorf("status line %q does not say it", m.flash.text)
			}
		})
	}
}

// A loop held for its spent budget is resumed by raising the budget, not by
// an answer: the row and the details say so, and A refuses.
func TestNeedsYouBudgetHint(t *testing.T) {
	t.Parallel()
	l := &loop.Loop{ID: "r9", Type: loop.Ralph, Status: loop.NeedsHuman,
		Needs: &loop.Needs{Reason: loop.NeedsBudget, Detail: "tree budget spent: $0.30 of $0.25" + loop.TreeBudgetRoot + "p1)"}}
	if got := needsWhy(l); !strings.Contains(got, "loopr budget p1 --usd N") || strings.Contains(got, "A answers") {
		t.Errorf("needsWhy = %q; want the loopr budget command, no A answers", got)
	}
	want := "can't answer: this ralph waits for a budget, not an answer — loopr budget p1 --usd N resumes it"
	if got := refuse(api.ActionAnswer, l, false); got != want {
		t.Errorf("refuse(answer) = %q; want %q (the daemon refuses it too)", got, want)
	}
	l.Needs.Reason = loop.NeedsQuestion
	if got := needsWhy(l); !strings.Contains(got, "A answers") {
		t.Errorf("needsWhy of a question = %q; want A answers", got)
	}
}

// TestTreeDoneWithCancelled: a tree whose every loop is complete or
// cancelled is done and ready to land (it read "tree 3/4 done" forever
// before), and says how many were cancelled; a sibling that waits on a
// dependency shows the depends_on reason in the dashboard's schedule.
func TestTreeDoneWithCancelled(t *testing.T) {
	t.Parallel()
	at := testNow.Add(-time.Hour)
	mk := func(id, parent string, typ loop.Type, st loop.Status) loop.Loop {
		return loop.Loop{ID: id, Parent: parent, Type: typ, Title: id, Status: st, Iteration: 1, MaxIterations: 5, CreatedAt: at, UpdatedAt: at}
	}
	loops := []loop.Loop{mk("p", "", loop.Plan, loop.Complete), mk("s", "p", loop.Spec, loop.Complete),
		mk("t1", "s", loop.Ralph, loop.Complete), mk("t2", "s", loop.Ralph, loop.Cancelled)}
	fc := newFake()
	st := fixtureStatus()
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Seq: 1, Loops: loops, Status: &st}
	m := loaded(t, fc, 120, 30)
	if got, want := m.treeText(m.loops["p"]), "ready to land: loopr land p · tree 3/4 done, 1 cancelled · loopr/p-p"; got != want {
		t.Errorf("treeText = %q, want %q", got, want)
	}

	m80 := loaded(t, fc, 80, 24)
	if v := ansi.Strip(m80.View()); !strings.Contains(v, "ready to land") {
		t.Errorf("at 80 columns the done tree's row does not say ready to land:\n%s", v)
	}
	m.loops["t1"].Workdir, m.loops["t1"].Base = "/w/.loopr/worktrees/t1", loop.Base{Branch: "main", Commit: "0123456789abcdef"}
	m.sel = "t1"
	details := ansi.Strip(strings.Join(m.detailsLines(100, 30), "\n"))
	for _, want := range []string{"/w/.loopr/worktrees/t1 (removed)", "main@0123456789ab"} {
		if !strings.Contains(details, want) {
			t.Errorf("details of a complete task lack %q:\n%s", want, details)
		}
	}
	p := m.loops["p"]
	p.Landed = loop.Landed{Into: "main", At: testNow}
	if got, want := m.treeText(p), "landed on main · tree 3/4 done, 1 cancelled"; got != want {
		t.Errorf("treeText of a landed plan = %q, want %q", got, want)
	}

	t3 := mk("t3", "s", loop.Ralph, loop.Pending)
	t3.DependsOn = []string{"t4"}
	loops[3] = mk("t4", "s", loop.Ralph, loop.Running)
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Seq: 2, Loops: append(loops, t3), Status: &st}
	m = loaded(t, fc, 120, 30)
	if got := m.treeText(m.loops["p"]); !strings.HasSuffix(got, "· running") {
		t.Errorf("treeText with live loops = %q, want it running", got)
	}
	if r := m.reasonOf(t3.ID); r.Code != "depends_on" || r.r.Text != "waits for t4 (running)" {
		t.Errorf("reason of t3: %s %q, want depends_on waiting for t4", r.Code, r.r.Text)
	} else if got, want := m.reasonText(r), `after "t4" (running)`; got != want {
		t.Errorf("dashboard text of t3's reason = %q, want %q", got, want)
	}
}

// TestNeedsYouReview: a task awaiting review heads the tree in the Needs
// you group, counts in the header, and a approves it after a question.
func TestNeedsYouReview(t *testing.T) {
	t.Parallel()
	fc := newFake()
	loops := fixtureLoops()
	for i := range loops {
		if loops[i].ID == idIndex {
			loops[i].Status = loop.AwaitingReview
		}
	}
	st := fixtureStatus()
	st.Counts[loop.Pending]--
	st.Counts[loop.AwaitingReview] = 1
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Seq: 100, Loops: loops, Status: &st}
	m := loaded(t, fc, 120, 30)
	if m.rows[0].label == "" || m.rows[1].id != idIndex || m.rows[2].label != "ALL LOOPS" {
		t.Fatalf("rows start %+v; want the NEEDS YOU title, %s, then ALL LOOPS", m.rows[:3], idIndex)
	}
	v := m.View()
	for _, want := range []string{"NEEDS YOU (1)", "needs you 1", "review: a merges"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	m = press(t, m, "a")
	if m.mode != modeConfirm || !strings.Contains(m.confirm.prompt, "merge queue") {
		t.Errorf("a on a task awaiting review: mode %v prompt %q; want a question naming the merge queue", m.mode, m.confirm.prompt)
	}
}

// TestProgressShown: what a running loop's agent reported through MCP
// report_progress shows on its row and in its details, escaped.
func TestProgressShown(t *testing.T) {
	t.Parallel()
	fc := newFake()
	loops := fixtureLoops()
	for i := range loops {
		if loops[i].ID == idLimits {
			loops[i].Progress = &loop.Progress{Text: "wrote the bucket\x1b]0;evil\x07", Percent: 40, At: testNow}
		}
	}
	st := fixtureStatus()
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Seq: 100, Loops: loops, Status: &st}
	m := selectID(t, loaded(t, fc, 160, 40), idLimits)
	v := m.View()
	if !strings.Contains(v, "40% wrote the bucket") {
		t.Errorf("view lacks the progress 40%% wrote the bucket:\n%s", v)
	}
	if strings.Contains(v, "\x1b]0;evil") {
		t.Error("an agent's progress reached the terminal unescaped")
	}
	if d := press(t, m, "enter").View(); !strings.Contains(d, "progress") || !strings.Contains(ansi.Strip(d), "40% wrote the bucket") {
		t.Errorf("the details lack the progress:\n%s", d)
	}
}
