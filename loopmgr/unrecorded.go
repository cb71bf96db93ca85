package loopmgr

import "time"

// Results that could not be recorded.
//
// Applying an iteration's result is one store transaction. When it fails
// (ENOSPC: the disk is full), the loop is still running under this
// manager's lease but no agent runs for it any more: left alone it would
// stay running, holding a slot, until the next daemon's recovery. Instead
// the manager remembers it and, on every tick, tries to put it back to
// pending at the same iteration (the result is lost, not the attempt), so
// the loop runs again once the disk has room.

// unrecorded remembers that the result of id's iteration was not committed.
func (m *Manager) unrecorded(id string, iteration int) {
	if m.unrec == nil {
		m.unrec = map[string]int{}
	}
	m.unrec[id] = iteration
}

// retryUnrecorded requeues the loops whose results could not be recorded.
// It runs on the manager's goroutine.
func (m *Manager) retryUnrecorded(now time.Time) {
	for id, it := range m.unrec {
		if err := m.requeue(id, it, now, "requeued at the same iteration: its result could not be recorded"); err != nil {
			m.log.Debug("requeue a loop whose result was not recorded", "loop", id, "err", err)
			continue
		}
		delete(m.unrec, id)
		m.log.Info("requeued a loop whose result could not be recorded", "loop", id, "iteration", it)
	}
}
