package loopmgr

import "time"

// Results that could not be recorded.
//
// Applying an iteration's result is one store transaction. When it fails
// for a transient reason (ENOSPC: the disk is full), the loop is still
// running under this manager's lease but no agent runs for it any more:
// left alone it would stay running, holding a slot, until the next daemon's
// recovery. Instead the manager remembers it and, on every tick, tries to
// put it back to pending at the same iteration (the result is lost, not the
// attempt), so the loop runs again once the disk has room. The requeued
// loop waits the retry backoff (retry: in loopr.yml) for the number of
// results in a row it lost this way, so a store that keeps refusing writes
// cannot turn into agents started back to back. Results
// that fail for a permanent reason never come here: they spend the
// iteration (applyFailed).

// unrecorded remembers that the result of id's iteration was not committed.
func (m *Manager) unrecorded(id string, iteration int) {
	if m.unrec == nil {
		m.unrec, m.unrecRun = map[string]int{}, map[string]int{}
	}
	m.unrec[id] = iteration
	m.unrecRun[id]++
}

// recorded forgets id's run of unrecorded results once one is applied.
func (m *Manager) recorded(id string) {
	delete(m.unrecRun, id)
}

// retryUnrecorded requeues the loops whose results could not be recorded.
// It runs on the manager's goroutine.
func (m *Manager) retryUnrecorded(now time.Time) {
	for id, it := range m.unrec {
		wait := m.cfg().Retry.Delay(m.unrecRun[id])
		if err := m.requeueAfter(id, it, now, now.Add(wait), "requeued at the same iteration: its result could not be recorded"); err != nil {
			m.log.Debug("requeue a loop whose result was not recorded", "loop", id, "err", err)
			continue
		}
		delete(m.unrec, id)
		m.log.Info("requeued a loop whose result could not be recorded", "loop", id, "iteration", it)
	}
}
