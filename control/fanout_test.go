package control_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestSpawnFanout: a task with **Fanout:** 3 and **Agents:** becomes three
// candidates of one group, with the profiles in turn; the task after it
// depends on all three (a loser, cancelled, counts as done; the winner
// once merged); a tree budget with room for two candidates' own budgets
// starts two and says so in their journal.
func TestSpawnFanout(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	a := config.DefaultAgent()
	a.Preset, a.Command = "command", []string{"true"}
	cfg.Agents = map[string]config.Agent{"codex": a}
	r := cfg.Loops[loop.Ralph]
	r.Budget = config.Budget{USD: 1}
	cfg.Loops[loop.Ralph] = r
	svc := serviceWith(t, func() *config.Config { return cfg })
	doc, err := artifact.Parse("phase", []byte("# Phase: P\n## Tasks\n### Task 1: A\n**Fanout:** 3\n**Agents:** default, codex\n### Task 2: B\n**Depends on:** 1\n**Agents:** codex\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		budget loop.Budget
		want   int
		note   string
	}{
		{"no tree budget: all three", loop.Budget{}, 3, ""},
		{"room for two", loop.Budget{USD: 2.5}, 2, "only 2 of the 3 asked started: the tree's budget ($2.50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := rec("root-"+strings.ReplaceAll(tc.name, " ", "-")[:8], "", loop.Running, 0)
			root.Type, root.Budget = loop.Plan, tc.budget
			phase := rec(root.ID+"-ph", root.ID, loop.Running, 0)
			phase.Type = loop.Phase
			if _, err := svc.Import([]loop.Loop{root, phase}); err != nil {
				t.Fatal(err)
			}
			var ids []string
			err := svc.Store.Update(func(tx *store.Tx) (err error) {
				ids, err = svc.SpawnChildren(tx, phase, doc, "", now)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != tc.want+1 {
				t.Fatalf("spawned %d loops, want %d candidates and a task", len(ids), tc.want)
			}
			var agents, group []string
			for i, id := range ids[:tc.want] {
				l, err := svc.Get(id)
				if err != nil {
					t.Fatal(err)
				}
				if f := l.Fanout; f == nil || f.Group != ids[0] || f.Index != i+1 || f.Of != tc.want {
					t.Errorf("candidate %d: fanout %+v, want group %s index %d of %d", i+1, f, ids[0], i+1, tc.want)
				}
				agents = append(agents, l.Agent)
				group = append(group, id)
				var evs []loop.Event
				_ = svc.Store.View(func(tx *store.Tx) (err error) { evs, err = tx.Events(id); return err })
				found := false
				for _, e := range evs {
					found = found || e.Kind == loop.EventFanout && strings.Contains(e.Message, tc.note)
				}
				if !found {
					t.Errorf("candidate %d: no fanout event with %q in %+v", i+1, tc.note, evs)
				}
			}
			if diff := cmp.Diff([]string{"default", "codex", "default"}[:tc.want], agents); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
			next, _ := svc.Get(ids[tc.want])
			if next.Fanout != nil || !cmp.Equal(next.DependsOn, group) || next.Agent != "codex" {
				t.Errorf("task 2: fanout %+v depends on %v on %q, want none and %v on codex (its **Agents:**)", next.Fanout, next.DependsOn, next.Agent, group)
			}
		})
	}
}

// TestCreateFanoutInput: --fanout and --agents name their flag when wrong.
func TestCreateFanoutInput(t *testing.T) {
	t.Parallel()
	svc := newService(t, 0)
	for _, tc := range []struct {
		req  api.CreateRequest
		want string
	}{
		{api.CreateRequest{Type: loop.Ralph, Task: "x", Fanout: 17}, "--fanout: 17: must be 1 to 16"},
		{api.CreateRequest{Type: loop.Plan, Task: "x", Fanout: 2}, "--fanout: only tasks fan out"},
		{api.CreateRequest{Type: loop.Ralph, Task: "x", Fanout: 2, Agents: []string{"nope"}}, `--agents: unknown agent profile "nope"`},
		{api.CreateRequest{Type: loop.Ralph, Task: "x", Fanout: 2, Agents: []string{"default", "default", "default"}}, "--agents: 3 profiles for 2 candidate(s)"},
		{api.CreateRequest{Type: loop.Ralph, Task: "x", Fanout: 1, Agents: []string{"default", "default"}}, "--agents: 2 profiles for 1 candidate(s)"},
	} {
		_, err := svc.Create(tc.req)
		if err == nil || !control.IsUsage(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Create(%+v) = %v, want a usage error with %q", tc.req, err, tc.want)
		}
	}
	l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", Agents: []string{"default"}})
	if err != nil || l.Fanout != nil || l.Agent != "default" {
		t.Errorf("Create(--agents default) = %+v %q, %v: want one loop on the profile asked", l.Fanout, l.Agent, err)
	}
	l, err = svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "x", Fanout: 2})
	if err != nil {
		t.Fatal(err)
	}
	if l.Fanout == nil || l.Fanout.Group != l.ID || l.Fanout.Of != 2 || l.Title != "x [1/2]" {
		t.Errorf("Create() = %+v %q, want candidate 1 of 2 of its own group", l.Fanout, l.Title)
	}
}
