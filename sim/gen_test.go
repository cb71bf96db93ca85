package sim_test

import (
	"fmt"
	"testing"

	"github.com/loopr-dev/loopr/sim"
)

// generated are the seeds of the six workloads in testdata/gen*.yaml.
var generated = []uint64{1, 2, 3, 4, 5, 6}

// TestGenerated keeps testdata/gen*.yaml what sim.Generate makes of their
// seeds (-update rewrites them), and checks that each parses and runs to
// the end: every tree completes.
func TestGenerated(t *testing.T) {
	t.Parallel()
	for _, seed := range generated {
		name := fmt.Sprintf("gen%d.yaml", seed)
		golden(t, name, sim.Generate(sim.Study, seed))
		r := sim.Run(load(t, "testdata/"+name))
		for _, tm := range r.Metrics.Trees {
			if tm.Complete < 0 || tm.Slowdown < 1 {
				t.Errorf("%s: tree %s: complete %d, slowdown %.2f: want complete, slowdown >= 1", name, tm.Root, tm.Complete, tm.Slowdown)
			}
		}
		if m := r.Metrics; float64(m.Makespan) < m.LowerBound {
			t.Errorf("%s: makespan %d below the lower bound %.0f", name, m.Makespan, m.LowerBound)
		}
	}
}
