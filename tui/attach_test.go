package tui

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// TestAttachKey: T on a pending loop runs the Attach command for it (the
// dashboard suspended: an exec command), and the status line says how it
// ended.
func TestAttachKey(t *testing.T) {
	t.Parallel()
	m := selectID(t, loaded(t, newFake(), 120, 30), idIndex)
	var got string
	m.attach = func(id string) *exec.Cmd { got = id; return exec.Command("true") }
	nm, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("T")})
	m = nm.(Model)
	if got != idIndex || cmd == nil {
		t.Fatalf("T ran attach for %q (cmd %v), want %s", got, cmd != nil, idIndex)
	}
	m = update(t, m, attachedMsg{id: idIndex})
	if !strings.Contains(m.flash.text, "p resumes it") || m.flash.err {
		t.Errorf("after attach the status line is %+v, want what comes next", m.flash)
	}
	m = update(t, m, attachedMsg{id: idIndex, err: errors.New("exit status 1")})
	if !m.flash.err || !strings.Contains(m.flash.text, "exit status 1") {
		t.Errorf("after a failed attach the status line is %+v, want the error", m.flash)
	}
}
