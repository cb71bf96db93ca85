package tui

import (
	"fmt"
	"slices"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/loopr-dev/loopr/loop"
)

// attachedMsg says that `loopr attach` of loop id ended (err: how).
type attachedMsg struct {
	id  string
	err error
}

// attachable are the statuses loopr attach takes over.
var attachable = []loop.Status{loop.Pending, loop.Running, loop.Paused}

// startAttach suspends the dashboard and runs `loopr attach` on the
// selected loop in the terminal (T); the dashboard comes back when the
// person quits the session.
func (m Model) startAttach() (Model, tea.Cmd) {
	l := m.selected()
	switch {
	case l == nil:
		m.flash = flash{text: "no loop selected", err: true}
		return m, nil
	case !slices.Contains(attachable, l.Status):
		m.flash = flash{text: fmt.Sprintf("take over: %s is %s; only a pending, running or paused loop can be taken over", loop.ShortID(l.ID), l.Status), err: true}
		return m, nil
	case m.attach == nil:
		m.flash = flash{text: "taking over is not available here: run loopr attach " + loop.ShortID(l.ID), err: true}
		return m, nil
	}
	id := l.ID
	return m, tea.ExecProcess(m.attach(id), func(err error) tea.Msg { return attachedMsg{id: id, err: err} })
}

// attachedFlash says how the take-over ended and what comes next.
func attachedFlash(msg attachedMsg) flash {
	short := loop.ShortID(msg.id)
	if msg.err != nil {
		return flash{text: fmt.Sprintf("take over %s: %v (loopr attach %s says why)", short, msg.err, short), err: true}
	}
	return flash{text: fmt.Sprintf("took over %s: your work is on its branch; it stays paused — p resumes it", short)}
}
