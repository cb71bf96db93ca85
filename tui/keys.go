package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// keyMap holds every key the dashboard reacts to, with the help text the
// footer and the ? overlay show.
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Collapse, Expand                        key.Binding
	Details, Why, Output, Filter, Flat      key.Binding
	Artifact, Diff, NextFile, PrevFile      key.Binding
	Comment, Raw                            key.Binding
	Close                                   key.Binding
	Cancel, Reset, Pause                    key.Binding
	Approve, Reject, Iterate                key.Binding
	NextNeeds, Answer, Attach               key.Binding
	Help, Quit, ForceQuit                   key.Binding

	// Prompts.
	Yes, No, Accept key.Binding

	// Footer-only summaries of pairs of keys.
	moveHint, foldHint, planHint key.Binding
}

func newKeyMap() keyMap {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return keyMap{
		Up:        b("↑/k", "up", "up", "k"),
		Down:      b("↓/j", "down", "down", "j"),
		PageUp:    b("pgup/^u", "page up", "pgup", "ctrl+u", "ctrl+b"),
		PageDown:  b("pgdn/^d", "page down", "pgdown", "ctrl+d", "ctrl+f"),
		Top:       b("g/home", "first loop", "g", "home"),
		Bottom:    b("G/end", "last loop", "G", "end"),
		Collapse:  b("←/h", "collapse / parent", "left", "h"),
		Expand:    b("→/l", "expand", "right", "l"),
		Details:   b("enter", "details", "enter"),
		Why:       b("w", "why: score and gates", "w"),
		Output:    b("o", "agent output (live)", "o"),
		Raw:       b("R", "output: raw / rendered", "R"),
		Artifact:  b("v", "accepted artifact (scroll)", "v"),
		Diff:      b("d", "diff: what the loop changed", "d"),
		NextFile:  b("tab/]", "diff: next file", "tab", "]"),
		PrevFile:  b("⇧tab/[", "diff: previous file", "shift+tab", "["),
		Comment:   b("c", "diff: comment on the line", "c"),
		Filter:    b("/", "filter", "/"),
		Flat:      b("t", "flat view (schedule order)", "t"),
		Close:     b("esc", "close pane / clear filter", "esc"),
		Cancel:    b("c", "cancel loop + subtree", "c"),
		Reset:     b("r", "reset a failed loop", "r"),
		Pause:     b("p", "pause / resume", "p"),
		Approve:   b("a", "approve plan", "a"),
		Reject:    b("x", "reject plan", "x"),
		Iterate:   b("i", "iterate with feedback", "i"),
		NextNeeds: b("n", "next loop that needs you", "n"),
		Answer:    b("A", "answer a loop that needs you", "A"),
		Attach:    b("T", "take over by hand (loopr attach)", "T"),
		Help:      b("?", "help", "?"),
		Quit:      b("q", "quit", "q"),
		ForceQuit: b("ctrl+c", "quit (also from a prompt)", "ctrl+c"),
		Yes:       b("y", "confirm", "y", "Y"),
		No:        b("n/esc", "cancel", "n", "N", "esc"),
		Accept:    b("enter", "accept", "enter"),
		moveHint:  b("j/k", "move", "j", "k"),
		foldHint:  b("h/l", "fold", "h", "l"),
		planHint:  b("a/x/i", "plan", "a", "x", "i"),
	}
}

// ShortHelp is the footer.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{
		k.moveHint, k.foldHint, k.Details, shortly(k.Why, "why"), shortly(k.Output, "output"), shortly(k.Artifact, "artifact"),
		shortly(k.Diff, "diff"), shortly(k.Filter, "filter"), shortly(k.Flat, "flat view"), shortly(k.Cancel, "cancel"),
		shortly(k.Reset, "reset"), shortly(k.Pause, "pause"), k.planHint,
		shortly(k.NextNeeds, "needs you"), shortly(k.Answer, "answer"), k.Help, k.Quit,
	}
}

// FullHelp is the ? overlay, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Collapse, k.Expand},
		{k.Details, k.Why, k.Output, k.Raw, k.Artifact, k.Diff, k.Filter, k.Flat, k.Close, k.Help},
		{k.Cancel, k.Reset, k.Pause, k.Approve, k.Reject, k.Iterate, k.NextNeeds, k.Answer, k.Attach, k.Quit, k.ForceQuit},
	}
}

// scroll is how far a scrolling key moves a view of n lines whose page is
// page lines (up, down, a page, to either end); ok is false for any other
// key.
func (k keyMap) scroll(msg tea.KeyMsg, page, n int) (d int, ok bool) {
	switch {
	case key.Matches(msg, k.Up):
		return -1, true
	case key.Matches(msg, k.Down):
		return 1, true
	case key.Matches(msg, k.PageUp):
		return -page, true
	case key.Matches(msg, k.PageDown), msg.String() == " ":
		return page, true
	case key.Matches(msg, k.Top):
		return -n, true
	case key.Matches(msg, k.Bottom):
		return n, true
	}
	return 0, false
}

// shortly returns b with a shorter description for the footer.
func shortly(b key.Binding, desc string) key.Binding {
	b.SetHelp(b.Help().Key, desc)
	return b
}

// promptKeys is the footer while a y/n question or a text prompt is open.
type promptKeys []key.Binding

func (p promptKeys) ShortHelp() []key.Binding  { return p }
func (p promptKeys) FullHelp() [][]key.Binding { return [][]key.Binding{p} }
