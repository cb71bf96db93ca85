package tui

import (
	"errors"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/loopr-dev/loopr/api"
)

// connect opens the event stream, dialling first when useDial.
func (m Model) connect(gen int, useDial bool) tea.Cmd {
	ctx, c, dial := m.ctx, m.client, m.dial
	return func() tea.Msg {
		if useDial && dial != nil {
			nc, err := dial(ctx)
			if err != nil {
				return streamFailedMsg{gen: gen, err: err}
			}
			c = nc
		}
		if c == nil {
			return streamFailedMsg{gen: gen, err: errNoClient}
		}
		ch, err := c.Events(ctx)
		if err != nil {
			return streamFailedMsg{gen: gen, err: err}
		}
		return streamOpenedMsg{gen: gen, client: c, ch: ch}
	}
}

// waitStream reads the next stream message, plus every message already
// queued behind it (up to maxBatch), so a burst costs one rebuild and a
// single change is shown on the very next frame.
func (m Model) waitStream() tea.Cmd {
	gen, ch, clock := m.gen, m.stream, m.clock
	return func() tea.Msg {
		first, ok := <-ch
		if !ok {
			return streamMsg{gen: gen, closed: true, now: clock()}
		}
		msgs := []api.StreamMsg{first}
		for len(msgs) < maxBatch {
			select {
			case sm, ok := <-ch:
				if !ok {
					return streamMsg{gen: gen, msgs: msgs, closed: true, now: clock()}
				}
				msgs = append(msgs, sm)
			default:
				return streamMsg{gen: gen, msgs: msgs, now: clock()}
			}
		}
		return streamMsg{gen: gen, msgs: msgs, now: clock()}
	}
}

// redialDelay is the wait before reconnect attempt n (0-based): 1s, 2s, 4s, 8s, 10s …
func redialDelay(n int) time.Duration {
	d := time.Second
	for i := 0; i < n && d < redialMax; i++ {
		d *= 2
	}
	return min(d, redialMax)
}

// disconnected records a lost (or failed) connection and schedules a redial.
func (m *Model) disconnected(err error) tea.Cmd {
	m.conn = connDown
	m.stream = nil
	m.connErr = err
	if errors.Is(err, errNoClient) && m.dial == nil {
		return nil // nothing to retry with
	}
	d := redialDelay(m.attempt)
	m.attempt++
	m.retryAt = m.now.Add(d)
	gen := m.gen
	return tea.Tick(d, func(time.Time) tea.Msg { return redialMsg{gen: gen} })
}

// applyStream folds a batch of stream messages into the model.
func (m Model) applyStream(msg streamMsg) (tea.Model, tea.Cmd) {
	m.now = msg.now
	refetchWhy, changed := false, false
	var notes []string
	for _, sm := range msg.msgs {
		switch sm.Type {
		case api.StreamSnapshot:
			m.applySnapshot(sm)
			m.attempt = 0
			refetchWhy, changed = true, true
		case api.StreamEvent:
			m.applyEvent(sm)
			changed = true
			if n := noteOf(sm); n != "" {
				notes = append(notes, n)
			}
			if sm.Loop != nil && sm.Loop.ID == m.why.id {
				refetchWhy = true
			}
		case api.StreamStatus:
			if sm.Status != nil {
				m.setStatus(*sm.Status)
				changed = true
			}
		}
	}
	var cmds []tea.Cmd
	if len(notes) > 0 {
		m.flash = flash{text: notes[len(notes)-1], note: true}
		cmds = append(cmds, m.notify(notes))
	}
	if m.synced && changed {
		m.rebuild()
	} else if m.synced && m.refreshSchedule() && m.flat { // the clock moved: a heartbeat
		m.buildRows()
	}
	if refetchWhy && m.pane == paneWhy && m.sel != "" {
		cmds = append(cmds, m.openWhy())
	}
	if msg.closed {
		cmds = append(cmds, m.disconnected(nil))
	} else {
		cmds = append(cmds, m.waitStream())
	}
	return m, tea.Batch(cmds...)
}
