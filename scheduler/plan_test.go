package scheduler_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

func with(l *loop.Loop, f func(*loop.Loop)) *loop.Loop {
	f(l)
	return l
}

// TestPlanGates checks each gate alone and all of them together: the code,
// the text with its numbers, and the fixed order of the reasons.
func TestPlanGates(t *testing.T) {
	t.Parallel()
	ralph := func() *loop.Loop { return mk("r1", loop.Ralph, 5*time.Minute, 3, 1) }
	blockedRL := ratelimit.State{Hits: 1, BackoffUntil: now.Add(37 * time.Second), RecoveryUntil: now.Add(67 * time.Second)}
	full := map[string]int{loop.Ralph: 50}
	tests := []struct {
		name   string
		snap   scheduler.Snapshot
		policy func(*scheduler.Policy)
		want   []scheduler.Reason // nil: starts
	}{
		{name: "root loop starts",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}}},
		{name: "child of a complete parent starts",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.Complete}}}},
		{name: "parent status is ignored for a root",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph(), ParentStatus: loop.Running, ParentMissing: true}}}},
		{name: "paused",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Status = loop.Paused })}}},
			want: []scheduler.Reason{{scheduler.Paused, "paused"}}},
		{name: "needs a person",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) {
				l.Status = loop.NeedsHuman
				l.Needs = &loop.Needs{Reason: loop.NeedsNoProgress, Detail: "validate `go test` exited 1\nmore lines"}
			})}}},
			want: []scheduler.Reason{{scheduler.NeedsHuman, "needs you (no_progress): validate `go test` exited 1 …"}}},
		{name: "needs a person, no detail",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) {
				l.Status = loop.NeedsHuman
				l.Needs = &loop.Needs{Reason: loop.NeedsStalled}
			})}}},
			want: []scheduler.Reason{{scheduler.NeedsHuman, "needs you (stalled)"}}},
		{name: "orphaned",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "01JPARENT"), ParentMissing: true}}},
			want: []scheduler.Reason{{scheduler.Orphaned, "parent 01JPARENT not found"}}},
		{name: "parent running",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.Running}}},
			want: []scheduler.Reason{{scheduler.ParentIncomplete, "parent incomplete (running)"}}},
		{name: "parent awaiting approval",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.AwaitingApproval}}},
			want: []scheduler.Reason{{scheduler.ParentIncomplete, "parent incomplete (awaiting_approval)"}}},
		{name: "parent status unknown",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p")}}},
			want: []scheduler.Reason{{scheduler.ParentIncomplete, "parent incomplete (status unknown)"}}},
		{name: "artifact missing",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{
				Loop:         child(with(ralph(), func(l *loop.Loop) { l.TriggeredBy = "loops/p/iterations/001/phase.md" }), "p"),
				ParentStatus: loop.Complete, ArtifactMissing: true}}},
			want: []scheduler.Reason{{scheduler.ArtifactMissing, "artifact missing (loops/p/iterations/001/phase.md)"}}},
		{name: "backoff",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Iteration, l.RunnableAt = 2, now.Add(12*time.Second) })}}},
			want: []scheduler.Reason{{scheduler.Backoff, "backoff until 12:00:12 (12s)"}}},
		{name: "backoff rounds the wait up",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Iteration, l.RunnableAt = 2, now.Add(130*time.Second+time.Millisecond) })}}},
			want: []scheduler.Reason{{scheduler.Backoff, "backoff until 12:02:10 (2m11s)"}}},
		{name: "backoff into tomorrow shows the date",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Iteration, l.RunnableAt = 2, now.Add(26*time.Hour) })}}},
			want: []scheduler.Reason{{scheduler.Backoff, "backoff until Jan 26 14:00:00 (1d2h)"}}},
		{name: "a transient retry's wait is a backoff",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) {
				l.StartedAt, l.TransientRetries, l.RunnableAt = now.Add(-time.Minute), 1, now.Add(4*time.Second)
			})}}},
			want: []scheduler.Reason{{scheduler.Backoff, "backoff until 12:00:04 (4s)"}}},
		{name: "a loop made to start later (--in 10m) is scheduled",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.RunnableAt = now.Add(10 * time.Minute) })}}},
			want: []scheduler.Reason{{scheduler.Backoff, "scheduled for 12:10:00 (10m)"}}},
		{name: "runnable_at reached",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.RunnableAt = now })}}}},
		{name: "deadline passed",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Deadline = now.Add(-2 * time.Minute) })}}},
			want: []scheduler.Reason{{scheduler.DeadlinePassed, "deadline passed 11:58:00 (2m ago)"}}},
		{name: "deadline now has passed",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Deadline = now })}}},
			want: []scheduler.Reason{{scheduler.DeadlinePassed, "deadline passed 12:00:00 (0s ago)"}}},
		{name: "deadline ahead",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: with(ralph(), func(l *loop.Loop) { l.Deadline = now.Add(time.Second) })}}}},
		{name: "disk low",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, DiskLow: true},
			want: []scheduler.Reason{{scheduler.DiskLow, "disk low"}}},
		{name: "disk low with the caller's text",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, DiskLow: true, DiskLowText: "disk low: 3.2 GB free, minimum 5 GB"},
			want: []scheduler.Reason{{scheduler.DiskLow, "disk low: 3.2 GB free, minimum 5 GB"}}},
		{name: "untrusted",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, Untrusted: "not trusted"},
			want: []scheduler.Reason{{scheduler.Untrusted, "not trusted"}}},
		{name: "rate limited",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, RateLimit: blockedRL},
			want: []scheduler.Reason{{scheduler.RateLimited, "rate limited for 37s"}}},
		{name: "rate limit over",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}},
				RateLimit: ratelimit.State{BackoffUntil: now.Add(-time.Hour), RecoveryUntil: now.Add(-time.Minute)}}},
		{name: "global cap",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, Running: map[string]int{loop.Phase: 20, loop.Ralph: 30}},
			want: []scheduler.Reason{{scheduler.GlobalCap, "global cap 50/50"}}},
		{name: "global cap over-full",
			snap:   scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, Running: map[string]int{loop.Phase: 20, loop.Ralph: 30}},
			policy: func(p *scheduler.Policy) { p.MaxLoops = 40 },
			want:   []scheduler.Reason{{scheduler.GlobalCap, "global cap 50/40"}}},
		{name: "type cap",
			snap:   scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, Running: full},
			policy: func(p *scheduler.Policy) { p.MaxLoops = 100 },
			want:   []scheduler.Reason{{scheduler.TypeCap, "type cap ralph 50/50"}}},
		{name: "type cap 0 means none",
			snap:   scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: ralph()}}, Running: full},
			policy: func(p *scheduler.Policy) { p.MaxLoops = 100; p.TypeCap[loop.Ralph] = 0 }},
		{name: "user type without base or cap",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: mk("rev", "review", 0, 0, 1)}}, Running: map[string]int{"review": 7}}},
		{name: "user type with a cap",
			snap:   scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: mk("rev", "review", 0, 0, 1)}}, Running: map[string]int{"review": 3}},
			policy: func(p *scheduler.Policy) { p.Base["review"] = 70; p.TypeCap["review"] = 3 },
			want:   []scheduler.Reason{{scheduler.TypeCap, "type cap review 3/3"}}},
		{name: "depends on a running sibling",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.Complete,
				Deps: []scheduler.Dep{{ID: "s1", Status: loop.Running}}}}},
			want: []scheduler.Reason{{scheduler.DependsOn, "waits for s1 (running)"}}},
		{name: "depends on a complete sibling whose loops below are not all done",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.Complete,
				Deps: []scheduler.Dep{scheduler.DepOf("s1", &loop.Loop{ID: "s1", Status: loop.Complete})}}}},
			want: []scheduler.Reason{{scheduler.DependsOn, "waits for s1 (complete, not all loops below it)"}}},
		{name: "dependencies done, cancelled or gone: starts",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.Complete,
				Deps: []scheduler.Dep{
					scheduler.DepOf("s1", &loop.Loop{ID: "s1", Status: loop.Complete, SubtreeDoneAt: now}),
					scheduler.DepOf("s2", &loop.Loop{ID: "s2", Status: loop.Cancelled}),
					scheduler.DepOf("s3", nil),
				}}}}},
		{name: "only the dependencies not met are named, the first three",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "p"), ParentStatus: loop.Complete,
				Deps: []scheduler.Dep{
					{ID: "s1", Status: loop.Pending}, {ID: "s2", Status: loop.Complete, Met: true},
					{ID: "s3", Status: loop.Failed}, {ID: "s4", Status: loop.NeedsHuman}, {ID: "s5", Status: loop.Running},
					{ID: "s6", Status: loop.Paused},
				}}}},
			want: []scheduler.Reason{{scheduler.DependsOn, "waits for s1 (pending), s3 (failed), s4 (needs_human) and 2 more"}}},
		{name: "every gate at once, in order",
			snap: scheduler.Snapshot{
				Waiting: []scheduler.Candidate{{
					Loop: child(with(ralph(), func(l *loop.Loop) {
						l.Status = loop.Paused
						l.TriggeredBy = "loops/p/iterations/002/phase.md"
						l.RunnableAt, l.Iteration = now.Add(time.Minute), 3
						l.Deadline = now.Add(-time.Hour)
					}), "p"),
					ParentStatus: loop.Pending, ArtifactMissing: true,
					Deps: []scheduler.Dep{{ID: "s1", Status: loop.Running}},
				}},
				Running:   full,
				RateLimit: blockedRL,
				DiskLow:   true,
			},
			want: []scheduler.Reason{
				{scheduler.Paused, "paused"},
				{scheduler.ParentIncomplete, "parent incomplete (pending)"},
				{scheduler.ArtifactMissing, "artifact missing (loops/p/iterations/002/phase.md)"},
				{scheduler.DependsOn, "waits for s1 (running)"},
				{scheduler.Backoff, "backoff until 12:01:00 (1m)"},
				{scheduler.DeadlinePassed, "deadline passed 11:00:00 (1h ago)"},
				{scheduler.DiskLow, "disk low"},
				{scheduler.RateLimited, "rate limited for 37s"},
				{scheduler.GlobalCap, "global cap 50/50"},
				{scheduler.TypeCap, "type cap ralph 50/50"},
			}},
		{name: "orphaned comes before artifact missing",
			snap: scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: child(ralph(), "gone"), ParentMissing: true, ArtifactMissing: true}}},
			want: []scheduler.Reason{{scheduler.Orphaned, "parent gone not found"}, {scheduler.ArtifactMissing, "artifact missing"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := scheduler.DefaultPolicy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			d := scheduler.Plan(tt.snap, now, p)
			if len(d.Rows) != 1 {
				t.Fatalf("Plan() returned %d rows, want 1", len(d.Rows))
			}
			row := d.Rows[0]
			if diff := cmp.Diff(tt.want, row.Reasons); diff != "" {
				t.Errorf("Plan() reasons mismatch (-want +got)\n%s", diff)
			}
			if row.Runnable != (tt.want == nil) {
				t.Errorf("Plan() Runnable = %v, want %v", row.Runnable, tt.want == nil)
			}
			wantStart := []string{}
			if tt.want == nil {
				wantStart = []string{row.Loop.ID}
			}
			if diff := cmp.Diff(wantStart, d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() Start mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

// TestPlanAdmission checks how free slots are handed out: in scheduling
// order, counting running and already admitted loops, without head-of-line
// blocking, one at a time during rate-limit recovery.
func TestPlanAdmission(t *testing.T) {
	t.Parallel()
	// Priorities: ph1 136, ph2 135, r1 131, r2 130, pl1 90, pl2 89, pl3 88.
	loops := func() []*loop.Loop {
		return []*loop.Loop{
			mk("ph1", loop.Phase, 36*time.Minute, 2, 1),
			mk("ph2", loop.Phase, 35*time.Minute, 2, 1),
			mk("r1", loop.Ralph, 1*time.Minute, 3, 1),
			mk("r2", loop.Ralph, 0, 3, 1),
			mk("pl1", loop.Plan, 50*time.Minute, 0, 1),
			mk("pl2", loop.Plan, 49*time.Minute, 0, 1),
			mk("pl3", loop.Plan, 48*time.Minute, 0, 1),
		}
	}
	recovering := ratelimit.State{Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(29 * time.Second)}
	type codes map[string][]scheduler.Code
	tests := []struct {
		name      string
		running   map[string]int
		rate      ratelimit.State
		policy    func(*scheduler.Policy)
		wantStart []string
		wantCodes codes // reason codes of the rows that do not start
		wantCount [4]int
	}{
		{
			name:      "room for everyone, but plans capped at 2",
			wantStart: []string{"ph1", "ph2", "r1", "r2", "pl1", "pl2"},
			wantCodes: codes{"pl3": {scheduler.TypeCap}},
			wantCount: [4]int{7, 7, 0, 50},
		},
		{
			name:      "global cap counts running and admitted loops",
			running:   map[string]int{loop.Ralph: 46},
			wantStart: []string{"ph1", "ph2", "r1", "r2"},
			wantCodes: codes{"pl1": {scheduler.GlobalCap}, "pl2": {scheduler.GlobalCap}, "pl3": {scheduler.GlobalCap}},
			wantCount: [4]int{7, 7, 46, 4},
		},
		{
			name:      "a full type cap does not block lower loops of other types",
			running:   map[string]int{loop.Phase: 20},
			wantStart: []string{"r1", "r2", "pl1", "pl2"},
			wantCodes: codes{"ph1": {scheduler.TypeCap}, "ph2": {scheduler.TypeCap}, "pl3": {scheduler.TypeCap}},
			wantCount: [4]int{7, 7, 20, 30},
		},
		{
			name:      "type cap counts running loops of the type",
			running:   map[string]int{loop.Phase: 19, loop.Plan: 1},
			wantStart: []string{"ph1", "r1", "r2", "pl1"},
			wantCodes: codes{"ph2": {scheduler.TypeCap}, "pl2": {scheduler.TypeCap}, "pl3": {scheduler.TypeCap}},
			wantCount: [4]int{7, 7, 20, 30},
		},
		{
			name:      "global and type cap together",
			running:   map[string]int{loop.Phase: 20, loop.Ralph: 28},
			wantStart: []string{"r1", "r2"},
			wantCodes: codes{
				"ph1": {scheduler.TypeCap}, "ph2": {scheduler.TypeCap},
				"pl1": {scheduler.GlobalCap}, "pl2": {scheduler.GlobalCap}, "pl3": {scheduler.GlobalCap},
			},
			wantCount: [4]int{7, 7, 48, 2},
		},
		{
			name:      "no slots",
			running:   map[string]int{loop.Ralph: 50},
			policy:    func(p *scheduler.Policy) { p.MaxLoops = 50 },
			wantStart: nil,
			wantCodes: codes{
				"ph1": {scheduler.GlobalCap}, "ph2": {scheduler.GlobalCap},
				"r1": {scheduler.GlobalCap, scheduler.TypeCap}, "r2": {scheduler.GlobalCap, scheduler.TypeCap},
				"pl1": {scheduler.GlobalCap}, "pl2": {scheduler.GlobalCap}, "pl3": {scheduler.GlobalCap},
			},
			wantCount: [4]int{7, 7, 50, 0},
		},
		{
			name:      "rate-limit recovery starts one loop per plan",
			rate:      recovering,
			wantStart: []string{"ph1"},
			wantCodes: codes{
				"ph2": {scheduler.RateLimited}, "r1": {scheduler.RateLimited}, "r2": {scheduler.RateLimited},
				"pl1": {scheduler.RateLimited}, "pl2": {scheduler.RateLimited}, "pl3": {scheduler.RateLimited},
			},
			wantCount: [4]int{7, 7, 0, 50},
		},
		{
			name:      "rate-limit recovery skips a capped type",
			rate:      recovering,
			running:   map[string]int{loop.Phase: 20},
			wantStart: []string{"r1"},
			wantCodes: codes{
				"ph1": {scheduler.TypeCap}, "ph2": {scheduler.TypeCap}, "r2": {scheduler.RateLimited},
				"pl1": {scheduler.RateLimited}, "pl2": {scheduler.RateLimited}, "pl3": {scheduler.RateLimited},
			},
			wantCount: [4]int{7, 7, 20, 30},
		},
		{
			name:      "max loops 0 starts nothing",
			policy:    func(p *scheduler.Policy) { p.MaxLoops = 0 },
			wantStart: nil,
			wantCodes: codes{
				"ph1": {scheduler.GlobalCap}, "ph2": {scheduler.GlobalCap}, "r1": {scheduler.GlobalCap}, "r2": {scheduler.GlobalCap},
				"pl1": {scheduler.GlobalCap}, "pl2": {scheduler.GlobalCap}, "pl3": {scheduler.GlobalCap},
			},
			wantCount: [4]int{7, 7, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := scheduler.DefaultPolicy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			d := scheduler.Plan(scheduler.Snapshot{Waiting: ready(loops()...), Running: tt.running, RateLimit: tt.rate}, now, p)
			if diff := cmp.Diff(tt.wantStart, d.Start, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() Start mismatch (-want +got)\n%s", diff)
			}
			got := codes{}
			for _, r := range d.Rows {
				for _, re := range r.Reasons {
					got[r.Loop.ID] = append(got[r.Loop.ID], re.Code)
				}
			}
			if diff := cmp.Diff(tt.wantCodes, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() reason codes mismatch (-want +got)\n%s", diff)
			}
			gotCount := [4]int{d.Waiting, d.Eligible, d.Running, d.Slots}
			if gotCount != tt.wantCount {
				t.Errorf("Plan() Waiting, Eligible, Running, Slots = %v, want %v", gotCount, tt.wantCount)
			}
		})
	}
}

func TestPlanCapTexts(t *testing.T) {
	t.Parallel()
	p := scheduler.DefaultPolicy()
	p.MaxLoops = 4
	d := scheduler.Plan(scheduler.Snapshot{
		Waiting: ready(
			mk("pl1", loop.Plan, 3*time.Minute, 0, 1),
			mk("pl2", loop.Plan, 2*time.Minute, 0, 1),
			mk("pl3", loop.Plan, 1*time.Minute, 0, 1),
			mk("sp1", loop.Spec, 0, 0, 1),
		),
		Running: map[string]int{loop.Ralph: 2},
	}, now, p)
	want := map[string][]scheduler.Reason{
		"sp1": nil,
		"pl1": nil,
		"pl2": {{scheduler.GlobalCap, "global cap 4/4"}},
		// The plan cap (2) counts running and admitted plans: 1, so only the global cap fails.
		"pl3": {{scheduler.GlobalCap, "global cap 4/4"}},
	}
	got := map[string][]scheduler.Reason{}
	for _, r := range d.Rows {
		got[r.Loop.ID] = r.Reasons
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Plan() mismatch (-want +got)\n%s", diff)
	}
}

func TestPlanSkipsNonWaiting(t *testing.T) {
	t.Parallel()
	running := mk("run", loop.Ralph, 0, 0, 1)
	running.Status = loop.Running
	done := mk("done", loop.Ralph, 0, 0, 1)
	done.Status = loop.Complete
	pending := mk("pend", loop.Ralph, 0, 0, 1)
	d := scheduler.Plan(scheduler.Snapshot{Waiting: []scheduler.Candidate{{Loop: running}, {Loop: nil}, {Loop: done}, {Loop: pending}}},
		now, scheduler.DefaultPolicy())
	if diff := cmp.Diff([]string{"pend"}, ids(d.Rows)); diff != "" {
		t.Errorf("Plan() rows mismatch (-want +got)\n%s", diff)
	}
	if d.Waiting != 1 {
		t.Errorf("Plan() Waiting = %d, want 1", d.Waiting)
	}
}

func TestPlanEmpty(t *testing.T) {
	t.Parallel()
	got := scheduler.Plan(scheduler.Snapshot{Running: map[string]int{loop.Ralph: 3}}, now, scheduler.DefaultPolicy())
	want := scheduler.Decision{Running: 3, Slots: 47}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Plan() mismatch (-want +got)\n%s", diff)
	}
}

// TestPlanReasonsAreIndependent guards the shared reason storage: appending
// to one row's reasons must not change another row's.
func TestPlanReasonsAreIndependent(t *testing.T) {
	t.Parallel()
	d := scheduler.Plan(scheduler.Snapshot{Waiting: ready(mk("a", loop.Ralph, time.Minute, 0, 1), mk("b", loop.Ralph, 0, 0, 1)), DiskLow: true},
		now, scheduler.DefaultPolicy())
	_ = append(d.Rows[0].Reasons, scheduler.Reason{Code: "x", Text: "x"})
	if diff := cmp.Diff([]scheduler.Reason{{scheduler.DiskLow, "disk low"}}, d.Rows[1].Reasons); diff != "" {
		t.Errorf("Plan() second row changed (-want +got)\n%s", diff)
	}
}

func TestRowEligible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		row  scheduler.Row
		want bool
	}{
		{"runnable", scheduler.Row{Runnable: true}, true},
		{"capacity only", scheduler.Row{Reasons: []scheduler.Reason{{scheduler.RateLimited, ""}, {scheduler.GlobalCap, ""}, {scheduler.TypeCap, ""}}}, true},
		{"not ready", scheduler.Row{Reasons: []scheduler.Reason{{scheduler.Backoff, ""}, {scheduler.GlobalCap, ""}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.row.Eligible(); got != tt.want {
				t.Errorf("Eligible() = %v, want %v", got, tt.want)
			}
			if got, want := tt.row.Has(scheduler.GlobalCap), len(tt.row.Reasons) > 1; got != want {
				t.Errorf("Has(global_cap) = %v, want %v", got, want)
			}
		})
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0s"}, {0, "0s"}, {time.Millisecond, "1s"}, {12 * time.Second, "12s"},
		{60 * time.Second, "1m"}, {130 * time.Second, "2m10s"}, {time.Hour + 4*time.Minute + 59*time.Second, "1h5m"},
		{3 * time.Hour, "3h"}, {50 * time.Hour, "2d2h"}, {48 * time.Hour, "2d"},
		{59*time.Minute + 59*time.Second + time.Millisecond, "1h"}, {23*time.Hour + 59*time.Minute + time.Second, "1d"},
		{time.Duration(1<<63 - 1), "106752d"},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			t.Parallel()
			if got := scheduler.Wait(tt.d); got != tt.want {
				t.Errorf("Wait(%v) = %q, want %q", tt.d, got, tt.want)
			}
		})
	}
}

func TestScoreExplain(t *testing.T) {
	t.Parallel()
	p := scheduler.DefaultPolicy()
	got := scheduler.ScoreOf(mk("C", loop.Ralph, time.Minute, 3, 5), now, p).Explain(p.Weights)
	want := "priority 111 = base 100 + age 1 (1 min × 1, max 50) + depth 30 (3 × 10) − retry 20 ((5−1) × 5, max 30)"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Explain() mismatch (-want +got)\n%s", diff)
	}
}

// TestPlanWorkspaceGates: a type with a preflight problem waits whatever
// the room ("not ready", its own text), other types start; NoGit types run
// one loop at a time, counting running ones, and the rest say no_git
// ("no room": eligible).
func TestPlanWorkspaceGates(t *testing.T) {
	t.Parallel()
	loops := []*loop.Loop{
		mk("r1", loop.Ralph, 3*time.Minute, 3, 1),
		mk("r2", loop.Ralph, 2*time.Minute, 3, 1),
		mk("v1", "review", time.Minute, 1, 1),
		mk("ph1", loop.Phase, 0, 2, 1),
		mk("pl1", loop.Plan, 0, 0, 1),
	}
	snap := func(running map[string]int) scheduler.Snapshot {
		s := scheduler.Snapshot{Running: running,
			Preflight: map[string]string{loop.Plan: `agent "claude" is not on PATH`},
			NoGit:     map[string]bool{loop.Ralph: true, "review": true}, NoGitText: "no git here"}
		for _, l := range loops {
			s.Waiting = append(s.Waiting, scheduler.Candidate{Loop: l})
		}
		return s
	}
	type row struct {
		ID      string
		Reasons []scheduler.Reason
	}
	tests := []struct {
		name      string
		running   map[string]int
		wantStart []string
		wantRows  []row
		eligible  int
	}{
		{
			name: "nothing runs: the first ralph starts, the other leaf loops wait", running: map[string]int{},
			wantStart: []string{"r1", "ph1"},
			wantRows: []row{
				{"r1", nil}, {"r2", []scheduler.Reason{{scheduler.NoGit, "no git here"}}},
				{"v1", []scheduler.Reason{{scheduler.NoGit, "no git here"}}}, {"ph1", nil},
				{"pl1", []scheduler.Reason{{scheduler.Preflight, `agent "claude" is not on PATH`}}},
			},
			eligible: 4,
		},
		{
			name: "a review loop runs: no leaf loop starts", running: map[string]int{"review": 1},
			wantStart: []string{"ph1"},
			wantRows: []row{
				{"r1", []scheduler.Reason{{scheduler.NoGit, "no git here"}}}, {"r2", []scheduler.Reason{{scheduler.NoGit, "no git here"}}},
				{"v1", []scheduler.Reason{{scheduler.NoGit, "no git here"}}}, {"ph1", nil},
				{"pl1", []scheduler.Reason{{scheduler.Preflight, `agent "claude" is not on PATH`}}},
			},
			eligible: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := scheduler.Plan(snap(tt.running), now, scheduler.DefaultPolicy())
			var got []row
			for _, r := range d.Rows {
				got = append(got, row{r.Loop.ID, r.Reasons})
			}
			byID := func(a, b row) bool { return a.ID < b.ID }
			if diff := cmp.Diff(tt.wantRows, got, cmpopts.SortSlices(byID), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Plan() rows mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantStart, d.Start); diff != "" {
				t.Errorf("Plan() start mismatch (-want +got):\n%s", diff)
			}
			if d.Eligible != tt.eligible {
				t.Errorf("Eligible = %d, want %d", d.Eligible, tt.eligible)
			}
		})
	}
}
