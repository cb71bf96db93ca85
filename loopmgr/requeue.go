// How a run that did not pass is recorded: requeued at the same iteration
// (a clean stop, a pause, a rate limit, a transient provider error) or a
// failed iteration with its feedback.

package loopmgr

import (
	"fmt"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// requeue puts a running loop back to pending at the same iteration.
func (m *Manager) requeue(id string, iteration int, now time.Time, msg string) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		return control.Move(tx, cur, loop.Pending, now, msg, nil)
	})
}

// paused puts a running loop whose agent `loopr pause` stopped back to
// pending at the same iteration, then pauses it.
func (m *Manager) paused(id string, iteration int, now time.Time) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		if err := control.Move(tx, cur, loop.Pending, now, "agent stopped to pause: requeued at the same iteration", nil); err != nil {
			return err
		}
		if cur, err = tx.Get(id); err != nil {
			return err
		}
		return control.Move(tx, cur, loop.Paused, now, "paused by user", nil)
	})
}

// requeueAfter is requeue with the loop not runnable before at.
func (m *Manager) requeueAfter(id string, iteration int, now, at time.Time, msg string) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		return control.Move(tx, cur, loop.Pending, now, msg, func(n *loop.Loop) {
			if n.RunnableAt.Before(at) {
				n.RunnableAt = at
			}
		})
	})
}

// rateLimited records the hit in the state of the agent profile the loop
// ran on and requeues the loop without spending an iteration; a loop rate
// limited rate_limit.max_consecutive times in a row parks instead.
func (m *Manager) rateLimited(id string, iteration int, profile string, res runner.Result, now time.Time) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		limits, err := control.LoadLimits(tx)
		if err != nil {
			return err
		}
		st := limits[profile]
		var delay time.Duration
		if !res.RateLimitUntil.IsZero() {
			delay = st.HitUntil(now, res.RateLimitUntil, m.rateLimitConfig())
		} else {
			delay = st.Hit(now, res.RateLimitAfter, m.rateLimitConfig())
		}
		limits[profile] = st
		if err := control.SaveLimits(tx, limits); err != nil {
			return err
		}
		msg := fmt.Sprintf("rate limited (agent %s, hit %d): its loops wait %s, until %s; no iteration spent",
			profile, st.Hits, delay.Round(time.Second), st.BackoffUntil.Format(time.RFC3339))
		if detail := strings.TrimPrefix(res.Reason, "rate limited: "); detail != "" && detail != res.Reason {
			msg += " (" + detail + ")" // what the agent said: the limit, its reset, whether it was believed
		}
		if _, err := tx.AppendEvent(loop.Event{Time: now, Loop: id, Kind: loop.EventRateLimit, Iteration: iteration, Message: msg}); err != nil {
			return err
		}
		m.log.Warn("rate limited", "loop", id, "agent", profile, "hits", st.Hits, "delay", delay, "until", st.BackoffUntil)
		streak := cur.RateLimitStreak + 1
		if limit := m.cfg().RateLimit.MaxConsecutive; limit > 0 && streak >= limit {
			why := fmt.Sprintf("rate limited %d times in a row (rate_limit.max_consecutive %d); last: agent %s until %s",
				streak, limit, profile, st.BackoffUntil.Format(time.RFC3339))
			return control.Move(tx, cur, loop.Failed, now, why, func(n *loop.Loop) {
				n.Reason, n.RateLimitStreak = why, streak
			})
		}
		return control.Move(tx, cur, loop.Pending, now, "requeued after rate limit", func(n *loop.Loop) {
			n.RateLimitStreak = streak
		})
	})
}

// transientOutcome marks a failed result the provider caused (5xx,
// overloaded, connection reset): retried without spending the iteration,
// at most retry.transient_max times.
const transientOutcome runner.Outcome = "transient"

// transient requeues the loop at the same iteration after a backoff, or
// fails the iteration once it met retry.transient_max transient errors.
func (m *Manager) transient(id string, iteration int, res runner.Result, now time.Time) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		limit := m.cfg().Retry.TransientMax
		what := "transient provider error"
		if res.TransientWhat != "" {
			what = res.TransientWhat
		}
		if cur.TransientRetries >= limit {
			reason := fmt.Sprintf("%s, %d retries spent (retry.transient_max %d): %s", what, cur.TransientRetries, limit, res.Reason)
			return m.failLoop(tx, cur, reason, res.Feedback, now)
		}
		n := cur.TransientRetries + 1
		delay := m.cfg().Retry.Delay(n)
		msg := fmt.Sprintf("%s (%d of %d retries, no iteration spent): %s; retry in %s", what, n, limit, res.Reason, delay)
		return control.Move(tx, cur, loop.Pending, now, msg, func(l *loop.Loop) {
			l.TransientRetries = n
			l.RunnableAt = now.Add(delay)
		})
	})
}

// failIteration records a failed iteration: back to pending with
// iteration+1 and a deterministic backoff, or failed (parked) at the budget.
func (m *Manager) failIteration(id string, iteration int, reason, feedback string, now time.Time) error {
	return m.update(id, func(tx *store.Tx) error {
		cur, err := m.ours(tx, id, iteration)
		if err != nil {
			return err
		}
		return m.failLoop(tx, cur, reason, feedback, now)
	})
}

// failLoop is failIteration inside a transaction, for a loop known to be ours.
func (m *Manager) failLoop(tx *store.Tx, cur loop.Loop, reason, feedback string, now time.Time) error {
	if reason == "" {
		reason = "iteration failed"
	}
	fb := boundFeedback(fmt.Sprintf("Iteration %d failed: %s\n%s", cur.Iteration, reason, feedback), cur.Feedback)
	cur.RateLimitStreak, cur.TransientRetries = 0, 0 // the iteration ran to an outcome
	if cur.Iteration >= cur.MaxIterations {
		why := fmt.Sprintf("max_iterations %d reached; last: %s", cur.MaxIterations, reason)
		return control.Move(tx, cur, loop.Failed, now, why, func(n *loop.Loop) {
			n.Reason, n.Feedback, n.Answer = why, fb, ""
		})
	}
	delay := m.cfg().Retry.Delay(cur.Iteration)
	msg := fmt.Sprintf("iteration %d failed: %s; retry in %s", cur.Iteration, reason, delay)
	return control.Move(tx, cur, loop.Pending, now, msg, func(n *loop.Loop) {
		n.Iteration++
		n.RunnableAt = now.Add(delay)
		n.Feedback = fb
		n.Answer = "" // the iteration ran with it
	})
}

// boundFeedback puts the newest failure first and keeps the total bounded.
func boundFeedback(newest, older string) string {
	s := strings.TrimSpace(newest)
	if older != "" {
		s += "\n\n--- earlier ---\n" + older
	}
	if len(s) > maxFeedback {
		s = s[:maxFeedback] + "\n[… older feedback cut]"
	}
	return s
}
