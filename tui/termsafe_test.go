package tui

import (
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestAgentTextIsEscapedInView: titles, tasks and feedback are agents'
// text; an escape sequence in them (OSC 52 sets the clipboard, ESC[2J
// clears the screen) reaches the terminal only escaped, whether it came in
// the snapshot or in a later event.
func TestAgentTextIsEscapedInView(t *testing.T) {
	t.Parallel()
	const evil = "Evil \x1b]52;c;cm0gLXJmIH4=\a\x1b[2J title"
	const shown = `Evil \x1b]52;c;cm0gLXJmIH4=\a\x1b[2J title`
	fc := newFake()
	snap := fc.snap
	snap.Loops = append([]loop.Loop(nil), snap.Loops...)
	snap.Loops[3].Title = evil
	snap.Loops[3].Task = "task \x1b]0;pwned\a\nsecond line"
	snap.Loops[3].Feedback = "fb \x1b[2J"
	fc.snap = snap
	m := loaded(t, fc, 200, 40)                             // the LOOP column shows the whole title
	m = press(t, selectID(t, m, snap.Loops[3].ID), "enter") // the details pane shows the task
	v := m.View()
	if strings.ContainsAny(v, "\x1b\a") {
		t.Fatalf("View() carries a raw escape or bell:\n%q", v)
	}
	for _, want := range []string{shown, `task \x1b]0;pwned\a`} {
		if !strings.Contains(v, want) {
			t.Errorf("View() lacks the escaped text %q:\n%s", want, v)
		}
	}

	// The same through a stream event.
	l := snap.Loops[2]
	l.Title, l.UpdatedAt = "Renamed \x1b[2J\x1b]52;c;eA==\a", testNow
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamEvent, Seq: 200, Loop: &l}}})
	v = m.View()
	if strings.ContainsAny(v, "\x1b\a") {
		t.Fatalf("View() after an event carries a raw escape:\n%q", v)
	}
	if !strings.Contains(v, `Renamed \x1b[2J\x1b]52;c;eA==\a`) {
		t.Errorf("View() lacks the escaped title from the event:\n%s", v)
	}
}
