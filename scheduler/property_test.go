package scheduler_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

var propTypes = []loop.Type{loop.Plan, loop.Spec, loop.Phase, loop.Ralph, "review"}

// randomCase builds a random but plausible snapshot and policy.
func randomCase(r *rand.Rand) (scheduler.Snapshot, scheduler.Policy) {
	p := scheduler.DefaultPolicy()
	if r.IntN(2) == 0 {
		p.MaxLoops = r.IntN(12)
		for _, t := range propTypes {
			p.TypeCap[t] = r.IntN(5) // 0: no cap
			p.Base[t] = r.IntN(120)
		}
		p.Weights.AgeBoostPerMinute = r.IntN(3)
	}
	var s scheduler.Snapshot
	s.Running = map[string]int{}
	for _, t := range propTypes {
		if r.IntN(2) == 0 {
			s.Running[t] = r.IntN(p.TypeCap[t] + 3)
		}
	}
	switch r.IntN(5) {
	case 0: // blocked
		s.RateLimit = ratelimit.State{Hits: 2, BackoffUntil: now.Add(time.Duration(1+r.IntN(120)) * time.Second)}
		s.RateLimit.RecoveryUntil = s.RateLimit.BackoffUntil.Add(30 * time.Second)
	case 1: // recovering
		s.RateLimit = ratelimit.State{Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(20 * time.Second)}
	}
	s.DiskLow = r.IntN(10) == 0

	n := r.IntN(60)
	for i := range n {
		l := &loop.Loop{
			ID:        fmt.Sprintf("L%03d", r.IntN(1000)*1000+i), // unique, not in creation order
			Type:      propTypes[r.IntN(len(propTypes))],
			Status:    loop.Pending,
			Depth:     r.IntN(5),
			Iteration: 1 + r.IntN(10),
			// Coarse creation times so that equal priorities and equal instants occur.
			CreatedAt: now.Add(-time.Duration(r.IntN(8)) * 10 * time.Minute).Add(-time.Duration(r.IntN(3)) * time.Second),
		}
		switch r.IntN(20) {
		case 0:
			l.Status = loop.Paused
		case 1:
			l.Status = loop.Running // not a waiting loop: ignored
		case 2:
			l.CreatedAt = now.Add(time.Minute) // clock skew
		}
		switch r.IntN(6) {
		case 0:
			l.RunnableAt = now.Add(time.Duration(1+r.IntN(600)) * time.Second)
		case 1:
			l.RunnableAt = now.Add(-time.Minute)
		}
		switch r.IntN(10) {
		case 0:
			l.Deadline = now.Add(-time.Duration(r.IntN(600)) * time.Second)
		case 1:
			l.Deadline = now.Add(time.Hour)
		}
		c := scheduler.Candidate{Loop: l, ArtifactMissing: r.IntN(10) == 0}
		if r.IntN(2) == 0 {
			l.Parent = fmt.Sprintf("P%d", r.IntN(10))
			if r.IntN(10) == 0 {
				c.ParentMissing = true
			} else if r.IntN(3) == 0 {
				c.ParentStatus = loop.Statuses[r.IntN(len(loop.Statuses))]
			} else {
				c.ParentStatus = loop.Complete
			}
		}
		s.Waiting = append(s.Waiting, c)
	}
	return s, p
}

// reference is a deliberately naive second implementation of Plan's gates
// and admission: it returns the ids in scheduling order, the ids started and
// the reason codes of every waiting loop.
func reference(s scheduler.Snapshot, now time.Time, p scheduler.Policy) (order, start []string, codes map[string][]scheduler.Code) {
	var ls []scheduler.Candidate
	for _, c := range s.Waiting {
		if c.Loop != nil && (c.Loop.Status == loop.Pending || c.Loop.Status == loop.Paused) {
			ls = append(ls, c)
		}
	}
	prio := func(c scheduler.Candidate) int { return scheduler.ScoreOf(c.Loop, now, p).Priority }
	slices.SortFunc(ls, func(a, b scheduler.Candidate) int {
		if c := cmp.Compare(prio(b), prio(a)); c != 0 {
			return c
		}
		if c := a.Loop.CreatedAt.Compare(b.Loop.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Loop.ID, b.Loop.ID)
	})
	running := 0
	for _, n := range s.Running {
		running += n
	}
	startedOfType := map[string]int{}
	codes = map[string][]scheduler.Code{}
	for _, c := range ls {
		l := c.Loop
		order = append(order, l.ID)
		var cs []scheduler.Code
		add := func(ok bool, code scheduler.Code) {
			if ok {
				cs = append(cs, code)
			}
		}
		add(l.Status == loop.Paused, scheduler.Paused)
		add(l.Parent != "" && c.ParentMissing, scheduler.Orphaned)
		add(l.Parent != "" && !c.ParentMissing && c.ParentStatus != loop.Complete, scheduler.ParentIncomplete)
		add(c.ArtifactMissing, scheduler.ArtifactMissing)
		add(l.RunnableAt.After(now), scheduler.Backoff)
		add(!l.Deadline.IsZero() && !now.Before(l.Deadline), scheduler.DeadlinePassed)
		add(s.DiskLow, scheduler.DiskLow)
		add(s.RateLimit.Blocked(now) || (s.RateLimit.Recovering(now) && len(start) > 0), scheduler.RateLimited)
		add(running+len(start) >= p.MaxLoops, scheduler.GlobalCap)
		add(p.TypeCap[l.Type] > 0 && s.Running[l.Type]+startedOfType[l.Type] >= p.TypeCap[l.Type], scheduler.TypeCap)
		if len(cs) == 0 {
			start = append(start, l.ID)
			startedOfType[l.Type]++
		}
		codes[l.ID] = cs
	}
	return order, start, codes
}

func TestPlanProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(500) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 0x5eed))
			s, p := randomCase(r)
			d := scheduler.Plan(s, now, p)
			checkInvariants(t, s, p, d)

			// Agrees with the naive reference.
			order, start, codes := reference(s, now, p)
			if diff := gocmp.Diff(order, ids(d.Rows), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() order differs from reference (-want +got)\n%s", diff)
			}
			if diff := gocmp.Diff(start, d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() starts differ from reference (-want +got)\n%s", diff)
			}
			got := map[string][]scheduler.Code{}
			for _, row := range d.Rows {
				var cs []scheduler.Code
				for _, re := range row.Reasons {
					cs = append(cs, re.Code)
				}
				got[row.Loop.ID] = cs
			}
			if diff := gocmp.Diff(codes, got); diff != "" {
				t.Errorf("Plan() reason codes differ from reference (-want +got)\n%s", diff)
			}

			// Deterministic: the same input again, and the input shuffled.
			if diff := gocmp.Diff(d, scheduler.Plan(s, now, p)); diff != "" {
				t.Errorf("Plan() twice mismatch (-want +got)\n%s", diff)
			}
			shuffled := s
			shuffled.Waiting = slices.Clone(s.Waiting)
			r.Shuffle(len(shuffled.Waiting), func(i, j int) {
				shuffled.Waiting[i], shuffled.Waiting[j] = shuffled.Waiting[j], shuffled.Waiting[i]
			})
			if diff := gocmp.Diff(d, scheduler.Plan(shuffled, now, p)); diff != "" {
				t.Errorf("Plan() of shuffled input mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

func checkInvariants(t *testing.T, s scheduler.Snapshot, p scheduler.Policy, d scheduler.Decision) {
	t.Helper()
	byID := map[string]scheduler.Candidate{}
	for _, c := range s.Waiting {
		if c.Loop != nil {
			byID[c.Loop.ID] = c
		}
	}
	running := 0
	for _, n := range s.Running {
		running += n
	}

	// Caps are never exceeded, counting running loops.
	started := map[string]int{}
	for _, id := range d.Start {
		started[byID[id].Loop.Type]++
	}
	if len(d.Start) > d.Slots || (len(d.Start) > 0 && running+len(d.Start) > p.MaxLoops) {
		t.Errorf("started %d with %d running: global cap %d exceeded", len(d.Start), running, p.MaxLoops)
	}
	for typ, n := range started {
		if limit := p.TypeCap[typ]; limit > 0 && s.Running[typ]+n > limit {
			t.Errorf("started %d %s with %d running: type cap %d exceeded", n, typ, s.Running[typ], limit)
		}
	}
	if s.RateLimit.Blocked(now) && len(d.Start) > 0 {
		t.Errorf("started %v while rate limited", d.Start)
	}
	if s.RateLimit.Recovering(now) && len(d.Start) > 1 {
		t.Errorf("started %v during rate-limit recovery: want at most one", d.Start)
	}

	// No loop starts that is not ready.
	for _, id := range d.Start {
		c := byID[id]
		l := c.Loop
		switch {
		case l.Status != loop.Pending:
			t.Errorf("started %s with status %s", id, l.Status)
		case l.Parent != "" && (c.ParentMissing || c.ParentStatus != loop.Complete):
			t.Errorf("started %s before its parent completed (%q, missing %v)", id, c.ParentStatus, c.ParentMissing)
		case c.ArtifactMissing:
			t.Errorf("started %s without its artifact", id)
		case l.RunnableAt.After(now):
			t.Errorf("started %s in backoff until %v", id, l.RunnableAt)
		case !l.Deadline.IsZero() && !l.Deadline.After(now):
			t.Errorf("started %s past its deadline %v", id, l.Deadline)
		case s.DiskLow:
			t.Errorf("started %s with the disk low", id)
		}
	}

	// Every row not started has a reason; started rows have none; Start
	// lists the runnable rows in row order; rows are in scheduling order.
	var runnable []string
	eligible := 0
	for i, row := range d.Rows {
		if row.Runnable != (len(row.Reasons) == 0) {
			t.Errorf("row %s: Runnable %v with reasons %v", row.Loop.ID, row.Runnable, row.Reasons)
		}
		for _, re := range row.Reasons {
			if re.Text == "" {
				t.Errorf("row %s: reason %s without text", row.Loop.ID, re.Code)
			}
		}
		if row.Runnable {
			runnable = append(runnable, row.Loop.ID)
		}
		if row.Eligible() {
			eligible++
		}
		if i > 0 {
			a, b := d.Rows[i-1], row
			if a.Score.Priority < b.Score.Priority ||
				a.Score.Priority == b.Score.Priority && a.Loop.CreatedAt.After(b.Loop.CreatedAt) ||
				a.Score.Priority == b.Score.Priority && a.Loop.CreatedAt.Equal(b.Loop.CreatedAt) && a.Loop.ID > b.Loop.ID {
				t.Errorf("rows %s and %s out of order", a.Loop.ID, b.Loop.ID)
			}
		}
	}
	if !slices.Equal(runnable, d.Start) {
		t.Errorf("Start = %v, runnable rows = %v", d.Start, runnable)
	}
	if d.Waiting != len(d.Rows) || d.Eligible != eligible || d.Running != running || d.Slots != max(p.MaxLoops-running, 0) {
		t.Errorf("counts Waiting %d Eligible %d Running %d Slots %d; want %d %d %d %d",
			d.Waiting, d.Eligible, d.Running, d.Slots, len(d.Rows), eligible, running, max(p.MaxLoops-running, 0))
	}
}

// TestRandomCasesCoverEveryGate keeps the generator honest: across the seeds
// the property test uses, loops start and every reason code occurs.
func TestRandomCasesCoverEveryGate(t *testing.T) {
	t.Parallel()
	seen := map[scheduler.Code]int{}
	starts, recoveryStarts := 0, 0
	for seed := range uint64(500) {
		s, p := randomCase(rand.New(rand.NewPCG(seed, 0x5eed)))
		d := scheduler.Plan(s, now, p)
		starts += len(d.Start)
		if s.RateLimit.Recovering(now) {
			recoveryStarts += len(d.Start)
		}
		for _, row := range d.Rows {
			for _, re := range row.Reasons {
				seen[re.Code]++
			}
		}
	}
	for _, c := range scheduler.Codes {
		if seen[c] == 0 {
			t.Errorf("no random case produced reason %s", c)
		}
	}
	if starts == 0 || recoveryStarts == 0 {
		t.Errorf("random cases started %d loops, %d during recovery: want some of each", starts, recoveryStarts)
	}
	t.Logf("starts %d (recovery %d), reasons %v", starts, recoveryStarts, seen)
}
