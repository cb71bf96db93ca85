package loopmgr

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// An iteration can fail before its agent starts for a reason of this
// machine, not of the loop: its worktree cannot be made (a read-only or
// full home, a git that fails), its iteration directory, prompt or log
// cannot be written. The agent never ran, so the loop spends no
// iteration: it waits (retry.backoff_*, growing with each such failure in
// a row) and tries again at the same iteration, for as long as it takes
// the machine to be fixed. Each attempt is journalled with its error.

// setupOutcome marks a result that failed before the agent started, for a
// reason of this machine (runner.Result.Setup, or the preparation).
const setupOutcome runner.Outcome = "setup"

// setupFailed requeues the loop at the same iteration after a wait that
// grows with the setup failures in a row.
func (m *Manager) setupFailed(id string, iteration int, res runner.Result, now time.Time) error {
	n := m.setupFails[id] + 1
	m.setupFails[id] = n
	delay := max(m.cfg().Retry.Delay(n), m.cfg().PollInterval())
	msg := fmt.Sprintf("could not start the agent (%d in a row, no iteration spent): %s; retry in %s", n, res.Reason, delay)
	m.log.Warn("could not start the agent", "loop", id, "iteration", iteration, "in_a_row", n, "err", res.Reason, "retry_in", delay)
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		return control.Move(tx, cur, loop.Pending, now, msg, func(l *loop.Loop) {
			l.RunnableAt = now.Add(delay)
			l.Reason = loop.SetupHold + res.Reason // `loopr why` says what to fix
		})
	})
}
