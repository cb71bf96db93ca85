package control_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
)

// TestSpawnChildAdmission: a loop an agent spawns belongs to its parent's
// owner, so that owner's quota refuses it as it refuses `loopr add`; a
// built-in type other than the parent's child type, and a loop deeper
// than MaxSpawnDepth, are refused (no plan below a task, no endless
// agents spawning agents).
func TestSpawnChildAdmission(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Quotas = map[string]config.Quota{"alice": {MaxPending: 2}}
	cfg.UserTypes = map[string]config.TypeSettings{"probe": config.DefaultTypeSettings()}
	svc := serviceWith(t, func() *config.Config { return cfg })
	phase := rec("phase1", "", loop.Running, 0)
	phase.Type, phase.Owner, phase.FairnessKey = loop.Phase, "alice", "team-a"
	waiting := rec("wait1", "", loop.Pending, 0)
	waiting.Owner = "alice"
	chain := []loop.Loop{phase, waiting}
	parent := ""
	for d := 0; d <= control.MaxSpawnDepth; d++ { // probe loops at depths 0 … MaxSpawnDepth
		l := rec(fmt.Sprintf("deep%d", d), parent, loop.Running, 0)
		l.Type, l.Depth = "probe", d
		chain, parent = append(chain, l), l.ID
	}
	deep := chain[len(chain)-1]
	if _, err := svc.Import(chain); err != nil {
		t.Fatal(err)
	}

	child, err := svc.SpawnChild(phase.ID, api.CreateRequest{Type: loop.Ralph, Title: "one"})
	if err != nil {
		t.Fatalf("SpawnChild(ralph below phase) = %v, want ok", err)
	}
	if child.Owner != "alice" || child.FairnessKey != "team-a" || child.Parent != phase.ID {
		t.Errorf("child owner %q fairness %q parent %q, want alice, team-a, %s", child.Owner, child.FairnessKey, child.Parent, phase.ID)
	}
	_, err = svc.SpawnChild(phase.ID, api.CreateRequest{Type: loop.Ralph, Title: "two"})
	if le, ok := errors.AsType[*control.LimitError](err); !ok || le.Code != api.CodeQuotaExceeded {
		t.Errorf("SpawnChild past alice's max_pending = %v, want quota exceeded", err)
	}

	for _, tc := range []struct {
		name, caller, typ, title, want string
	}{
		{"plan below a phase", phase.ID, loop.Plan, "x", "cannot go below phase"},
		{"spec below a phase", phase.ID, loop.Spec, "x", "cannot go below phase"},
		{"past the depth limit", deep.ID, "probe", "x", "no loop deeper"},
		{"a user type below a user type", "deep3", "probe", "x", ""},
		{"a title of a megabyte", "deep3", "probe", strings.Repeat("t", 1<<20), "at most 200"},
		{"a title of two lines", "deep3", "probe", "one\rtwo", "one line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.SpawnChild(tc.caller, api.CreateRequest{Type: tc.typ, Title: tc.title})
			if tc.want == "" {
				if err != nil {
					t.Errorf("SpawnChild(%s) = %v, want ok", tc.typ, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("SpawnChild(%s) = %v, want an error with %q", tc.typ, err, tc.want)
			}
		})
	}
}

// TestSiblingsShowNoPrivateFields: list_siblings shows loops outside the
// caller's subtree, so only what the tool promises (id, type, status,
// title), never a sibling's task, answer, feedback or question.
func TestSiblingsShowNoPrivateFields(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	root := rec("root1", "", loop.Running, 0)
	me := rec("root1-a", root.ID, loop.Running, 0)
	sib := rec("root1-b", root.ID, loop.NeedsHuman, 0)
	sib.Task, sib.Answer, sib.Feedback = "secret task", "secret answer", "secret feedback"
	sib.Comments = []loop.Comment{{Path: "a.go", Line: 1, Text: "secret comment"}}
	if _, err := svc.Import([]loop.Loop{root, me, sib}); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Siblings(me.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != sib.ID || got[0].Title != sib.Title || got[0].Status != sib.Status || got[0].Type != sib.Type {
		t.Fatalf("Siblings = %+v, want %s with its title, type and status", got, sib.ID)
	}
	if g := got[0]; g.Task != "" || g.Answer != "" || g.Feedback != "" || len(g.Comments) != 0 {
		t.Errorf("Siblings shows a sibling's private fields: task %q answer %q feedback %q comments %v", g.Task, g.Answer, g.Feedback, g.Comments)
	}
}
