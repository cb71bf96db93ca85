package readyset_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/readyset"
	"github.com/loopr-dev/loopr/scheduler"
)

var t0 = time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)

var (
	types   = []string{loop.Plan, loop.Spec, loop.Phase, loop.Ralph, "review"}
	owners  = []string{"", "alice", "bob"}
	ckeys   = []string{"", "repo1", "repo2"}
	fkeys   = []string{"", "", "", "k1", "k2"}
	parts   = []string{"/a/1.md", "/a/2.md", "/a/3.md"}
	ageing  = []int{0, 1, 1, 2, 3} // age boost per minute
	ageCaps = []int{50, 0, 5, 120} // age boost max
)

// model is the test's plain picture of the store: every record by id.
type model struct {
	loops  map[string]loop.Loop
	sorted []string // the ids in order; nil after a change
	ix     *readyset.Index
	r      *rand.Rand
	next   int
}

func (m *model) write(ls ...loop.Loop) {
	var cs []readyset.Change
	m.sorted = nil
	for _, l := range ls {
		m.loops[l.ID] = l
		c := l
		cs = append(cs, readyset.Change{ID: l.ID, Loop: &c})
	}
	m.ix.Apply(cs)
}

func (m *model) del(id string) {
	m.sorted = nil
	delete(m.loops, id)
	m.ix.Apply([]readyset.Change{{ID: id}})
}

func (m *model) ids() []string {
	if m.sorted == nil {
		m.sorted = slices.Sorted(maps.Keys(m.loops))
	}
	return m.sorted
}

func (m *model) pick() (loop.Loop, bool) {
	ids := m.ids()
	if len(ids) == 0 {
		return loop.Loop{}, false
	}
	return m.loops[ids[m.r.IntN(len(ids))]], true
}

// create makes a loop with random scheduling fields: coarse creation times
// (equal instants and priorities happen), sub-second and future ones too.
func (m *model) create(now time.Time) loop.Loop {
	r := m.r
	m.next++
	l := loop.Loop{
		ID: fmt.Sprintf("L%04d", r.IntN(10000)*10+m.next%10) + fmt.Sprint(m.next), Type: types[r.IntN(len(types))],
		Status: loop.Pending, Iteration: 1 + r.IntN(8), MaxIterations: 10, Depth: r.IntN(4),
		CreatedAt: now.Add(-time.Duration(r.IntN(90)) * time.Minute).Add(-time.Duration(r.IntN(4)) * 20 * time.Second),
		Owner:     owners[r.IntN(len(owners))], ConflictKey: ckeys[r.IntN(len(ckeys))], FairnessKey: fkeys[r.IntN(len(fkeys))],
		Title: "t",
	}
	switch r.IntN(8) {
	case 0:
		l.CreatedAt = l.CreatedAt.Add(time.Duration(r.IntN(1e9))) // sub-second
	case 1:
		l.CreatedAt = now.Add(time.Duration(1+r.IntN(120)) * time.Second) // clock skew: in the future
	}
	if r.IntN(3) > 0 {
		if p, ok := m.pick(); ok {
			l.Parent, l.Depth = p.ID, p.Depth+1
		}
	} else if r.IntN(10) == 0 {
		l.Parent = "gone" // an orphan
	}
	if l.Parent != "" && r.IntN(2) == 0 {
		l.TriggeredBy = parts[r.IntN(len(parts))]
	}
	l.Agent = []string{"", "", "codex", "default", "gone"}[r.IntN(5)]
	if r.IntN(10) == 0 { // a loop whose own budget is spent, or nearly
		l.Budget = loop.Budget{Tokens: 1000}
		l.Usage = loop.Usage{OutputTokens: int64(r.IntN(2000))}
	}
	switch r.IntN(6) {
	case 0:
		l.RunnableAt = now.Add(time.Duration(r.IntN(300)) * time.Second)
	case 1:
		l.Deadline = now.Add(time.Duration(r.IntN(600)-60) * time.Second)
	}
	if r.IntN(15) == 0 {
		l.CostHint = float64(1 + r.IntN(50))
	}
	if r.IntN(4) == 0 { // it starts after other loops (or ids long gone)
		for range 1 + r.IntN(2) {
			if d, ok := m.pick(); ok && r.IntN(6) > 0 {
				l.DependsOn = append(l.DependsOn, d.ID)
			} else {
				l.DependsOn = append(l.DependsOn, fmt.Sprintf("gone%d", r.IntN(3)))
			}
		}
	}
	l.UpdatedAt = l.CreatedAt
	return l
}

// step applies one random operation of the kinds the daemon commits.
func (m *model) step(now time.Time) {
	r := m.r
	switch op := r.IntN(20); {
	case op < 6 || len(m.loops) < 5:
		n := 1 + r.IntN(3)
		var ls []loop.Loop
		for range n {
			ls = append(ls, m.create(now))
		}
		m.write(ls...)
	case op < 15: // a transition
		l, _ := m.pick()
		to := loop.Statuses[r.IntN(len(loop.Statuses))]
		n, err := loop.Transition(l, to, now)
		if err != nil {
			return
		}
		if to == loop.NeedsHuman { // the detail reaches the reason text: compared with Plan's
			n.Needs = &loop.Needs{Reason: loop.NeedsReasons[r.IntN(len(loop.NeedsReasons))], Detail: fmt.Sprintf("detail %d", r.IntN(9)), Since: now}
		}
		if l.Status == loop.Running && to == loop.Pending && r.IntN(2) == 0 { // a failed iteration
			n.Iteration++
			n.RunnableAt = now.Add(time.Duration(r.IntN(120)) * time.Second)
		}
		if r.IntN(10) == 0 {
			n.Type = types[r.IntN(len(types))] // records may change in any field
			n.Depth = r.IntN(5)
		}
		if to.Settled() && r.IntN(2) == 0 {
			n.SubtreeDoneAt = now // the last of its subtree
		}
		m.write(n)
	case op < 17: // delete (retention)
		l, _ := m.pick()
		m.del(l.ID)
	case op < 18: // write a record unchanged, or twice in one commit
		l, _ := m.pick()
		l2 := l
		l2.Title = "again"
		m.write(l, l2)
	case op < 19: // a finished loop's subtree is done (its last loop below finished)
		for _, id := range m.ids() {
			if l := m.loops[id]; l.Status.Settled() && l.SubtreeDoneAt.IsZero() {
				l.SubtreeDoneAt = now
				m.write(l)
				break
			}
		}
	default: // a running loop finishes
		for _, id := range m.ids() {
			if l := m.loops[id]; l.Status == loop.Running {
				n, _ := loop.Transition(l, loop.Complete, now)
				n.SubtreeDoneAt = now
				m.write(n)
				break
			}
		}
	}
}

// reference builds Plan's snapshot from the model alone, the way control
// builds it from the store: not from the index under test.
func (m *model) reference(env readyset.Env) scheduler.Snapshot {
	s := scheduler.Snapshot{Running: map[string]int{}, RateLimit: env.RateLimit, DiskLow: env.DiskLow,
		DiskLowText: env.DiskLowText, Untrusted: env.Untrusted, Fairness: env.Fairness,
		Preflight: env.Preflight, NoGit: env.NoGit, NoGitText: env.NoGitText,
		Limits: env.Limits, Spent: env.Spent}
	for _, id := range m.ids() {
		l := m.loops[id]
		switch {
		case l.Status.Waiting():
			c := scheduler.Candidate{Loop: &l}
			if l.Parent != "" {
				if p, ok := m.loops[l.Parent]; ok {
					c.ParentStatus = p.Status
				} else {
					c.ParentMissing = true
				}
				c.Root = m.root(l.Parent)
			}
			c.ArtifactMissing = l.TriggeredBy != "" && !env.ArtifactExists(l.TriggeredBy)
			for _, d := range l.DependsOn {
				var dep *loop.Loop
				if dl, ok := m.loops[d]; ok {
					dep = &dl
				}
				c.Deps = append(c.Deps, scheduler.DepOf(d, dep))
			}
			s.Waiting = append(s.Waiting, c)
		case l.Status == loop.Running:
			s.Running[l.Type]++
			s.Active = append(s.Active, &l)
		}
	}
	if te := env.Tree; te != nil { // every unfinished loop of each tree of a waiting loop
		s.Trees = map[string]scheduler.TreeWork{}
		waiting := map[string]bool{}
		for _, c := range s.Waiting {
			if c.Loop.Parent == "" {
				waiting[c.Loop.ID] = true
			} else {
				waiting[c.Root] = true
			}
		}
		for _, id := range m.ids() {
			l := m.loops[id]
			root := l.ID
			if l.Parent != "" {
				root = m.root(l.Parent)
			}
			if waiting[root] {
				scheduler.AddWork(s.Trees, root, m.loops[root].CreatedAt, &l, te.Durations, te.Fairness, te.Now)
			}
		}
	}
	return s
}

// anyRoot returns the id of some loop without a parent, "" when none.
func (m *model) anyRoot() string {
	for _, id := range m.ids() {
		if m.loops[id].Parent == "" {
			return id
		}
	}
	return ""
}

func (m *model) root(id string) string {
	for range 1000 {
		p, ok := m.loops[id]
		if !ok || p.Parent == "" {
			return id
		}
		id = p.Parent
	}
	return id
}

// randomPolicy is seed 004's policy half the time; else random caps,
// weights, tiers, conflict groups, quotas and, rarely, fairness.
func randomPolicy(r *rand.Rand) scheduler.Policy {
	p := scheduler.DefaultPolicy()
	p.Weights.AgeBoostPerMinute = ageing[r.IntN(len(ageing))]
	p.Weights.AgeBoostMax = ageCaps[r.IntN(len(ageCaps))]
	if r.IntN(2) == 0 { // the tree term
		p.Weights.TreeBoostMax = []int{0, 40, 100}[r.IntN(3)]
		p.Weights.TreeAgeBoostPerMinute = r.IntN(3)
		p.Weights.TreeAgeBoostMax = []int{0, 30, 120}[r.IntN(3)]
	}
	if r.IntN(2) == 0 {
		return p
	}
	p.MaxLoops = r.IntN(15)
	for _, t := range types {
		p.TypeCap[t] = r.IntN(6)
		p.Base[t] = 20 * r.IntN(6)
	}
	p.Weights.DepthBoostPerLevel = r.IntN(20)
	if r.IntN(3) == 0 {
		p.Tier = map[string]int{}
		for _, t := range types {
			p.Tier[t] = r.IntN(4)
		}
	}
	if r.IntN(2) == 0 {
		p.ConflictGroup = map[string]string{loop.Ralph: "code", "review": "code", loop.Phase: []string{"", "db"}[r.IntN(2)]}
	}
	if r.IntN(3) == 0 {
		p.OwnerCap = map[string]int{"alice": r.IntN(3), "bob": 1 + r.IntN(2)}
	}
	if r.IntN(8) == 0 {
		p.Fairness = scheduler.FairnessPolicy{Enabled: true, Alpha: 0.3, IdleTTL: time.Hour}
	}
	return p
}

type rowView struct {
	ID       string
	Score    scheduler.Score
	Runnable bool
	Reasons  []scheduler.Reason
	Key      string
}

func rows(d scheduler.Decision) []rowView {
	var out []rowView
	for _, r := range d.Rows {
		out = append(out, rowView{r.Loop.ID, r.Score, r.Runnable, r.Reasons, r.Key})
	}
	return out
}

// TestDecideMatchesPlan applies random operation sequences — creates,
// transitions, retries with backoff, completions, deletions, deadlines,
// time passing (over minute boundaries, and sometimes backwards) — and
// checks after each that Decide starts exactly what scheduler.Plan starts
// over a snapshot built from the records alone, under random caps, tiers,
// conflict groups, quotas, weights, rate limits, missing artifacts, a
// low disk, preflight problems and types sharing one directory (no git); that Plan over the index's Snapshot gives the same rows; and
// that Due and Next agree with the records.
func TestDecideMatchesPlan(t *testing.T) {
	t.Parallel()
	fast, total, started, held, trees, treeStarts := 0, 0, 0, 0, 0, 0
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 77))
		p := randomPolicy(r)
		m := &model{loops: map[string]loop.Loop{}, ix: readyset.New(p.Weights), r: r}
		now := t0
		if seed%2 == 1 { // start from a loaded store rather than from empty
			for range 60 {
				l := m.create(now)
				if r.IntN(3) == 0 {
					l.Status = loop.Statuses[r.IntN(len(loop.Statuses))]
				}
				m.loops[l.ID] = l
			}
			m.sorted = nil
			err := m.ix.Load(len(m.loops), 0, func(put func(*loop.Loop)) error {
				for _, id := range m.ids() {
					l := m.loops[id]
					put(&l)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		missing := map[string]bool{}
		for step := range 250 {
			m.step(now)
			switch r.IntN(40) {
			case 0, 1, 2, 3:
				now = now.Add(time.Duration(r.IntN(3)) * time.Minute) // whole minutes: on the floor's edges
			case 4:
				now = now.Add(-time.Duration(r.IntN(90)) * time.Second) // the clock went back
			case 5, 6:
				p = randomPolicy(r) // a hot reload
			default:
				now = now.Add(time.Duration(r.IntN(40_000)) * time.Millisecond)
			}
			if r.IntN(10) == 0 {
				missing = map[string]bool{parts[r.IntN(len(parts))]: true}
			}
			env := readyset.Env{ArtifactExists: func(path string) bool { return !missing[path] }}
			if r.IntN(2) == 0 {
				env.ArtifactsExist = func(paths []string) []bool {
					out := make([]bool, len(paths))
					for i, p := range paths {
						out[i] = !missing[p]
					}
					return out
				}
			}
			switch r.IntN(12) {
			case 0:
				env.RateLimit = ratelimit.State{Hits: 1, BackoffUntil: now.Add(time.Minute), RecoveryUntil: now.Add(2 * time.Minute)}
			case 1:
				env.RateLimit = ratelimit.State{Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(time.Minute)}
			case 2:
				env.DiskLow, env.DiskLowText = true, "disk low: test"
			case 3:
				env.Untrusted = "untrusted: test"
			}
			switch r.IntN(6) { // preflight problems, no git worktrees
			case 0:
				env.Preflight = map[string]string{types[r.IntN(len(types))]: "agent \"x\" is not on PATH"}
			case 1:
				env.NoGit, env.NoGitText = map[string]bool{loop.Ralph: true, "review": r.IntN(2) == 0}, "no git: test"
			case 2:
				env.Preflight = map[string]string{loop.Ralph: "validate needs a go.mod"}
				env.NoGit = map[string]bool{loop.Ralph: true, types[r.IntN(len(types))]: true}
			}
			switch r.IntN(30) { // agent profiles limited, recovering; a tree's budget spent
			case 0:
				env.Limits = map[string]ratelimit.State{"codex": {Hits: 1, BackoffUntil: now.Add(time.Minute)}}
			case 1:
				env.Limits = map[string]ratelimit.State{"default": {Hits: 1, BackoffUntil: now.Add(-time.Second), RecoveryUntil: now.Add(time.Minute)}}
			case 2:
				env.Limits = map[string]ratelimit.State{"default": {Hits: 1, BackoffUntil: now.Add(time.Hour)}}
			case 3:
				env.Spent = map[string]string{m.anyRoot(): "tree budget spent"}
			case 4:
				blocked := ratelimit.State{Hits: 3, BackoffUntil: now.Add(time.Hour)}
				env.Limits = map[string]ratelimit.State{"default": blocked, "codex": blocked}
			}
			p.Agents = scheduler.Agents{Default: "default", ByType: map[string]string{loop.Ralph: "codex"},
				Fallback: map[string][]string{"default": nil, "codex": {"default"}}}
			if p.Weights.TreeOn() || r.IntN(4) == 0 {
				env.Tree = &readyset.TreeEnv{Durations: scheduler.Durations{loop.Ralph: 600, loop.Phase: 1200, loop.Ralph + "/codex": 300},
					Fairness: p.Fairness, Now: now}
				trees++
			}
			if p.Fairness.Enabled {
				env.Fairness = scheduler.Fairness{Keys: map[string]scheduler.KeyUsage{"k1": {Used: 30, Seen: now}}}
			}

			want := scheduler.Plan(m.reference(env), now, p)
			got := m.ix.Decide(now, p, env)
			total++
			if got.Fast {
				fast++
			}
			started += len(want.Start)
			if len(want.Start) > 0 && p.Weights.TreeBoostMax > 0 && got.Fast {
				treeStarts++
			}
			for _, row := range want.Rows {
				if row.Has(scheduler.DependsOn) {
					held++
				}
			}
			if !slices.Equal(want.Start, got.Start) { // cmp.Diff only to word a failure: it is slow
				diff := cmp.Diff(want.Start, got.Start, cmpopts.EquateEmpty())
				t.Fatalf("seed %d step %d (fast %v): Decide().Start mismatch with Plan (-want +got):\n%s", seed, step, got.Fast, diff)
			}
			if !slices.Equal(want.Charges, got.Charges) {
				diff := cmp.Diff(want.Charges, got.Charges, cmpopts.EquateEmpty())
				t.Fatalf("seed %d step %d: Decide().Charges mismatch (-want +got):\n%s", seed, step, diff)
			}
			if got.Waiting != want.Waiting || got.Running != want.Running || got.Slots != want.Slots {
				t.Fatalf("seed %d step %d: Decide() counts %d/%d/%d, Plan %d/%d/%d (waiting/running/slots)",
					seed, step, got.Waiting, got.Running, got.Slots, want.Waiting, want.Running, want.Slots)
			}
			if step%10 == 0 {
				viaIndex := scheduler.Plan(m.ix.Snapshot(env), now, p)
				// Work left is summed in another order: equal but for the last bits.
				if a, b := rows(want), rows(viaIndex); !reflect.DeepEqual(a, b) && !cmp.Equal(a, b, cmpopts.EquateApprox(0, 1e-9)) {
					diff := cmp.Diff(a, b)
					t.Fatalf("seed %d step %d: Plan(Snapshot()) rows mismatch (-records +index):\n%s", seed, step, diff)
				}
			}
			checkDue(t, m, now)
		}
	}
	t.Logf("%d decisions, %d by the fast walk, %d loops started, %d rows held by depends_on, %d with the tree term's input, %d fast ones started loops with a tree boost",
		total, fast, started, held, trees, treeStarts)
	if treeStarts == 0 {
		t.Error("no fast decision started a loop with the tree term on")
	}
	if held == 0 {
		t.Error("no row was held by depends_on: the random loops do not exercise the gate")
	}
	if fast < total*2/3 {
		t.Errorf("only %d of %d decisions took the fast walk", fast, total)
	}
}

func checkDue(t *testing.T, m *model, now time.Time) {
	t.Helper()
	var expired, orphaned []string
	var next time.Time
	for _, id := range m.ids() {
		l := m.loops[id]
		if !l.Status.Waiting() {
			continue
		}
		if !l.Deadline.IsZero() && !l.Deadline.After(now) {
			expired = append(expired, id)
		}
		if _, ok := m.loops[l.Parent]; l.Parent != "" && !ok {
			orphaned = append(orphaned, id)
		}
		if l.RunnableAt.After(now) && (next.IsZero() || l.RunnableAt.Before(next)) {
			next = l.RunnableAt
		}
	}
	ge, go_ := m.ix.Due(now)
	if !slices.Equal(expired, ge) {
		diff := cmp.Diff(expired, ge, cmpopts.EquateEmpty())
		t.Fatalf("Due() expired mismatch (-want +got):\n%s", diff)
	}
	if !slices.Equal(orphaned, go_) {
		diff := cmp.Diff(orphaned, go_, cmpopts.EquateEmpty())
		t.Fatalf("Due() orphaned mismatch (-want +got):\n%s", diff)
	}
	if got := m.ix.Next(now); !got.Equal(next) {
		t.Fatalf("Next() = %v, want %v", got, next)
	}
}

// TestNeedsHumanWaitsWithItsReason: a loop that needs a person is never
// started, however ready it is otherwise; the snapshot's row says why with
// the needs_human code, its reason and detail; answered, it starts.
func TestNeedsHumanWaitsWithItsReason(t *testing.T) {
	t.Parallel()
	ix := readyset.New(scheduler.DefaultPolicy().Weights)
	l := loop.Loop{ID: "a", Type: loop.Ralph, Status: loop.NeedsHuman, Title: "a", Iteration: 2, MaxIterations: 10,
		CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0,
		Needs: &loop.Needs{Reason: loop.NeedsQuestion, Detail: "which port?", Since: t0}}
	ix.Apply([]readyset.Change{{ID: l.ID, Loop: &l}})
	p := scheduler.DefaultPolicy()
	if d := ix.Decide(t0, p, readyset.Env{}); len(d.Start) != 0 || d.Waiting != 1 {
		t.Fatalf("Decide() = start %v waiting %d; want nothing started, one waiting", d.Start, d.Waiting)
	}
	plan := scheduler.Plan(ix.Snapshot(readyset.Env{}), t0, p)
	want := []scheduler.Reason{{Code: scheduler.NeedsHuman, Text: "needs you (question): which port?"}}
	if len(plan.Rows) != 1 {
		t.Fatalf("Plan() rows = %d; want 1", len(plan.Rows))
	}
	if diff := cmp.Diff(want, plan.Rows[0].Reasons); diff != "" {
		t.Errorf("Plan() reasons mismatch (-want +got):\n%s", diff)
	}
	a := l
	a.Status, a.Needs = loop.Pending, nil
	ix.Apply([]readyset.Change{{ID: a.ID, Loop: &a}})
	if d := ix.Decide(t0, p, readyset.Env{}); !slices.Equal(d.Start, []string{"a"}) {
		t.Errorf("Decide() after the answer = %v; want [a]", d.Start)
	}
}
