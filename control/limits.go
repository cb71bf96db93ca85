package control

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/store"
)

// The rate-limit state of agent profiles, as a person sees and clears it
// (`loopr limits`): a limit the provider announced is believed up to
// ratelimit.Horizon, and a person who knows better (the plan was upgraded,
// the reset was misread by an older loopr) clears it.

// profileLimit is the summary of one profile's state at now.
func profileLimit(name string, rl ratelimit.State, now time.Time) api.ProfileLimit {
	pl := api.ProfileLimit{Agent: name, Hits: rl.Hits, Limited: rl.Blocked(now), Recovering: rl.Recovering(now), Since: rl.Since}
	if pl.Limited {
		pl.ResumeAt = rl.ResumeAt()
	}
	return pl
}

// Limits returns the rate-limit state of every agent profile at now: those
// of loopr.yml, then any other the store still holds a state for, each
// with the loops that wait in needs_human for it.
func (s *Service) Limits(now time.Time) ([]api.AgentLimit, error) {
	c := s.cfg()
	agents := Policy(c).Agents
	var limits map[string]ratelimit.State
	held := map[string]int{}
	err := s.Store.View(func(tx *store.Tx) error {
		var err error
		if limits, err = LoadLimits(tx); err != nil {
			return err
		}
		return tx.ByStatus(loop.NeedsHuman, func(l loop.Loop) bool {
			if l.Needs != nil && l.Needs.Reason == loop.NeedsLimit {
				p, _ := agents.Pick(&l, limits, now)
				held[p]++
			}
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	names := c.Profiles()
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	out := make([]api.AgentLimit, 0, len(names))
	for _, name := range names {
		rl := limits[name]
		_, configured := c.Profile(name)
		out = append(out, api.AgentLimit{ProfileLimit: profileLimit(name, rl, now), Configured: configured,
			LastHit: rl.LastHit, RecoveryUntil: rl.RecoveryUntil, Held: held[name]})
	}
	return out, nil
}

// ClearLimit forgets the rate-limit state of agent profile name (`loopr
// limits clear`): its loops may start at once, and those waiting in
// needs_human for the limit go back to pending, in the same transaction.
func (s *Service) ClearLimit(name string) (api.ClearLimitResult, error) {
	c := s.cfg()
	now := s.Now()
	res := api.ClearLimitResult{Agent: name, Released: []string{}}
	err := s.Store.Update(func(tx *store.Tx) error {
		limits, err := LoadLimits(tx)
		if err != nil {
			return err
		}
		rl, stored := limits[name]
		if _, ok := c.Profile(name); !ok && !stored {
			known := c.Profiles()
			for p := range limits {
				if !slices.Contains(known, p) {
					known = append(known, p)
				}
			}
			return Invalid("profile", "unknown agent profile %q (known: %s)", name, strings.Join(known, ", "))
		}
		res.Was = profileLimit(name, rl, now)
		if stored {
			delete(limits, name)
			if err := SaveLimits(tx, limits); err != nil {
				return err
			}
		}
		agents := Policy(c).Agents
		var release []loop.Loop
		if err := tx.ByStatus(loop.NeedsHuman, func(l loop.Loop) bool {
			if l.Needs != nil && l.Needs.Reason == loop.NeedsLimit {
				if _, ok := agents.Pick(&l, limits, now); ok {
					release = append(release, l)
				}
			}
			return true
		}); err != nil {
			return err
		}
		for _, l := range release {
			if err := Move(tx, l, loop.Pending, now, "agent "+name+": limit cleared by user", func(n *loop.Loop) { n.Needs = nil }); err != nil {
				return err
			}
			res.Released = append(res.Released, l.ID)
		}
		return nil
	})
	return res, err
}

// limitHeld refuses an answer to l, a loop in needs_human for a rate
// limit, while its profile and every fallback are still limited: pending
// again, it would wait behind the same limit, out of "Needs you". The
// manager releases it by itself when the limit ends; `loopr limits clear`
// ends it now.
func (s *Service) limitHeld(tx *store.Tx, l loop.Loop, now time.Time) error {
	if l.Status != loop.NeedsHuman || l.Needs == nil || l.Needs.Reason != loop.NeedsLimit {
		return nil
	}
	limits, err := LoadLimits(tx)
	if err != nil {
		return err
	}
	agents := Policy(s.cfg()).Agents
	p, ok := agents.Pick(&l, limits, now)
	if ok {
		return nil
	}
	return &ActionError{Action: api.ActionAnswer, Loop: l, Err: &loop.TransitionError{ID: l.ID, From: l.Status, To: loop.Pending},
		Msg: fmt.Sprintf("%s: agent %s is rate limited until %s and no fallback is free; an answer would leave this %s behind the same limit — it resumes by itself then, or now with loopr limits clear %s",
			l.ID, p, limits[p].ResumeAt().Format(time.RFC3339), l.Type, p)}
}
