package tui

import (
	"bytes"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
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
	fc := newFake()
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
