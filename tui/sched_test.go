package tui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
)

// policyLoops is a workspace under a policy with a tier, a conflict group
// and a quota: a running spec fills tier 1, a running ralph of alice's holds
// repo1 and her quota, two ralphs wait on repo2 (the first starts and holds
// it), and one ralph is free of every policy.
func policyLoops() []loop.Loop {
	mk := func(id, typ, title string, st loop.Status, owner, key string, created time.Duration) loop.Loop {
		return loop.Loop{ID: id, Type: typ, Title: title, Status: st, Owner: owner, ConflictKey: key,
			Iteration: 1, MaxIterations: 10, CreatedAt: testNow.Add(-created), UpdatedAt: testNow.Add(-created)}
	}
	specRun := mk("a-spec-run", loop.Spec, "Running spec", loop.Running, "", "", 10*time.Minute)
	ralphRun := mk("a-ralph-run", loop.Ralph, "Running ralph", loop.Running, "alice", "repo1", 10*time.Minute)
	specRun.StartedAt, ralphRun.StartedAt = testNow.Add(-time.Minute), testNow.Add(-time.Minute)
	return []loop.Loop{
		specRun, ralphRun,
		mk("b-spec-wait", loop.Spec, "Waiting spec", loop.Pending, "", "", 5*time.Minute),
		mk("c-alice", loop.Ralph, "Alice again", loop.Pending, "alice", "", 5*time.Minute),
		mk("d-repo1", loop.Ralph, "Same repo", loop.Pending, "bob", "repo1", 5*time.Minute),
		mk("e-repo2-first", loop.Ralph, "First on repo2", loop.Pending, "bob", "repo2", 4*time.Minute),
		mk("f-repo2-second", loop.Ralph, "Second on repo2", loop.Pending, "bob", "repo2", 3*time.Minute),
		mk("g-free", loop.Ralph, "Free ralph", loop.Pending, "bob", "", 2*time.Minute),
	}
}

func policyWithEverything() scheduler.Policy {
	p := scheduler.DefaultPolicy()
	p.Tier = map[string]int{loop.Spec: 1}
	p.ConflictGroup = map[string]string{loop.Ralph: "git"}
	p.OwnerCap = map[string]int{"alice": 1}
	return p
}

// planOf runs scheduler.Plan on loops the way the daemon would see them
// (every record known, no artifacts, no rate limit) at testNow.
func planOf(loops []loop.Loop, p scheduler.Policy) scheduler.Decision {
	snap := scheduler.Snapshot{Running: map[string]int{}}
	byID := map[string]*loop.Loop{}
	for i := range loops {
		byID[loops[i].ID] = &loops[i]
	}
	for i := range loops {
		l := &loops[i]
		switch {
		case l.Status == loop.Running:
			snap.Running[l.Type]++
			snap.Active = append(snap.Active, l)
		case l.Status.Waiting():
			c := scheduler.Candidate{Loop: l}
			if pl := byID[l.Parent]; pl != nil {
				c.ParentStatus = pl.Status
			}
			snap.Waiting = append(snap.Waiting, c)
		}
	}
	return scheduler.Plan(snap, testNow, p)
}

func policyModel(t *testing.T, loops []loop.Loop, p scheduler.Policy) Model {
	t.Helper()
	fc := newFake()
	st := fixtureStatus()
	st.Types = nil // the configured caps
	fc.snap = api.StreamMsg{Type: api.StreamSnapshot, Loops: loops, Status: &st}
	m := New(Options{Client: fc, Now: func() time.Time { return testNow }, NoColor: true, Policy: p})
	m = update(t, m, tea.WindowSizeMsg{Width: 160, Height: 30})
	m = update(t, m, streamMsg{gen: m.gen, msgs: []api.StreamMsg{fc.snap}, now: testNow})
	return m
}

// TestReasonsFollowPlan: with a tier cap, a conflict group and a quota
// configured, each waiting row says what scheduler.Plan decides: the same
// order, the same first reason, the scheduler's numbers for the caps, and a
// conflict names the loop holding the key.
func TestReasonsFollowPlan(t *testing.T) {
	t.Parallel()
	p := policyWithEverything()
	m := policyModel(t, policyLoops(), p)
	d := planOf(policyLoops(), p)

	var wantOrder, gotOrder []string
	for _, r := range d.Rows {
		wantOrder = append(wantOrder, r.Loop.ID)
		want := codeNext
		if !r.Runnable {
			want = string(r.Reasons[0].Code)
		}
		got := m.reasonOf(r.Loop.ID)
		if got.Code != want {
			t.Errorf("%s: code %q, want %q as Plan says (%v)", r.Loop.ID, got.Code, want, r.Reasons)
		}
		switch scheduler.Code(got.Code) {
		case scheduler.TierCap, scheduler.Quota, scheduler.TypeCap, scheduler.GlobalCap:
			if text := m.reasonText(got); text != r.Reasons[0].Text {
				t.Errorf("%s: %q, want Plan's %q", r.Loop.ID, text, r.Reasons[0].Text)
			}
		}
	}
	for _, r := range m.sched.rows {
		gotOrder = append(gotOrder, r.Loop.ID)
	}
	if diff := cmp.Diff(wantOrder, gotOrder); diff != "" {
		t.Errorf("order mismatch (-Plan +dashboard):\n%s", diff)
	}

	want := map[string]string{
		"b-spec-wait":    "tier 1 cap 1/1",
		"c-alice":        "quota alice 1/1",
		"d-repo1":        `conflict git/repo1: held by "Running ralph" (running)`,
		"e-repo2-first":  "next to start",
		"f-repo2-second": `conflict git/repo2: held by "First on repo2" (starting)`,
		"g-free":         "next to start",
	}
	got := map[string]string{}
	for id := range want {
		got[id] = m.reasonText(m.reasonOf(id))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("NEXT / WHY mismatch (-want +got):\n%s", diff)
	}

	// The flat view shows the same words, in Plan's order.
	m = press(t, m, "t")
	if diff := cmp.Diff(wantOrder, rowIDs(m)); diff != "" {
		t.Errorf("flat rows mismatch (-Plan +dashboard):\n%s", diff)
	}
	if line := lineOf(m.View(), "Waiting spec"); !strings.Contains(line, "no: tier 1 cap 1/1") {
		t.Errorf("flat row of the waiting spec: %q", line)
	}
}

// TestPlanFollowsEvents: when the holder of repo1 finishes, the loop that
// waited on it is next to start; alice's quota frees with it.
func TestPlanFollowsEvents(t *testing.T) {
	t.Parallel()
	m := policyModel(t, policyLoops(), policyWithEverything())
	done := policyLoops()[1]
	done.Status, done.UpdatedAt = loop.Complete, testNow
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamEvent, Loop: &done}}})
	for _, id := range []string{"c-alice", "d-repo1"} {
		if got := m.reasonText(m.reasonOf(id)); got != "next to start" {
			t.Errorf("%s after the holder finished: %q, want next to start", id, got)
		}
	}
}

// TestPlanOnlyWhenDue: clock ticks re-plan only when time alone changes
// the plan (here the end of a backoff), and a running loop's progress does
// not re-plan; countdowns still follow the clock.
func TestPlanOnlyWhenDue(t *testing.T) {
	t.Parallel()
	m := loaded(t, newFake(), 120, 30)
	n := m.sched.count
	if want := testNow.Add(12 * time.Second); !m.sched.next.Equal(want) {
		t.Errorf("next change at %v, want the backoff's end %v", m.sched.next, want)
	}
	m = update(t, m, tickMsg{now: testNow.Add(5 * time.Second)})
	if m.sched.count != n {
		t.Errorf("an idle tick made a plan")
	}
	if line := lineOf(m.View(), "Add index"); !strings.Contains(line, "backoff 7s") {
		t.Errorf("countdown did not follow the clock: %q", line)
	}

	// A running loop's next iteration changes nothing the plan reads.
	l := fixtureLoops()[8] // Rate limiting, running
	l.Iteration, l.UpdatedAt = 2, testNow.Add(6*time.Second)
	m = update(t, m, streamMsg{gen: m.gen, now: testNow.Add(6 * time.Second), msgs: []api.StreamMsg{{Type: api.StreamEvent, Loop: &l}}})
	if m.sched.count != n {
		t.Errorf("a running loop's progress made a plan")
	}

	m = update(t, m, tickMsg{now: testNow.Add(12 * time.Second)})
	if m.sched.count != n+1 {
		t.Errorf("plans = %d after the backoff ended, want %d", m.sched.count, n+1)
	}
	if got := m.reasonText(m.reasonOf(idIndex)); got != "next to start" {
		t.Errorf("Add index after its backoff: %q, want next to start", got)
	}
	// Next: the first waiting loop's age reaching a whole minute.
	if want := testNow.Add(time.Minute); !m.sched.next.Equal(want) {
		t.Errorf("next change at %v, want %v", m.sched.next, want)
	}
}

// TestFairnessApproximate: with fairness on the dashboard plans from the
// zero state with each loop's root plan as its key, as Plan would with
// nothing learned: two plans' ralphs alternate.
func TestFairnessApproximate(t *testing.T) {
	t.Parallel()
	p := scheduler.DefaultPolicy()
	p.Fairness = scheduler.FairnessPolicy{Enabled: true, Alpha: 0.5}
	mk := func(id, parent, typ string, depth int, st loop.Status, created time.Duration) loop.Loop {
		return loop.Loop{ID: id, Parent: parent, Type: typ, Depth: depth, Status: st, Title: id,
			Iteration: 1, MaxIterations: 10, CreatedAt: testNow.Add(-created), UpdatedAt: testNow.Add(-created)}
	}
	loops := []loop.Loop{
		mk("pa", "", loop.Plan, 0, loop.Complete, time.Hour), mk("pa-1", "pa", loop.Phase, 1, loop.Complete, time.Hour),
		mk("pb", "", loop.Plan, 0, loop.Complete, time.Hour),
	}
	for i, id := range []string{"pa-1-1", "pa-1-2", "pa-1-3"} {
		loops = append(loops, mk(id, "pa-1", loop.Ralph, 2, loop.Pending, time.Duration(30-i)*time.Minute))
	}
	for i, id := range []string{"pb-1", "pb-2"} {
		loops = append(loops, mk(id, "pb", loop.Ralph, 1, loop.Pending, time.Duration(3-i)*time.Minute))
	}
	m := policyModel(t, loops, p)
	var got []string
	for _, r := range m.sched.rows {
		got = append(got, r.Loop.ID+"@"+r.Key)
	}
	want := []string{"pa-1-1@pa", "pb-1@pb", "pa-1-2@pa", "pb-2@pb", "pa-1-3@pa"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fair order mismatch (-want +got):\n%s", diff)
	}
	if v := press(t, m, "t").View(); !strings.Contains(v, "(fairness: approximate, w asks the daemon)") {
		t.Errorf("the flat view does not say its order is approximate:\n%s", v)
	}
}

// TestPolicyFollowsDaemon: a status carrying the daemon's policy (after a
// hot reload) changes the priorities shown, without restarting the dashboard.
func TestPolicyFollowsDaemon(t *testing.T) {
	t.Parallel()
	m := loaded(t, newFake(), 120, 30)
	before := lineOf(m.View(), "Create users table")
	st := fixtureStatus()
	pol := scheduler.DefaultPolicy()
	pol.Base[loop.Ralph] = 1000
	st.Policy = &pol
	m = update(t, m, streamMsg{gen: m.gen, now: testNow, msgs: []api.StreamMsg{{Type: api.StreamStatus, Status: &st}}})
	after := lineOf(m.View(), "Create users table")
	if before == after || !regexp.MustCompile(`\b1[0-9]{3}\b`).MatchString(after) {
		t.Errorf("priority did not follow the daemon's policy:\nbefore %q\nafter  %q", before, after)
	}
}

// TestQueueScoresTheTreeTerm: with the tree term on, the dashboard's queue
// puts the task of the tree with less work left first, as the daemon does
// (every unfinished loop of each tree, estimated with the learned
// durations the status carries); with it off, the older tree's tasks.
func TestQueueScoresTheTreeTerm(t *testing.T) {
	t.Parallel()
	mk := func(id, typ, parent string, st loop.Status, created time.Duration) loop.Loop {
		depth := 0
		if parent != "" {
			depth = 1
		}
		return loop.Loop{ID: id, Type: typ, Title: id, Status: st, Parent: parent, Depth: depth,
			Iteration: 1, MaxIterations: 10, CreatedAt: testNow.Add(-created), UpdatedAt: testNow.Add(-created)}
	}
	loops := []loop.Loop{
		mk("big", loop.Plan, "", loop.Complete, 20*time.Minute),
		mk("small", loop.Plan, "", loop.Complete, 19*time.Minute),
		mk("b1", loop.Ralph, "big", loop.Pending, 10*time.Minute),
		mk("b2", loop.Ralph, "big", loop.Pending, 10*time.Minute),
		mk("b3", loop.Ralph, "big", loop.Pending, 10*time.Minute),
		mk("s1", loop.Ralph, "small", loop.Pending, 9*time.Minute),
	}
	first := func(p scheduler.Policy) (string, scheduler.Score) {
		m := policyModel(t, loops, p)
		if len(m.sched.rows) == 0 {
			t.Fatal("no rows")
		}
		return m.sched.rows[0].Loop.ID, m.sched.rows[0].Score
	}
	if id, _ := first(scheduler.DefaultPolicy()); id != "b1" {
		t.Errorf("tree term off: first row %s, want b1 (the older)", id)
	}
	p := scheduler.DefaultPolicy()
	p.Weights.TreeBoostMax, p.Weights.TreeAgeBoostPerMinute, p.Weights.TreeAgeBoostMax = 20, 1, 960
	id, sc := first(p)
	if id != "s1" || sc.TreeBoost != 20 || sc.TreeLeft != 60 || sc.TreeAgeBoost != 19 {
		t.Errorf("tree term on: first row %s %+v, want s1 with tree boost 20 of 60 s left, tree age 19", id, sc)
	}
}
