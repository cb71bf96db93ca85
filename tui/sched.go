package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Reason codes the dashboard derives locally (the subset of SPEC §4 it can
// see from the records and the daemon status). codeNext means every gate
// passes and a slot is free: the scheduler would start the loop now.
const (
	codeNext             = "next"
	codePaused           = "paused"
	codeParentIncomplete = "parent_incomplete"
	codeBackoff          = "backoff"
	codeDeadline         = "deadline_passed"
	codeDiskLow          = "disk_low"
	codeRateLimited      = "rate_limited"
	codeRecovery         = "recovery" // rate_limited in the daemon: the one-start-per-poll ramp after a 429 backoff
	codeTypeCap          = "type_cap"
	codeGlobalCap        = "global_cap"
)

// reason is the first blocking reason of a waiting loop. Its words are
// formatted when shown (text), so countdowns follow the clock and the
// schedule of thousands of loops costs no formatting.
type reason struct {
	Code  string
	Type  string      // type_cap: the type
	N, Of int         // caps: running (and starting) of cap
	Until time.Time   // backoff, rate_limited: when it ends
	Other loop.Status // parent_incomplete, orphaned: the parent's status
	Free  float64     // disk_low: GB free
}

// text says r in plain words at now.
func (r reason) text(now time.Time) string {
	switch r.Code {
	case codeNext:
		return "next to start"
	case codePaused:
		return "paused"
	case codeParentIncomplete:
		if r.Other.Terminal() {
			return "parent " + string(r.Other)
		}
		return "waiting for parent (" + statusText(r.Other, true) + ")"
	case codeBackoff:
		return "backoff " + countdown(r.Until.Sub(now))
	case codeDeadline:
		return "deadline passed"
	case codeDiskLow:
		return fmt.Sprintf("disk low (%.1f GB free)", r.Free)
	case codeRateLimited:
		return "rate limited " + countdown(r.Until.Sub(now))
	case codeRecovery:
		return "429 recovery: one start per poll"
	case codeTypeCap:
		return fmt.Sprintf("type cap %s %d/%d", r.Type, r.N, r.Of)
	case codeGlobalCap:
		return fmt.Sprintf("global cap %d/%d", r.N, r.Of)
	}
	return ""
}

// schedule is the local replay of the scheduler at one instant: the waiting
// loops in scheduling order and the first reason of each.
type schedule struct {
	order  []string // pending and paused ids: priority desc, created_at asc, id asc
	reason map[string]reason
}

// capsView is the running count and cap per type and globally, live from
// the model's running loops and the daemon's caps (or the policy's).
type capsView struct {
	types    []string
	running  map[string]int
	cap      map[string]int
	total    int
	maxLoops int
}

// caps returns the usage the last schedule computed, or computes it.
func (m *Model) caps() capsView {
	if m.cv.running != nil {
		return m.cv
	}
	return m.computeCaps()
}

func (m *Model) computeCaps() capsView {
	cv := capsView{running: map[string]int{}, cap: map[string]int{}, maxLoops: m.policy.MaxLoops}
	for _, l := range m.loops {
		if l.Status == loop.Running {
			cv.running[l.Type]++
			cv.total++
		}
	}
	if m.haveStatus && m.status.MaxLoops > 0 {
		cv.maxLoops = m.status.MaxLoops
	}
	if m.haveStatus && len(m.status.Types) > 0 {
		for _, t := range m.status.Types {
			cv.types = append(cv.types, t.Type)
			cv.cap[t.Type] = t.Cap
		}
		return cv
	}
	for _, t := range loop.BuiltinTypes {
		cv.types = append(cv.types, t)
		cv.cap[t] = m.policy.TypeCap[t]
	}
	var extra []string
	for t, c := range m.policy.TypeCap {
		if _, ok := cv.cap[t]; !ok {
			extra = append(extra, t)
			cv.cap[t] = c
		}
	}
	slices.Sort(extra)
	cv.types = append(cv.types, extra...)
	return cv
}

// computeSchedule replays SPEC §4 over the loops the model holds: it orders
// the waiting loops and gives each its first failing gate, in the order the
// scheduler checks them (paused, parent, backoff, deadline, disk, rate
// limit, global cap, type cap). Loops that pass every gate take a slot in
// order, so only as many as the caps allow are "next to start"; the rest
// show the cap that stops them. Gates the dashboard cannot see (a missing
// artifact, a parent record the snapshot does not hold) are left to the why
// pane, which asks the daemon.
func (m *Model) computeSchedule() {
	now := m.now
	type item struct {
		l       *loop.Loop
		prio    int
		created int64
	}
	items := make([]item, 0, len(m.sched.order)+8)
	for _, l := range m.loops {
		if l.Status.Waiting() {
			items = append(items, item{l, m.policy.score(l, now).Priority, l.CreatedAt.UnixNano()})
		}
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := cmp.Compare(b.prio, a.prio); c != 0 {
			return c
		}
		if c := cmp.Compare(a.created, b.created); c != 0 {
			return c
		}
		return strings.Compare(a.l.ID, b.l.ID)
	})
	cv := m.computeCaps()
	m.cv = cv
	rl := m.status.RateLimit
	blocked, recovering := rl.Blocked(now), rl.Recovering(now)
	started, startedType := 0, map[string]int{}
	s := schedule{order: make([]string, len(items)), reason: make(map[string]reason, len(items))}
	for i, it := range items {
		l := it.l
		s.order[i] = l.ID
		r := m.gates(l, blocked)
		if r.Code == "" {
			tc := cv.cap[l.Type]
			switch {
			case recovering && started > 0:
				r = reason{Code: codeRecovery}
			case cv.maxLoops > 0 && cv.total+started >= cv.maxLoops:
				r = reason{Code: codeGlobalCap, N: cv.total + started, Of: cv.maxLoops}
			case tc > 0 && cv.running[l.Type]+startedType[l.Type] >= tc:
				r = reason{Code: codeTypeCap, Type: l.Type, N: cv.running[l.Type] + startedType[l.Type], Of: tc}
			default:
				r = reason{Code: codeNext}
				started++
				startedType[l.Type]++
			}
		}
		s.reason[l.ID] = r
	}
	m.sched = s
}

// gates returns the first failing gate of l that does not depend on slots,
// or the zero reason.
func (m *Model) gates(l *loop.Loop, rateBlocked bool) reason {
	now := m.now
	if l.Status == loop.Paused {
		return reason{Code: codePaused}
	}
	if l.Parent != "" {
		// A parent missing from the model finished long ago (the snapshot
		// holds only recent terminal loops): the daemon checks it.
		if p, ok := m.loops[l.Parent]; ok {
			if p.Status != loop.Complete {
				return reason{Code: codeParentIncomplete, Other: p.Status}
			}
		}
	}
	if l.RunnableAt.After(now) {
		return reason{Code: codeBackoff, Until: l.RunnableAt}
	}
	if !l.Deadline.IsZero() && now.After(l.Deadline) {
		return reason{Code: codeDeadline}
	}
	if m.haveStatus && m.status.DiskLow {
		return reason{Code: codeDiskLow, Free: m.status.DiskFreeGB}
	}
	if rateBlocked {
		return reason{Code: codeRateLimited, Until: m.status.RateLimit.BackoffUntil}
	}
	return reason{}
}

// countdown formats a wait, rounded up to the second: 12s, 2m10s, 1h5m.
func countdown(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	secs := int64((d + time.Second - 1) / time.Second)
	return fmtSecs(secs, true)
}

// elapsed formats a running time, to the second: 45s, 2m10s, 1h5m.
func elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmtSecs(int64(d/time.Second), true)
}

// age formats an age coarsely: 45s, 58m, 1h4m, 3d2h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmtSecs(int64(d/time.Second), false)
}

func fmtSecs(s int64, fine bool) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		if fine && s%60 != 0 {
			return fmt.Sprintf("%dm%ds", s/60, s%60)
		}
		return fmt.Sprintf("%dm", s/60)
	case s < 86400:
		if s/60%60 == 0 {
			return fmt.Sprintf("%dh", s/3600)
		}
		return fmt.Sprintf("%dh%dm", s/3600, s/60%60)
	default:
		if s/3600%24 == 0 {
			return fmt.Sprintf("%dd", s/86400)
		}
		return fmt.Sprintf("%dd%dh", s/86400, s/3600%24)
	}
}
