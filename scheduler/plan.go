package scheduler

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// Candidate is one waiting loop and what the caller knows about its
// surroundings: the scheduler never reads the store, so the facts it needs
// about the parent and the artifact come in here.
type Candidate struct {
	Loop            *loop.Loop
	ParentStatus    loop.Status // the parent's status; "" for a root (a child with "" counts as incomplete)
	ParentMissing   bool        // Loop.Parent names a record that does not exist
	ArtifactMissing bool        // the artifact at Loop.TriggeredBy does not exist
}

// Snapshot is the state Plan decides on.
type Snapshot struct {
	Waiting     []Candidate     // pending and paused loops, in any order
	Running     map[string]int  // running loops by type
	RateLimit   ratelimit.State // the shared 429 backoff
	DiskLow     bool            // free space is below the configured minimum
	DiskLowText string          // e.g. "disk low: 3.2 GB free, minimum 5 GB"; "" → "disk low"
}

// Row is one waiting loop in the decision.
type Row struct {
	Loop     *loop.Loop `json:"loop"`
	Score    Score      `json:"score"`
	Runnable bool       `json:"runnable"`          // starts now
	Reasons  []Reason   `json:"reasons,omitempty"` // every failing gate, in gate order; nil when Runnable
}

// Eligible reports whether the row is held back by capacity gates only
// (rate limit, caps), or not at all.
func (r Row) Eligible() bool {
	for _, re := range r.Reasons {
		if !re.Code.Capacity() {
			return false
		}
	}
	return true
}

// Has reports whether c is among the row's reasons.
func (r Row) Has(c Code) bool {
	return slices.ContainsFunc(r.Reasons, func(re Reason) bool { return re.Code == c })
}

// Decision is the outcome of Plan.
type Decision struct {
	Rows     []Row    `json:"rows"`     // every waiting loop, in scheduling order
	Start    []string `json:"start"`    // ids of the loops to start now, in order
	Waiting  int      `json:"waiting"`  // len(Rows)
	Eligible int      `json:"eligible"` // rows held back by capacity gates only, or starting
	Running  int      `json:"running"`  // loops running before this plan, all types
	Slots    int      `json:"slots"`    // free global slots before this plan: max(0, MaxLoops − Running)
}

// sortKey is what the order looks at, packed so the sort moves small values.
type sortKey struct {
	prio  int
	sec   int64 // created_at
	nsec  int32
	typ   int32 // index into typeTable.types
	idx   int32 // index into Snapshot.Waiting / the scores
	fails gates // the loop's own gates that fail (fits in padding)
	id    string
}

// gates is a set of the gates that depend on the loop alone, found while
// scoring so that the ordered walk reads a loop record only to word a reason.
type gates uint8

const (
	gPaused gates = 1 << iota
	gOrphaned
	gParentIncomplete
	gArtifactMissing
	gBackoff
	gDeadlinePassed
)

func loopGates(c Candidate, now time.Time) gates {
	l := c.Loop
	var g gates
	if l.Status == loop.Paused {
		g |= gPaused
	}
	if l.Parent != "" {
		switch {
		case c.ParentMissing:
			g |= gOrphaned
		case c.ParentStatus != loop.Complete:
			g |= gParentIncomplete
		}
	}
	if c.ArtifactMissing {
		g |= gArtifactMissing
	}
	if l.RunnableAt.After(now) {
		g |= gBackoff
	}
	if !l.Deadline.IsZero() && !l.Deadline.After(now) {
		g |= gDeadlinePassed
	}
	return g
}

// appendLoopReasons appends the reasons for g, in gate order.
func appendLoopReasons(rs []Reason, g gates, c Candidate, now time.Time) []Reason {
	l := c.Loop
	if g&gPaused != 0 {
		rs = append(rs, Reason{Paused, pausedText})
	}
	if g&gOrphaned != 0 {
		rs = append(rs, Reason{Orphaned, orphanedText(l.Parent)})
	}
	if g&gParentIncomplete != 0 {
		rs = append(rs, Reason{ParentIncomplete, parentIncompleteText(c.ParentStatus)})
	}
	if g&gArtifactMissing != 0 {
		rs = append(rs, Reason{ArtifactMissing, artifactMissingText(l.TriggeredBy)})
	}
	if g&gBackoff != 0 {
		rs = append(rs, Reason{Backoff, backoffText(l.RunnableAt, now)})
	}
	if g&gDeadlinePassed != 0 {
		rs = append(rs, Reason{DeadlinePassed, deadlineText(l.Deadline, now)})
	}
	return rs
}

func compareKeys(a, b sortKey) int {
	if c := cmp.Compare(b.prio, a.prio); c != 0 {
		return c // higher priority first
	}
	if c := cmp.Compare(a.sec, b.sec); c != 0 {
		return c // then older first
	}
	if c := cmp.Compare(a.nsec, b.nsec); c != 0 {
		return c
	}
	return strings.Compare(a.id, b.id) // then id: total and stable
}

// typeState is the per-type bookkeeping of one Plan.
type typeState struct {
	name     string
	base     int
	cap      int // 0: none
	running  int
	selected int
	capText  string // cached type cap text for capUsed
	capUsed  int
}

type typeTable struct {
	idx   map[string]int32
	types []typeState
}

func (tt *typeTable) index(t string, p Policy, running map[string]int) int32 {
	if i, ok := tt.idx[t]; ok {
		return i
	}
	i := int32(len(tt.types))
	tt.idx[t] = i
	tt.types = append(tt.types, typeState{
		name: t, base: p.Base[t], cap: max(p.TypeCap[t], 0), running: max(running[t], 0), capUsed: -1,
	})
	return i
}

// Plan decides which waiting loops start now. It is a pure function of its
// arguments: same snapshot, instant and policy, same decision, whatever the
// order of s.Waiting.
//
// The pipeline (see README.md):
//
//  1. Score every waiting loop once (ScoreOf).
//  2. Order: priority desc, created_at asc, id asc.
//  3. Walk the order. For each loop check every gate and keep all that fail:
//     paused, orphaned, parent_incomplete, artifact_missing, backoff,
//     deadline_passed, disk_low, rate_limited, then the capacity gates
//     global_cap and type_cap against the running loops plus those already
//     admitted by this walk. A loop that passes every gate is admitted.
//
// A loop held back by its type's cap does not hold back lower loops of other
// types. During the rate-limit recovery ramp at most one loop is admitted;
// the others get rate_limited with the recovery text.
//
// Candidates with a nil Loop, or whose status is neither pending nor paused,
// are not waiting loops and are left out. Loop ids are assumed unique.
func Plan(s Snapshot, now time.Time, p Policy) Decision {
	tt := typeTable{idx: make(map[string]int32, len(p.Base)+4)}
	running := 0
	for _, n := range s.Running {
		running += max(n, 0)
	}

	// 1. Score once.
	scores := make([]Score, len(s.Waiting))
	keys := make([]sortKey, 0, len(s.Waiting))
	for i, c := range s.Waiting {
		l := c.Loop
		if l == nil || !l.Status.Waiting() {
			continue
		}
		typ := tt.index(l.Type, p, s.Running)
		scores[i] = score(l, now, tt.types[typ].base, p.Weights)
		keys = append(keys, sortKey{
			prio: scores[i].Priority,
			sec:  l.CreatedAt.Unix(), nsec: int32(l.CreatedAt.Nanosecond()),
			typ: typ, idx: int32(i), fails: loopGates(c, now), id: l.ID,
		})
	}

	// 2. Order once.
	slices.SortFunc(keys, compareKeys)

	// 3. Gates and admission, in order.
	d := Decision{
		Rows:    make([]Row, len(keys)),
		Waiting: len(keys),
		Running: running,
		Slots:   max(p.MaxLoops-running, 0),
	}
	d.Start = make([]string, 0, min(d.Slots, len(keys)))

	blocked := s.RateLimit.Blocked(now)
	recovering := s.RateLimit.Recovering(now)
	var rateText string
	if blocked {
		rateText = rateLimitedText(s.RateLimit.Remaining(now))
	}
	diskText := s.DiskLowText
	if diskText == "" {
		diskText = diskLowText
	}

	// All rows' reasons share one backing array; each row gets a capped
	// sub-slice, so appending to one row's reasons never touches another's.
	pool := make([]Reason, 0, len(keys)+len(keys)/2)
	selected := 0
	globalText, globalUsed := "", -1

	for ri, k := range keys {
		ts := &tt.types[k.typ]
		start := len(pool)

		if k.fails != 0 {
			pool = appendLoopReasons(pool, k.fails, s.Waiting[k.idx], now)
		}
		if s.DiskLow {
			pool = append(pool, Reason{DiskLow, diskText})
		}
		notReady := len(pool) - start

		// Capacity: the rate limit, then the caps, counting running loops
		// and the ones this walk has admitted so far.
		switch {
		case blocked:
			pool = append(pool, Reason{RateLimited, rateText})
		case recovering && selected >= 1:
			pool = append(pool, Reason{RateLimited, recoveryText})
		}
		if used := running + selected; used >= p.MaxLoops {
			if used != globalUsed {
				globalText, globalUsed = globalCapText(used, p.MaxLoops), used
			}
			pool = append(pool, Reason{GlobalCap, globalText})
		}
		if used := ts.running + ts.selected; ts.cap > 0 && used >= ts.cap {
			if used != ts.capUsed {
				ts.capText, ts.capUsed = typeCapText(ts.name, used, ts.cap), used
			}
			pool = append(pool, Reason{TypeCap, ts.capText})
		}

		row := &d.Rows[ri]
		row.Loop = s.Waiting[k.idx].Loop
		row.Score = scores[k.idx]
		if notReady == 0 {
			d.Eligible++
		}
		if end := len(pool); end > start {
			row.Reasons = pool[start:end:end]
			continue
		}
		row.Runnable = true
		selected++
		ts.selected++
		d.Start = append(d.Start, k.id)
	}
	return d
}
