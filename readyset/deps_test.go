package readyset_test

import (
	"slices"
	"testing"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/readyset"
	"github.com/loopr-dev/loopr/scheduler"
)

// TestDependencyReleasesWaitingLoop: a loop that depends on a sibling waits
// while the sibling's subtree is not done, and is ready in the very next
// decision once the commit that marks it done (or cancels it, or deletes
// it) is applied: no other event is needed to look at it again.
func TestDependencyReleasesWaitingLoop(t *testing.T) {
	t.Parallel()
	p := scheduler.DefaultPolicy()
	mk := func(id string, st loop.Status, deps ...string) *loop.Loop {
		return &loop.Loop{ID: id, Type: loop.Phase, Status: st, Parent: "spec", Depth: 1, Iteration: 1, MaxIterations: 5,
			CreatedAt: t0, UpdatedAt: t0, DependsOn: deps}
	}
	spec := &loop.Loop{ID: "spec", Type: loop.Spec, Status: loop.Complete, Iteration: 1, MaxIterations: 5, CreatedAt: t0}
	tests := []struct {
		name    string
		release func(first *loop.Loop) []readyset.Change
	}{
		{"its subtree is done", func(first *loop.Loop) []readyset.Change {
			first.SubtreeDoneAt = t0
			return []readyset.Change{{ID: first.ID, Loop: first}}
		}},
		{"it is cancelled", func(first *loop.Loop) []readyset.Change {
			first.Status = loop.Cancelled
			return []readyset.Change{{ID: first.ID, Loop: first}}
		}},
		{"it is deleted", func(first *loop.Loop) []readyset.Change { return []readyset.Change{{ID: first.ID}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, load := range []bool{false, true} {
				ix := readyset.New(p.Weights)
				// The dependent sorts first: a load meets it before its dependency.
				first, second := mk("b-first", loop.Complete), mk("a-second", loop.Pending, "b-first")
				all := []*loop.Loop{spec, second, first}
				if load {
					if err := ix.Load(len(all), 1, func(put func(*loop.Loop)) error {
						for _, l := range all {
							put(l)
						}
						return nil
					}); err != nil {
						t.Fatal(err)
					}
				} else {
					for _, l := range all {
						ix.Apply([]readyset.Change{{ID: l.ID, Loop: l}})
					}
				}
				if d := ix.Decide(t0, p, readyset.Env{}); len(d.Start) != 0 || d.Ready != 0 {
					t.Fatalf("load %v: Decide() started %v (ready %d) while its dependency's tasks run", load, d.Start, d.Ready)
				}
				row := scheduler.Plan(ix.Snapshot(readyset.Env{}), t0, p).Rows[0]
				if want := (scheduler.Reason{Code: scheduler.DependsOn, Text: "waits for b-first (complete, not all loops below it)"}); !slices.Contains(row.Reasons, want) {
					t.Errorf("load %v: reasons %v, want %v", load, row.Reasons, want)
				}
				ix.Apply(tt.release(first))
				if d := ix.Decide(t0, p, readyset.Env{}); !slices.Equal(d.Start, []string{"a-second"}) {
					t.Errorf("load %v: after the release Decide() started %v, want [a-second]", load, d.Start)
				}
			}
		})
	}
}
