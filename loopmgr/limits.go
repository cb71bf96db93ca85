package loopmgr

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/store"
)

// holdEvery is how often the manager looks for loops to put in (or take
// out of) needs_human for a long limit: a scan of the pending loops, so
// not every tick.
const holdEvery = 5 * time.Second

// limitHolds puts the pending loops whose agent profile has been limited
// longer than rate_limit.notify_after_secs, with no free fallback, in
// needs_human (reason limit), and puts back to pending those whose profile
// (or a fallback) is free again.
func (m *Manager) limitHolds(limits map[string]ratelimit.State, now time.Time) {
	notify := m.cfg().RateLimit.NotifyAfter()
	over := map[string]bool{}
	for p, st := range limits {
		if notify > 0 && st.Blocked(now) && st.LimitedFor(now) >= notify {
			over[p] = true
		}
	}
	if len(over) == 0 && !m.held {
		return
	}
	if now.Sub(m.lastHold) < holdEvery {
		return
	}
	m.lastHold = now
	agents := control.Policy(m.cfg()).Agents
	changed := 0
	still := false
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		var hold, release []loop.Loop
		if len(over) > 0 {
			if err := tx.ByStatus(loop.Pending, func(l loop.Loop) bool {
				if p, ok := agents.Pick(&l, limits, now); !ok && over[p] {
					hold = append(hold, l)
				}
				return true
			}); err != nil {
				return err
			}
		}
		if err := tx.ByStatus(loop.NeedsHuman, func(l loop.Loop) bool {
			if l.Needs != nil && l.Needs.Reason == loop.NeedsLimit {
				if _, ok := agents.Pick(&l, limits, now); ok {
					release = append(release, l)
				} else {
					still = true
				}
			}
			return true
		}); err != nil {
			return err
		}
		for _, l := range hold {
			p, _ := agents.Pick(&l, limits, now)
			st := limits[p]
			detail := fmt.Sprintf(loop.LimitedAgent+"%s limited since %s until %s (longer than rate_limit.notify_after_secs %d) and no fallback is free",
				p, st.Since.Format(time.RFC3339), st.BackoffUntil.Format(time.RFC3339), m.cfg().RateLimit.NotifyAfterSecs)
			needs := &loop.Needs{Reason: loop.NeedsLimit, Detail: detail, Since: now}
			if err := control.Move(tx, l, loop.NeedsHuman, now, "needs a person: "+detail, func(n *loop.Loop) { n.Needs = needs }); err != nil {
				return err
			}
			still = true
			changed++
		}
		for _, l := range release {
			p, _ := agents.Pick(&l, limits, now)
			if err := control.Move(tx, l, loop.Pending, now, "agent "+p+" is free again", func(n *loop.Loop) { n.Needs = nil }); err != nil {
				return err
			}
			changed++
		}
		return nil
	})
	if err != nil {
		m.log.Error("limit holds", "err", err)
		return
	}
	m.held = still
	if changed > 0 {
		m.log.Info("long limits: loops moved to or from needs_human", "count", changed)
		m.o.Notify()
	}
}
