package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// planText is a plan artifact longer than a 24-line screen.
func planText() string {
	var b strings.Builder
	b.WriteString("# Plan: Billing with Stripe\n\nCharge customers monthly.\n\n## Specs\n\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "### Spec %d: Part %d\nBuild part %d of the billing system, with tests.\n\n", i, i, i)
	}
	b.WriteString("The end of the plan.\n")
	return b.String()
}

// withArtifacts gives m an artifact reader that serves text for any loop
// and records which loops it read.
func withArtifacts(m Model, text string, read *[]string) Model {
	m.readArtifact = func(_ context.Context, l loop.Loop) (string, error) {
		*read = append(*read, l.ID)
		return text, nil
	}
	return m
}

// TestArtifactView: v shows the selected plan's accepted artifact full
// screen; it scrolls, a decides from it (after a confirmation), esc closes
// it; loops without an artifact say why in the status line.
func TestArtifactView(t *testing.T) {
	t.Parallel()
	fc := newFake()
	var read []string
	m := withArtifacts(loaded(t, fc, 80, 24), planText()+"evil \x1b]52;c;eA==\a\n", &read)
	m = press(t, selectID(t, m, idBilling), "v")
	if !cmp.Equal(read, []string{idBilling}) {
		t.Fatalf("artifact reads = %v, want [%s]", read, idBilling)
	}
	v := m.View()
	for _, want := range []string{"ARTIFACT", `plan "Billing with Stripe"`, "lines 1–18 of", "# Plan: Billing with Stripe", "### Spec 1: Part 1", "a approve", "esc close"} {
		if !strings.Contains(v, want) {
			t.Errorf("artifact view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "The end of the plan.") || strings.Contains(v, "LOOP ") {
		t.Errorf("artifact view shows the end or the tree before scrolling:\n%s", v)
	}
	m = press(t, m, "j")
	if m.art.offset != 1 || !strings.Contains(m.View(), "lines 2–19 of") {
		t.Errorf("j did not scroll one line: offset %d\n%s", m.art.offset, m.View())
	}
	m = press(t, m, "G")
	v = m.View()
	if !strings.Contains(v, "The end of the plan.") || !strings.Contains(v, `evil \x1b]52;c;eA==\a`) || strings.ContainsAny(v, "\x1b\a") {
		t.Errorf("G did not reach the end, or the agent's escape reached the terminal:\n%q", v)
	}
	m = press(t, m, "g")
	if m.art.offset != 0 {
		t.Errorf("g: offset %d, want 0", m.art.offset)
	}

	// Approve from the view: a asks, y sends it, the view closes.
	m = press(t, m, "a")
	if m.mode != modeConfirm || !strings.Contains(m.View(), "approve plan") {
		t.Fatalf("a in the artifact view did not ask:\n%s", m.View())
	}
	m = press(t, m, "y")
	if got := fc.calls(); !cmp.Equal(got, []actCall{{ID: idBilling, Action: api.ActionApprove}}) {
		t.Errorf("Act calls = %v, want one approve", got)
	}
	if m.art.open {
		t.Error("the artifact view stayed open after the approval")
	}

	// esc closes; v on a ralph and on a plan without an artifact says why.
	m = press(t, m, "v", "esc")
	if m.art.open || !strings.Contains(m.View(), "LOOP") {
		t.Errorf("esc did not close the artifact view:\n%s", m.View())
	}
	m = press(t, selectID(t, m, idIndex), "v")
	wantFlash("a ralph loop changes code and writes no artifact: o shows its agent output")(t, m)
	m = press(t, selectID(t, m, idCookies), "v")
	wantFlash(`no accepted artifact yet: spec "Session cookies" is pending`)(t, m)
}

// TestActionsNameLoops: after approve and cancel the status line names the
// loops created or cancelled by title, as many as fit, not "(+N more)".
func TestActionsNameLoops(t *testing.T) {
	t.Parallel()
	fc := newFake()
	m := loaded(t, fc, 120, 30)

	// Cancel the phase "Migrations": it and its three ralphs.
	m = update(t, m, actMsg{action: api.ActionCancel, id: idPhase,
		res: api.ActionResult{Loop: loop.Loop{ID: idPhase, Status: loop.Cancelled}, Affected: []string{idPhase, idUsers, idIndex, idSeed}}})
	v := m.View()
	if want := `cancelled phase "Migrations" and 3 loops under it: "Create users table", "Add index", "Seed data"`; !strings.Contains(v, want) {
		t.Errorf("cancel message: want %q in:\n%s", want, v)
	}
	if strings.Contains(v, "more)") {
		t.Errorf("cancel message counts instead of naming:\n%s", v)
	}

	// Approve: the specs arrive on the stream after the answer; the
	// message names them as they do.
	m = update(t, m, actMsg{action: api.ActionApprove, id: idBilling,
		res: api.ActionResult{Loop: loop.Loop{ID: idBilling, Type: loop.Plan, Title: "Billing with Stripe", Status: loop.Complete}, Affected: []string{idCheckout, idWebhooks}}})
	if line := lineOf(m.View(), "approved plan"); !strings.HasSuffix(strings.TrimSpace(line), `approved plan "Billing with Stripe"; created 2 specs`) {
		t.Errorf("approve message before the specs arrive: %q", line)
	}
	specs := []loop.Loop{
		{ID: idCheckout, Type: loop.Spec, Title: "Checkout with Stripe Elements", Status: loop.Pending, Parent: idBilling, Depth: 1, Iteration: 1, MaxIterations: 25, CreatedAt: testNow},
		{ID: idWebhooks, Type: loop.Spec, Title: "Webhooks for payment events", Status: loop.Pending, Parent: idBilling, Depth: 1, Iteration: 1, MaxIterations: 25, CreatedAt: testNow},
	}
	var msgs []api.StreamMsg
	for i := range specs {
		msgs = append(msgs, api.StreamMsg{Type: api.StreamEvent, Seq: uint64(300 + i), Loop: &specs[i]})
	}
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: msgs})
	if want := `approved plan "Billing with Stripe"; created 2 specs: "Checkout with Stripe Elements", "Webhooks for payment events"`; !strings.Contains(m.View(), want) {
		t.Errorf("approve message: want %q in:\n%s", want, m.View())
	}

	// Narrow: the titles that fit, then a count.
	m = update(t, m, tea.WindowSizeMsg{Width: 100, Height: 24})
	line := lineOf(m.View(), "approved plan")
	if !strings.HasSuffix(line, `"Checkout with Stripe Elements" and 1 more`) || ansiWidth(line) > 100 {
		t.Errorf("narrow approve message %q: want the first title, then a count, within 100 cells", line)
	}
	m = update(t, m, tea.WindowSizeMsg{Width: 60, Height: 24})
	if line := lineOf(m.View(), "approved plan"); !strings.HasSuffix(line, "created 2 specs") {
		t.Errorf("approve message at 60 cells %q: want the count alone when no title fits", line)
	}
}

// TestSmallTerminal: at 80×24 every part keeps what matters most — the
// whole failure reason, the latest feedback, the prompts' answer keys, the
// inputs' placeholders, the footer's help and quit keys.
func TestSmallTerminal(t *testing.T) {
	t.Parallel()
	const reason = "max_iterations 100 reached; last: validate `go test ./...` exited 1 after the agent left the users table without its unique email index"
	fc := newFake()
	snap := fc.snap
	snap.Loops = append([]loop.Loop(nil), snap.Loops...)
	for i := range snap.Loops {
		switch snap.Loops[i].ID {
		case idSeed:
			snap.Loops[i].Reason = reason
			snap.Loops[i].Feedback = "Iteration 100 failed: validate `go test ./...` exited 1\nEnd of validation.log:\n--- FAIL: TestSeed (0.02s)\n    seed_test.go:9: NEWEST FAILURE\n\n--- earlier ---\nIteration 99 failed: OLDER FAILURE"
			snap.Loops[i].Workdir = "/home/dev/src/shop/.loopr/worktrees/" + idSeed
			snap.Loops[i].TriggeredBy = ".loopr/loops/" + idPhase + "/accepted/001-phase.md"
		case idSpec:
			snap.Loops[i].Title = "Token storage for every provider, with rotation and revocation"
		}
	}
	fc.snap = snap

	tests := []struct {
		name  string
		at    string
		keys  []string
		want  []string // on screen
		avoid []string // not on screen
	}{
		{name: "details keep the whole reason and the latest feedback", at: idSeed, keys: []string{"enter"},
			want:  []string{"reason", "max_iterations 100 reached", "unique email", "index", "last feedback", "Iteration 100 failed", "NEWEST FAILURE"},
			avoid: []string{"OLDER FAILURE", "triggered by"}},
		{name: "the feedback input shows its placeholder", at: idBilling, keys: []string{"i"},
			want: []string{"feedback: what should the next iteration change?", "enter send"}},
		{name: "the filter input shows its placeholder", keys: []string{"/"},
			want: []string{"/words, type:ralph, status:pending"}},
		{name: "a long confirmation keeps its answer keys", at: idSpec, keys: []string{"c"},
			want: []string{"cancel the 5 unfinished loops under spec", "… y/n", "y confirm"}},
		{name: "the footer keeps help and quit", want: []string{"? help", "q quit", "j/k move"}},
		{name: "the artifact key is in the footer", want: []string{"v artifact"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := loaded(t, fc, 80, 24)
			if tc.at != "" {
				m = selectID(t, m, tc.at)
			}
			m = press(t, m, tc.keys...)
			v := m.View()
			// Join the wrapped reason's lines to look for its words.
			flat := strings.Join(strings.Fields(v), " ")
			for _, w := range tc.want {
				if !strings.Contains(v, w) && !strings.Contains(flat, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("80×24 screen lacks %q:\n%s", w, v)
				}
			}
			for _, a := range tc.avoid {
				if strings.Contains(v, a) {
					t.Errorf("80×24 screen shows %q:\n%s", a, v)
				}
			}
			lines := strings.Split(v, "\n")
			if len(lines) != 24 {
				t.Errorf("%d lines, want 24", len(lines))
			}
			for i, l := range lines {
				if ansiWidth(l) > 80 {
					t.Errorf("line %d is %d wide: %q", i, ansiWidth(l), l)
				}
			}
		})
	}

	// Every word of the reason is on the screen, in order.
	m := press(t, selectID(t, loaded(t, fc, 80, 24), idSeed), "enter")
	var got []string
	inReason := false
	for _, l := range strings.Split(m.View(), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == "reason":
			inReason, f = true, f[1:]
		case inReason && !strings.HasPrefix(l, "              "):
			inReason = false
		}
		if inReason {
			got = append(got, f...)
		}
	}
	if strings.Join(got, " ") != reason {
		t.Errorf("the reason on screen is %q, want all of %q", strings.Join(got, " "), reason)
	}
}

// TestHeaderAt80: with a rate-limit backoff and a low disk, the 80-column
// header drops the workspace, the uptime and the idle type caps, and keeps
// the backoff countdown, the running count and the counts by status.
func TestHeaderAt80(t *testing.T) {
	t.Parallel()
	st := fixtureStatus()
	st.RateLimit = ratelimit.State{Hits: 2, BackoffUntil: testNow.Add(37 * time.Second), RecoveryUntil: testNow.Add(67 * time.Second)}
	st.DiskLow, st.DiskFreeGB = true, 3.2
	fc := newFake()
	fc.snap.Status = &st
	m := loaded(t, fc, 80, 24)
	head := strings.SplitN(m.View(), "\n", 2)[0]
	for _, want := range []string{"loopr", "429 backoff 37s", "run 1/50", "○5", "✓41"} {
		if !strings.Contains(head, want) {
			t.Errorf("80-column header %q lacks %q", head, want)
		}
	}
	for _, gone := range []string{"~/src/shop", "up 2h14m", "ralph 0/50"} {
		if strings.Contains(head, gone) {
			t.Errorf("80-column header %q keeps %q, which matters less", head, gone)
		}
	}
	if ansiWidth(head) > 80 {
		t.Errorf("header is %d wide", ansiWidth(head))
	}
	if wide := strings.SplitN(loaded(t, fc, 200, 24).View(), "\n", 2)[0]; !strings.Contains(wide, "~/src/shop") || !strings.Contains(wide, "disk low 3.2 GB") {
		t.Errorf("200-column header %q drops what fits", wide)
	}
}

// TestShortIDColumn: the tree shows each loop's short id (the end of its
// id, as branch names and `loopr list` show it) where the terminal has
// room to spare, and never at the cost of the other columns: not at 80 or
// 120 columns. The flat view shows it from 120.
func TestShortIDColumn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		w      int
		flat   bool
		showID bool
	}{
		{80, false, false}, {120, false, false}, {140, false, true}, {200, false, true},
		{80, true, false}, {120, true, true},
	} {
		m := loaded(t, newFake(), tc.w, 30)
		if tc.flat {
			m = press(t, m, "t")
		}
		v := m.View()
		row := lineOf(v, "Add index")
		has := strings.Contains(row, " "+loop.ShortID(idIndex)+" ")
		if has != tc.showID || strings.Contains(v, idIndex) {
			t.Errorf("width %d flat %v: short id shown %v, want %v (and never the whole id):\n%s", tc.w, tc.flat, has, tc.showID, v)
		}
		for _, line := range strings.Split(v, "\n") {
			if n := ansi.StringWidth(line); n > tc.w {
				t.Errorf("width %d flat %v: a line of %d columns: %q", tc.w, tc.flat, n, line)
			}
		}
	}
}
