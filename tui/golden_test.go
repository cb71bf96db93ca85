package tui

import (
	"bytes"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// The golden tests run the real program (teatest) against the fake client at
// a fixed size and clock with plain styles, drive it with keys, and compare
// the final screen with testdata/<Test>.golden. Regenerate with
//
//	go test ./tui -run Golden -update

const goldenW, goldenH = 120, 30

// runGolden starts the program, waits for the tree, presses keys, waits for
// until to appear, quits and compares the final frame.
func runGolden(t *testing.T, until string, keys ...string) {
	t.Helper()
	runGoldenOn(t, newFake(), until, keys...)
}

// runGoldenOn is runGolden on fc.
func runGoldenOn(t *testing.T, fc *fakeClient, until string, keys ...string) {
	t.Helper()
	tm := teatest.NewTestModel(t, testModel(fc), teatest.WithInitialTermSize(goldenW, goldenH))
	waitFor(t, tm, "Create users table")
	for _, k := range keys {
		tm.Send(keyMsg(k))
	}
	if until != "" {
		waitFor(t, tm, until)
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("q")})
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))
	golden.RequireEqual(t, []byte(fm.View()))
}

func waitFor(t *testing.T, tm *teatest.TestModel, s string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(s)) },
		teatest.WithDuration(5*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

// TestGoldenTree: the main screen, the TUI.md sketch.
func TestGoldenTree(t *testing.T) {
	t.Parallel()
	runGolden(t, "")
}

// TestGoldenWhy: the why pane for a ralph in backoff: formula and every gate.
func TestGoldenWhy(t *testing.T) {
	t.Parallel()
	runGolden(t, "artifact present", "j", "j", "j", "j", "w")
}

// TestGoldenHelp: the ? overlay.
func TestGoldenHelp(t *testing.T) {
	t.Parallel()
	runGolden(t, "iterate with feedback", "?")
}

// TestGoldenAwaitingApproval: a plan awaiting approval, selected, its details
// open: the row says what the user can do and the pane shows the artifact.
func TestGoldenAwaitingApproval(t *testing.T) {
	t.Parallel()
	keys := []string{"G", "k", "k", "enter"}
	runGolden(t, "DETAILS", keys...)
}

// TestGoldenNeedsYou: two loops need you: the group heads the tree, the
// header counts them, the plan's row shows its tree's state, n selects the
// second one and its details show the repeated failure.
func TestGoldenNeedsYou(t *testing.T) {
	t.Parallel()
	runGoldenOn(t, needsFake(), "DETAILS", "n", "enter")
}

// TestEventLatency: a status change pushed on the stream is on screen well
// within 200 ms (SPEC: the dashboard shows changes as they happen).
func TestEventLatency(t *testing.T) {
	t.Parallel()
	fc := newFake()
	fc.stream = make(chan api.StreamMsg, 1)
	fc.stream <- fc.snap
	tm := teatest.NewTestModel(t, testModel(fc), teatest.WithInitialTermSize(goldenW, goldenH))
	waitFor(t, tm, "Create users table")

	l := fixtureLoops()[3]
	l.Status, l.StartedAt, l.UpdatedAt = loop.Running, testNow, testNow
	start := time.Now()
	fc.stream <- api.StreamMsg{Type: api.StreamEvent, Loop: &l}
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("● ralph Create users table")) },
		teatest.WithDuration(2*time.Second), teatest.WithCheckInterval(2*time.Millisecond))
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("the change took %v to reach the screen, want < 200ms", d)
	} else {
		t.Logf("event to screen: %v", d)
	}
	tm.Send(keyMsg("q"))
	tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
}
