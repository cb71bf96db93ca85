// Package ratelimit holds loopr's shared HTTP-429 backoff (SPEC §5): one State
// for the whole daemon, so that when one agent is rate limited no other loop
// starts and hammers the provider too.
//
// The package is pure. It reads no clock: every method takes the instant it
// is evaluated at, so the daemon, `loopr debug scheduler --now` and the tests
// all see the same answers for the same inputs. State is a plain value that
// the store persists as JSON, so a restarted daemon keeps honouring a backoff.
//
// The life of a backoff:
//
//	Hit ─► blocked until BackoffUntil ─► recovering until RecoveryUntil ─► normal
//	        (no loop starts)               (at most one start per poll)
//
// A hit computes delay = max(retryAfter, min(Initial·2^(hits-1), Max)); hits
// count consecutive rate limits and Success resets them. A wait announced by
// the provider (Retry-After, a reset time) is honoured even beyond Max, up
// to Horizon (7 days); one further away is not believed. ParseHint reads
// such an announcement from an agent's output.
package ratelimit

import (
	"math"
	"time"
)

// Config sets the backoff (loopr.yml rate_limit.*).
type Config struct {
	Initial  time.Duration // first backoff (initial_backoff_secs)
	Max      time.Duration // cap of the exponential backoff (max_backoff_secs); <= 0: no cap
	Recovery time.Duration // ramp after a backoff with at most one start per poll (recovery_period_secs)
}

// DefaultConfig returns the seed 004 defaults: 5s initial, 120s max, 30s recovery.
func DefaultConfig() Config {
	return Config{Initial: 5 * time.Second, Max: 120 * time.Second, Recovery: 30 * time.Second}
}

// Backoff returns the exponential part of the delay for the hits-th
// consecutive hit: Initial·2^(hits-1), capped at Max (when Max > 0) and
// saturating instead of overflowing. It is 0 for hits < 1.
func (c Config) Backoff(hits int) time.Duration {
	if hits < 1 || c.Initial <= 0 {
		return 0
	}
	d := c.Initial
	for i := 1; i < hits; i++ {
		if c.Max > 0 && d >= c.Max {
			break
		}
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if c.Max > 0 && d > c.Max {
		d = c.Max
	}
	return d
}

// Horizon is the longest wait loopr takes from a provider's word: a limit
// announced to end further away than this (a stray number, an epoch in
// milliseconds read as seconds: the year 5138) is not believed. The hit
// then backs off as if nothing was announced, and the next start probes
// the provider again, as for a reset already past. Weekly limits fit.
// The exponential backoff is capped here too, whatever Config.Max says.
const Horizon = 7 * 24 * time.Hour

// Trusted reports whether a limit announced at now to end at until is
// believed: no further than Horizon away. A reset already past is not
// (there is nothing to wait for, and the caller's backoff re-probes).
func Trusted(now, until time.Time) bool {
	return until.After(now) && !until.After(now.Add(Horizon))
}

// Epoch reads a unix epoch a provider announced a reset with: seconds, or
// milliseconds when it is too large for seconds of a plausible date
// (>= 1e11, the year 5138, while now in milliseconds is 1.7e12). It is
// the zero time for n <= 0.
func Epoch(n int64) time.Time {
	switch {
	case n <= 0:
		return time.Time{}
	case n >= 1e11:
		return time.UnixMilli(n)
	}
	return time.Unix(n, 0)
}

// State is the shared rate-limit state. The zero value is "never limited".
type State struct {
	Hits          int       `json:"hits"`                    // consecutive rate limits since the last success
	BackoffUntil  time.Time `json:"backoff_until,omitzero"`  // no loop starts before this instant
	RecoveryUntil time.Time `json:"recovery_until,omitzero"` // end of the one-start-per-poll ramp
	LastHit       time.Time `json:"last_hit,omitzero"`       // when the last rate limit was recorded
	LastSuccess   time.Time `json:"last_success,omitzero"`   // when the last success was recorded
	// Since is when the current run of limits began: the first hit after a
	// success (or ever); zero once a success ends it.
	Since time.Time `json:"since,omitzero"`
}

// Hit records a rate limit at now. retryAfter is the wait the provider asked
// for (0 when it did not say). It increments Hits, computes
//
//	delay = max(retryAfter, min(Initial·2^(hits-1), Max))
//
// and extends BackoffUntil to now+delay (never shortening a backoff already
// running, since several loops may report the same limit). RecoveryUntil
// becomes BackoffUntil + Recovery. It returns delay. A retryAfter beyond
// Horizon is not believed (it counts as 0), and the exponential part stops
// at Horizon: no hit blocks a profile longer than that.
func (s *State) Hit(now time.Time, retryAfter time.Duration, c Config) time.Duration {
	if s.Hits == 0 || s.Since.IsZero() {
		s.Since = now
	}
	s.Hits++
	if retryAfter > Horizon {
		retryAfter = 0
	}
	delay := max(retryAfter, min(c.Backoff(s.Hits), Horizon), 0)
	if until := now.Add(delay); until.After(s.BackoffUntil) {
		s.BackoffUntil = until
	}
	s.RecoveryUntil = s.BackoffUntil.Add(max(c.Recovery, 0))
	s.LastHit = now
	return delay
}

// HitUntil records a rate limit at now whose end the provider announced: no
// loop starts before until, even when that is further away than c.Max. It is
// Hit with retryAfter = until - now, so the exponential backoff still applies
// when the announced time is sooner (or already past, or beyond Horizon:
// not believed).
func (s *State) HitUntil(now, until time.Time, c Config) time.Duration {
	return s.Hit(now, until.Sub(now), c)
}

// Success records a call that was not rate limited: Hits goes back to 0, so
// the next hit starts again from Initial. A backoff already running is not cut
// short; other loops may still be inside the provider's window.
func (s *State) Success(now time.Time) {
	s.Hits = 0
	s.LastSuccess = now
	if !s.Blocked(now) {
		// A run that started before the limit and ends well while the
		// backoff still runs does not end the limit: its clock (what
		// rate_limit.notify_after_secs measures) goes on.
		s.Since = time.Time{}
	}
}

// LimitedFor returns how long the current run of limits lasts as far as
// is known at now: from Since to the end of the backoff (or now, when
// later). 0 when not blocked.
func (s State) LimitedFor(now time.Time) time.Duration {
	if !s.Blocked(now) || s.Since.IsZero() {
		return 0
	}
	return s.BackoffUntil.Sub(s.Since)
}

// Blocked reports whether no loop may start at now.
func (s State) Blocked(now time.Time) bool { return now.Before(s.BackoffUntil) }

// Remaining returns how long the backoff still runs at now, or 0.
func (s State) Remaining(now time.Time) time.Duration {
	if !s.Blocked(now) {
		return 0
	}
	return s.BackoffUntil.Sub(now)
}

// Recovering reports whether now falls in the recovery ramp: the backoff is
// over but RecoveryUntil is not reached, so at most one loop starts per poll.
func (s State) Recovering(now time.Time) bool {
	return !s.Blocked(now) && now.Before(s.RecoveryUntil)
}

// ResumeAt returns when loops may start again: BackoffUntil, or the zero time
// when the state was never limited. It may be in the past.
func (s State) ResumeAt() time.Time { return s.BackoffUntil }
