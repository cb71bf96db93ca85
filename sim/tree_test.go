package sim_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/sim"
)

// tuned are the tree weights chosen with the sim (docs/design.md, "Tuning
// the tree term"): tree_boost_max, tree_age_boost_per_minute,
// tree_age_boost_max. They are loopr.yml's defaults; until config has
// them, TestTreeWeights sets them itself.
var tuned = [3]int{20, 1, 960}

var tune = flag.Bool("tune", false, "TestTune: print the grid of tree weights on the six workloads and 20 more")

// defaults is the policy of loopr.yml's defaults, with the tuned tree
// weights if config does not set any yet.
func defaults(t *testing.T) func(*scheduler.Policy) {
	if w := control.Policy(config.Default()).Weights; w.TreeBoostMax > 0 || w.TreeAgeBoostMax > 0 {
		return nil
	}
	t.Logf("config has no tree weights yet: using the tuned %v", tuned)
	return weights(tuned)
}

func weights(w [3]int) func(*scheduler.Policy) {
	return func(p *scheduler.Policy) {
		p.Weights.TreeBoostMax, p.Weights.TreeAgeBoostPerMinute, p.Weights.TreeAgeBoostMax = w[0], w[1], w[2]
	}
}

// verdict checks issue 25's three criteria for r against the reference
// policies refs (seed, fifo, cpf, in that order): mean tree completion
// (flow) within 10% of the best, makespan within 8% of the best that does
// not know the future (seed, fifo), no tree's slowdown above 1.1× its
// slowdown under fifo. It returns what fails.
//
// The makespan is not held to cpf's: knowing every iteration's true
// duration, cpf ends 2–16% sooner than seed and fifo on these workloads,
// which no order from estimates matches (docs/design.md).
func verdict(r sim.Result, refs []sim.Result) []string {
	bestMean, bestSpan, fifo := 1e18, 1e18, refs[1]
	for i, x := range refs {
		bestMean = min(bestMean, x.Metrics.MeanFlow)
		if i < 2 {
			bestSpan = min(bestSpan, float64(x.Metrics.Makespan))
		}
	}
	var out []string
	if m := r.Metrics.MeanFlow / bestMean; m > 1.10 {
		out = append(out, fmt.Sprintf("mean tree completion %.0f s is %.3f× the best reference's", r.Metrics.MeanFlow, m))
	}
	if k := float64(r.Metrics.Makespan) / bestSpan; k > 1.08 {
		out = append(out, fmt.Sprintf("makespan %d s is %.3f× the best of seed's and fifo's", r.Metrics.Makespan, k))
	}
	for i, tm := range r.Metrics.Trees {
		if f := fifo.Metrics.Trees[i].Slowdown; tm.Slowdown > 1.1*f {
			out = append(out, fmt.Sprintf("tree %s: slowdown %.2f is %.3f× its fifo slowdown %.2f", tm.Root, tm.Slowdown, tm.Slowdown/f, f))
		}
	}
	return out
}

func references(t *testing.T, w *sim.Workload) []sim.Result {
	t.Helper()
	refs, err := sim.Compare(w, []string{"seed", "fifo", "cpf"})
	if err != nil {
		t.Fatal(err)
	}
	return refs
}

// TestTreeWeights: with loopr.yml's default configuration, on the six
// generated workloads, loopr meets issue 25's three criteria; today's
// policy (the tree weights at 0) does not.
func TestTreeWeights(t *testing.T) {
	t.Parallel()
	adjust := defaults(t)
	seedFails := 0
	for _, seed := range generated {
		name := fmt.Sprintf("testdata/gen%d.yaml", seed)
		w := load(t, name)
		refs := references(t, w)
		r, err := sim.RunWith(w, sim.Options{Adjust: adjust})
		if err != nil {
			t.Fatal(err)
		}
		if fails := verdict(r, refs); len(fails) > 0 {
			t.Errorf("%s: %s", name, strings.Join(fails, "; "))
		}
		if r.Metrics.MeanFlow >= refs[0].Metrics.MeanFlow {
			t.Errorf("%s: mean tree completion %.0f s, seed's %.0f s: want the tree term to finish trees sooner", name, r.Metrics.MeanFlow, refs[0].Metrics.MeanFlow)
		}
		if len(verdict(refs[0], refs)) > 0 {
			seedFails++
		}
	}
	if seedFails < 3 {
		t.Errorf("seed's policy fails the criteria on %d workloads: want at least 3, or the test shows nothing", seedFails)
	}
}

// TestTune prints, with -tune, how a grid of tree weights does on the six
// workloads and on 20 more (seeds 7–26): the runs docs/design.md records.
func TestTune(t *testing.T) {
	if !*tune {
		t.Skip("run with -tune")
	}
	type set struct {
		name  string
		ws    []*sim.Workload
		refs  [][]sim.Result
		seeds []uint64
	}
	sets := []*set{{name: "six"}, {name: "held-out"}}
	for s := uint64(1); s <= 26; s++ {
		st := sets[0]
		if s > 6 {
			st = sets[1]
		}
		w, err := sim.Parse(sim.Generate(sim.Study, s), "gen.yaml", config.Default())
		if err != nil {
			t.Fatal(err)
		}
		st.ws, st.refs = append(st.ws, w), append(st.refs, references(t, w))
	}
	grid := [][3]int{{0, 0, 0}, {100, 0, 0}, {100, 1, 120}, {100, 1, 960}, {0, 1, 960}}
	for _, b := range []int{10, 20, 30, 40, 50} {
		for _, am := range []int{240, 480, 960} {
			grid = append(grid, [3]int{b, 1, am})
		}
	}
	for _, g := range grid {
		line := fmt.Sprintf("%3d/%d/%-4d", g[0], g[1], g[2])
		for _, st := range sets {
			fails, gain := 0, 0.0
			for i, w := range st.ws {
				r, _ := sim.RunWith(w, sim.Options{Adjust: weights(g)})
				if len(verdict(r, st.refs[i])) > 0 {
					fails++
				}
				gain += r.Metrics.MeanFlow / st.refs[i][0].Metrics.MeanFlow
			}
			line += fmt.Sprintf("  %s: fails %2d/%d, mean flow ×%.3f of seed's", st.name, fails, len(st.ws), gain/float64(len(st.ws)))
		}
		fmt.Println(line)
	}
	// BENCHMARKS.md's table: the six with the tuned weights.
	fmt.Println("| workload | policy | makespan (÷ bound) | mean tree completion | p95 | worst slowdown (÷ fifo's, same tree) | utilisation |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, w := range sets[0].ws {
		refs := sets[0].refs[i]
		r, _ := sim.RunWith(w, sim.Options{Adjust: weights(tuned)})
		for _, x := range []sim.Result{refs[0], r, refs[1], refs[2]} {
			name := x.Policy
			if name == "loopr" {
				name = fmt.Sprintf("loopr %d/%d/%d", tuned[0], tuned[1], tuned[2])
			}
			worst, vs := 0.0, 0.0
			for j, tm := range x.Metrics.Trees {
				worst, vs = max(worst, tm.Slowdown), max(vs, tm.Slowdown/refs[1].Metrics.Trees[j].Slowdown)
			}
			m := x.Metrics
			fmt.Printf("| gen%d (%d trees, %d slots) | %s | %.1f h (%.2f×) | %.2f h | %.2f h | %.2f (%.2f×) | %.0f%% |\n", i+1, len(m.Trees), m.Slots, name,
				float64(m.Makespan)/3600, float64(m.Makespan)/m.LowerBound, m.MeanFlow/3600, m.P95Flow/3600, worst, vs, 100*m.Utilisation)
		}
	}
}
