package sim_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func parse(t *testing.T, name, workload string) *sim.Workload {
	t.Helper()
	w, err := sim.Parse([]byte(workload), name, config.Default())
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return w
}

func load(t *testing.T, path string) *sim.Workload {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, path, string(data))
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./sim -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got)\n%s", name, diff)
	}
}

// seedRun runs w with the tree weights at 0 (policy seed): the seeds'
// examples know no tree term, whatever loopr.yml's defaults.
func seedRun(t *testing.T, w *sim.Workload) sim.Result {
	t.Helper()
	r, err := sim.RunWith(w, sim.Options{Policy: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// seed002Admissions is the admission order (second:job) that seed 002's
// Python simulation prints for its five scenarios (run as written in the
// seed; scenario 4's two jobs per repository are clone-repoN and
// repack-repoN here, as ids must be unique).
var seed002Admissions = map[int]string{
	1: "0:r1 0:r2 0:r3 0:r7 3:r99 6:r8 8:r4 8:r5 8:r6 12:r9 16:r10",
	2: "0:repo1 0:repo2 0:repo3 1:a1 1:a2 1:a3 1:a4 1:a5 4:b1 4:b2 4:a6 4:a7 4:a8 6:a9 6:a10 6:repo4",
	3: "0:linux 0:small1 0:small2 0:small3 0:small4 0:small5 0:small6 0:small7 2:small8 5:med1 5:med2",
	4: "0:clone-repo1 0:clone-repo2 3:repack-repo1 3:repack-repo2",
	5: "0:repack1 0:repack2 0:repack3 0:pull1 2:clone1 2:clone2 2:clone3 2:clone4 6:pull2 6:pull3 6:gc1 6:gc2 12:gc3 12:verify1 12:verify2 12:verify3",
}

// TestSeed002Scenarios runs the five scenarios of seed 002 as workloads:
// the admission order is the seed's, and the whole timeline is golden.
func TestSeed002Scenarios(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 5; n++ {
		t.Run(fmt.Sprint("scenario", n), func(t *testing.T) {
			t.Parallel()
			r := seedRun(t, load(t, fmt.Sprintf("testdata/seed002_scenario%d.yaml", n)))
			if diff := cmp.Diff(strings.Fields(seed002Admissions[n]), r.Admissions()); diff != "" {
				t.Errorf("admission order differs from seed 002's simulation (-want +got)\n%s", diff)
			}
			var text, js bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			golden(t, fmt.Sprintf("seed002_scenario%d.golden", n), text.Bytes())
			golden(t, fmt.Sprintf("seed002_scenario%d.json", n), js.Bytes())
		})
	}
}

// twoPlans is a big plan (40 tasks) and a small one (4 tasks) submitted
// together, the big one first; at most 4 loops run at once.
func twoPlans(fair bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "config: {concurrency: {max_loops: 4}, scheduler: {fairness: {enabled: %v}}}\nloops:\n", fair)
	b.WriteString("  - {id: big, type: plan, duration: 1}\n  - {id: small, type: plan, duration: 1}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "  - {id: big-%02d, type: ralph, parent: big, duration: 5}\n", i)
	}
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&b, "  - {id: small-%d, type: ralph, parent: small, duration: 5}\n", i)
	}
	return b.String()
}

// TestFairnessTwoPlans: with fairness on, a small plan started together with
// a big one gets its fair share at once; with it off, the seed-004 order
// (the big plan's tasks are older) starves it until the big plan is done.
func TestFairnessTwoPlans(t *testing.T) {
	t.Parallel()
	firstTasks := func(r sim.Result, n int) (small int, smallDone int) {
		seen := 0
		for _, a := range r.Admissions() {
			id := a[strings.IndexByte(a, ':')+1:]
			if id == "big" || id == "small" {
				continue
			}
			if seen++; seen > n {
				break
			}
			if strings.HasPrefix(id, "small-") {
				small++
			}
		}
		for _, k := range r.Keys {
			if k.Key == "small" && len(k.DoneAt) > 0 {
				smallDone = k.DoneAt[len(k.DoneAt)-1]
			}
		}
		return small, smallDone
	}
	on := seedRun(t, parse(t, "on.yaml", twoPlans(true)))
	off := seedRun(t, parse(t, "off.yaml", twoPlans(false)))
	onSmall, onDone := firstTasks(on, 8)
	offSmall, offDone := firstTasks(off, 8)
	t.Logf("first 8 tasks: small plan got %d with fairness, %d without; its last task done at T=%d with, T=%d without",
		onSmall, offSmall, onDone, offDone)
	// Fair share of 8 admissions between two keys: 4, which is all of the small plan.
	if onSmall < 4 {
		t.Errorf("fairness on: small plan got %d of the first 8 tasks, want >= 4 (its fair share)", onSmall)
	}
	if offSmall != 0 {
		t.Errorf("fairness off: small plan got %d of the first 8 tasks, want 0 (seed 004 order: older first)", offSmall)
	}
	if onDone > 15 || offDone < 50 {
		t.Errorf("small plan done at T=%d (fair) and T=%d (unfair); want <= 15 and >= 50", onDone, offDone)
	}
	// Both plans make progress from the start.
	var firstBig, firstSmall string
	for _, a := range on.Admissions() {
		switch id := a[strings.IndexByte(a, ':')+1:]; {
		case firstBig == "" && strings.HasPrefix(id, "big-"):
			firstBig = a
		case firstSmall == "" && strings.HasPrefix(id, "small-"):
			firstSmall = a
		}
	}
	if firstBig != "1:big-01" || firstSmall != "1:small-1" {
		t.Errorf("first tasks admitted: %s and %s; want both plans at T=1", firstBig, firstSmall)
	}
}

// TestRunPolicies covers the rest of the pipeline under the virtual clock:
// conflicts, tier caps, quotas, deadlines, until 0, and the JSON form.
func TestRunPolicies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		workload string
		want     string // admissions
		events   string // every event, "T:event:id"
	}{
		{
			name: "a conflict waits for its holder without blocking others",
			workload: `
loops:
  - {id: r1, type: ralph, conflict_key: db, duration: 3}
  - {id: r2, type: ralph, conflict_key: db, duration: 1}
  - {id: r3, type: ralph, duration: 1}
`,
			want: "0:r1 0:r3 3:r2",
		},
		{
			name: "a tier caps its loops and orders first",
			workload: `
types: {fg: {tier: 2}, bg: {base: 500}}
loops:
  - {id: b1, type: bg, duration: 2}
  - {id: f1, type: fg, duration: 2}
  - {id: f2, type: fg, duration: 2}
  - {id: f3, type: fg, duration: 2}
`,
			want: "0:f1 0:f2 0:b1 2:f3",
		},
		{
			name: "an owner's quota",
			workload: `
config: {quotas: {alice: {max_running: 1}}}
loops:
  - {id: a1, type: ralph, owner: alice, duration: 2}
  - {id: a2, type: ralph, owner: alice, duration: 2}
  - {id: b1, type: ralph, owner: bob, duration: 2}
`,
			want: "0:a1 0:b1 2:a2",
		},
		{
			name: "a deadline expires a loop still waiting; until 0 runs to the end",
			workload: `
config: {concurrency: {max_loops: 1}}
loops:
  - {id: a, type: ralph, duration: 5}
  - {id: b, type: ralph, duration: 1, deadline: 3}
  - {id: c, type: ralph, duration: 1, at: 2}
`,
			want:   "0:a 5:c",
			events: "0:arrive:a 0:arrive:b 0:admit:a 2:arrive:c 3:expire:b 5:done:a 5:admit:c 6:done:c",
		},
		{
			name: "a spec's phases run in order: each after the one before it and its tasks",
			workload: `
loops:
  - {id: s, type: spec, duration: 1}
  - {id: p1, type: phase, parent: s, duration: 1}
  - {id: p2, type: phase, parent: s, duration: 1}
  - {id: p3, type: phase, parent: s, duration: 1}
  - {id: t1, type: ralph, parent: p1, duration: 4}
  - {id: t2, type: ralph, parent: p2, duration: 2}
  - {id: t3, type: ralph, parent: p3, duration: 1}
`,
			want: "0:s 1:p1 2:t1 6:p2 7:t2 9:p3 10:t3",
		},
		{
			name: "children: parallel, and depends_on decides over it",
			workload: `
config: {loops: {spec: {children: parallel}}}
loops:
  - {id: s, type: spec, duration: 1}
  - {id: p1, type: phase, parent: s, duration: 3}
  - {id: p2, type: phase, parent: s, duration: 1}
  - {id: p3, type: phase, parent: s, duration: 1, depends_on: "p1, p2"}
`,
			want: "0:s 1:p1 1:p2 4:p3",
		},
		{
			name: "depends_on: [] starts at once under a sequential parent; a task waits for two",
			workload: `
loops:
  - {id: s, type: spec, duration: 1}
  - {id: p1, type: phase, parent: s, duration: 2}
  - {id: p2, type: phase, parent: s, duration: 1, depends_on: []}
  - {id: t1, type: ralph, parent: p2, duration: 1}
  - {id: t2, type: ralph, parent: p2, duration: 3}
  - {id: t3, type: ralph, parent: p2, duration: 1, depends_on: [t1, t2]}
`,
			want: "0:s 1:p1 1:p2 2:t1 2:t2 5:t3",
		},
		{
			name: "a child waits for its parent",
			workload: `
loops:
  - {id: p, type: phase, duration: 3}
  - {id: k, type: ralph, parent: p, duration: 1}
`,
			want: "0:p 3:k",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sim.Run(parse(t, "w.yaml", tt.workload))
			if diff := cmp.Diff(strings.Fields(tt.want), r.Admissions()); diff != "" {
				t.Errorf("admissions mismatch (-want +got)\n%s", diff)
			}
			if tt.events != "" {
				var got []string
				for _, e := range r.Events {
					got = append(got, fmt.Sprintf("%d:%s:%s", e.T, e.Event, e.ID))
				}
				if diff := cmp.Diff(strings.Fields(tt.events), got); diff != "" {
					t.Errorf("events mismatch (-want +got)\n%s", diff)
				}
			}
		})
	}

	// The JSON form is stable: t, event, id.
	r := sim.Run(parse(t, "w.yaml", "loops:\n  - {id: a1, type: ralph, duration: 3, at: 1}\n"))
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	want := `[
  {"t":1,"event":"arrive","id":"a1"},
  {"t":1,"event":"admit","id":"a1"},
  {"t":4,"event":"done","id":"a1"}
]
`
	if diff := cmp.Diff(want, js.String()); diff != "" {
		t.Errorf("WriteJSON() mismatch (-want +got)\n%s", diff)
	}
	if r.Until != 4 {
		t.Errorf("until 0 ran to T=%d, want 4 (the last completion)", r.Until)
	}
}

// TestParseErrors: bad workloads are refused with the file, line and key.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, workload, want string
	}{
		{"empty", "", "w.yaml: empty workload: want loops"},
		{"not a mapping", "- a\n", "w.yaml:1: must be a mapping with loops"},
		{"bad yaml", "loops: [\n", "w.yaml:1: invalid YAML: did not find expected node content"},
		{"unknown top key", "loops: []\ncolour: red\n", "w.yaml:2: colour: unknown key (want until, config, types, limits, loops)"},
		{"duplicate top key", "until: 1\nuntil: 2\n", "w.yaml:2: until: duplicate key (first at line 1)"},
		{"no loops", "until: 3\n", "w.yaml:1: loops: missing: a workload lists its loops"},
		{"empty loops", "loops: []\n", "w.yaml:1: loops: empty: a workload needs at least one loop"},
		{"until negative", "until: -1\nloops: [{id: a, type: ralph}]\n", "w.yaml:1: until: must be between 0 and 10000000"},
		{"until text", "until: soon\n", `w.yaml:1: until: must be an integer, got "soon"`},
		{"config error names the line", "config:\n  concurrency:\n    max_loops: 0\nloops: [{id: a, type: ralph}]\n",
			"w.yaml:3: config.concurrency.max_loops: must be > 0"},
		{"config unknown key", "config:\n  scheduler: {fairnes: {}}\n", "w.yaml:2: config.scheduler.fairnes: unknown key; did you mean fairness?"},
		{"types error names the line", "types:\n  git:\n    tier: -2\nloops: [{id: a, type: git}]\n", "w.yaml:3: types.git.tier: must be >= 0"},
		{"types unknown key", "types:\n  git: {priority: 8}\n", "w.yaml:2: types.git.priority: unknown key"},
		{"unknown type", "loops:\n  - {id: a, type: ralph}\n  - {id: b, type: sync-clone}\n",
			`w.yaml:3: loops[1].type: unknown type "sync-clone" (known: plan, spec, phase, ralph; add it under types:)`},
		{"unknown loop key", "loops:\n  - id: a\n    type: ralph\n    colour: red\n",
			"w.yaml:4: loops[0].colour: unknown key (want id, type, key, owner, conflict_key, parent, cost, duration, iterations, approval, agent, at, deadline, depends_on)"},
		{"missing id", "loops:\n  - {type: ralph}\n", "w.yaml:2: loops[0].id: missing"},
		{"bad id", "loops:\n  - {id: ../x, type: ralph}\n", `w.yaml:2: loops[0].id: "../x": use 1-64 letters, digits, '-' and '_'`},
		{"duplicate id", "loops:\n  - {id: a, type: ralph}\n  - {id: a, type: ralph}\n", `w.yaml:3: loops[1].id: duplicate id "a" (first at line 2)`},
		{"missing type", "loops:\n  - {id: a}\n", "w.yaml:2: loops[0].type: missing (one of plan, spec, phase, ralph)"},
		{"zero duration", "loops:\n  - {id: a, type: ralph, duration: 0}\n", "w.yaml:2: loops[0].duration: must be between 1 and 10000000"},
		{"negative cost", "loops:\n  - {id: a, type: ralph, cost: -1}\n", "w.yaml:2: loops[0].cost: must be between 0 and 1e9"},
		{"cost text", "loops:\n  - {id: a, type: ralph, cost: lots}\n", `w.yaml:2: loops[0].cost: must be a number, got "lots"`},
		{"unknown parent", "loops:\n  - {id: a, type: ralph, parent: p}\n", `w.yaml:2: loops[0].parent: no loop "p" before this one`},
		{"dependency listed after", "loops:\n  - {id: a, type: ralph, depends_on: [b]}\n  - {id: b, type: ralph}\n",
			`w.yaml:2: loops[0].depends_on: no loop "b" before this one (a loop depends only on loops listed before it)`},
		{"dependency on itself", "loops:\n  - {id: a, type: ralph, depends_on: a}\n", `w.yaml:2: loops[0].depends_on: no loop "a" before this one (a loop depends only on loops listed before it)`},
		{"dependency not a list", "loops:\n  - {id: a, type: ralph, depends_on: {b: 1}}\n", `w.yaml:2: loops[0].depends_on: must be a list of loop ids, got a mapping`},
		{"child before parent", "loops:\n  - {id: p, type: phase, at: 5}\n  - {id: a, type: ralph, parent: p, at: 1}\n",
			"w.yaml:3: loops[1].at: 1: before its parent p arrives (at 5)"},
		{"iterations not a list", "loops:\n  - {id: a, type: ralph, iterations: 3}\n",
			"w.yaml:2: loops[0].iterations: must be a list like [{duration: 300, pass: false}, {duration: 200, pass: true}] or a distribution like {pass_rate: 0.6, sigma: 0.5, seed: 1}, got \"3\""},
		{"distribution pass rate 0", "loops:\n  - {id: a, type: ralph, iterations: {pass_rate: 0}}\n",
			"w.yaml:2: loops[0].iterations.pass_rate: must be above 0 and at most 1"},
		{"distribution unknown key", "loops:\n  - {id: a, type: ralph, iterations: {mean: 3}}\n",
			"w.yaml:2: loops[0].iterations.mean: unknown key (want pass_rate, sigma, seed)"},
		{"iteration pass text", "loops:\n  - {id: a, type: ralph, iterations: [{duration: 3, pass: yes}]}\n",
			`w.yaml:2: loops[0].iterations[0].pass: must be true or false, got "yes"`},
		{"iteration unknown key", "loops:\n  - {id: a, type: ralph, iterations: [{wall: 3}]}\n",
			"w.yaml:2: loops[0].iterations[0].wall: unknown key (want duration, pass)"},
		{"unknown agent", "loops:\n  - {id: a, type: ralph, agent: gpt}\n", `w.yaml:2: loops[0].agent: unknown agent profile "gpt" (known: default)`},
		{"limit unknown profile", "limits: [{profile: gpt, from: 1, until: 2}]\nloops: [{id: a, type: ralph}]\n",
			`w.yaml:1: limits[0].profile: unknown agent profile "gpt" (known: default)`},
		{"limit ends before it begins", "limits: [{profile: default, from: 5, until: 5}]\nloops: [{id: a, type: ralph}]\n",
			"w.yaml:1: limits[0].until: 5: must be after from (5)"},
		{"limit unknown key", "limits: [{profile: default, to: 5}]\nloops: [{id: a, type: ralph}]\n",
			"w.yaml:1: limits[0].to: unknown key (want profile, from, until)"},
		{"loop not a mapping", "loops:\n  - a1\n", `w.yaml:2: loops[0]: must be a mapping like {id: a1, type: ralph, duration: 3}, got "a1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := sim.Parse([]byte(tt.workload), "dir/w.yaml", config.Default())
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestParseUsesTheCurrentConfig: a workload runs with loopr.yml plus its
// overrides, and the base is left alone.
func TestParseUsesTheCurrentConfig(t *testing.T) {
	t.Parallel()
	base, err := config.Parse([]byte("concurrency: {max_loops: 1}\ntypes: {review: {base: 70}}\n"), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	w, err := sim.Parse([]byte("types: {lint: {tier: 1}}\nloops:\n  - {id: a, type: review, duration: 2}\n  - {id: b, type: review}\n"), "w.yaml", base)
	if err != nil {
		t.Fatal(err)
	}
	if got := sim.Run(w).Admissions(); !cmp.Equal(got, []string{"0:a", "2:b"}) {
		t.Errorf("admissions = %v, want max_loops 1 from loopr.yml", got)
	}
	if base.KnownType("lint") || !w.Config.KnownType("lint") || !w.Config.KnownType("review") {
		t.Error("types: must extend a copy of loopr.yml's types")
	}
}
