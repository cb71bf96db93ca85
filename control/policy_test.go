package control_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// policyService returns a Service over a fresh store with the configuration
// parsed from yml (no disk check), and its clock.
func policyService(t *testing.T, yml string) (*control.Service, *time.Time) {
	t.Helper()
	cfg, err := config.Parse([]byte("storage: {disk_quota_min_gb: 0}\n"+yml), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	st, err := store.Open(paths.DB(), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := now
	return control.New(st, paths, func() *config.Config { return cfg }, func() time.Time { return clock }), &clock
}

func TestPolicyFromConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
scheduler:
  fairness: {enabled: true, alpha: 0.5, idle_ttl_secs: 120}
quotas:
  alice: {max_running: 2, max_pending: 9}
  bob: {max_pending: 3}
loops:
  phase: {tier: 3, default_cost: 90}
types:
  deploy: {tier: 2, conflict_group: env}
`), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := control.Policy(cfg)
	if diff := cmp.Diff(map[string]int{loop.Phase: 3, "deploy": 2}, p.Tier); diff != "" {
		t.Errorf("Tier mismatch (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{loop.Ralph: "code", "deploy": "env"}, p.ConflictGroup); diff != "" {
		t.Errorf("ConflictGroup mismatch (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"alice": 2}, p.OwnerCap); diff != "" {
		t.Errorf("OwnerCap mismatch (-want +got)\n%s", diff)
	}
	want := scheduler.FairnessPolicy{Enabled: true, Alpha: 0.5, IdleTTL: 2 * time.Minute,
		DefaultCost: map[string]float64{loop.Plan: 60, loop.Spec: 60, loop.Phase: 90, loop.Ralph: 60, "deploy": 60}}
	if diff := cmp.Diff(want, p.Fairness); diff != "" {
		t.Errorf("Fairness mismatch (-want +got)\n%s", diff)
	}
	// Seed 004's settings come out as before.
	if def := control.Policy(config.Default()); def.Tier != nil || def.OwnerCap != nil || def.Fairness.Enabled {
		t.Errorf("Policy(Default()) turns a policy on: %+v", def)
	}
}

// TestAdmissionLimits: admission.max_pending and quotas.<owner>.max_pending
// refuse new loops with a LimitError carrying the API code, count paused
// loops as waiting, apply to every item of a batch, and never refuse the
// children an artifact spawns.
func TestAdmissionLimits(t *testing.T) {
	t.Parallel()
	svc, _ := policyService(t, `
admission: {max_pending: 3}
quotas:
  alice: {max_pending: 1}
`)
	create := func(owner string) error {
		_, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "t", Owner: owner})
		return err
	}
	code := func(err error) string {
		var le *control.LimitError
		if errors.As(err, &le) {
			return le.Code
		}
		return "no LimitError: " + err.Error()
	}
	if err := create("alice"); err != nil {
		t.Fatal(err)
	}
	err := create("alice")
	if got := code(err); got != api.CodeQuotaExceeded {
		t.Fatalf("second loop of alice: %v, want %s", err, api.CodeQuotaExceeded)
	}
	if want := "quota exceeded: owner alice has 1 loops waiting (quotas.alice.max_pending 1)"; err.Error() != want || !control.IsUsage(err) {
		t.Errorf("error = %q (usage %v), want %q", err, control.IsUsage(err), want)
	}
	if err := create("bob"); err != nil {
		t.Fatalf("bob has no quota: %v", err)
	}
	l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Act(l.ID, api.ActionPause, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	err = create("")
	if got := code(err); got != api.CodeQueueFull {
		t.Fatalf("fourth loop: %v, want %s", err, api.CodeQueueFull)
	}
	if want := "queue full: 3 loops waiting (admission.max_pending 3); retry when some have started"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}

	// A batch: every item refused with the code, nothing created.
	res, err := svc.CreateBatch([]api.CreateRequest{{Type: loop.Ralph, Task: "a"}, {Type: loop.Ralph, Task: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 0 || res.Failed != 2 || res.Results[1].Error == nil || res.Results[1].Error.Code != api.CodeQueueFull {
		t.Errorf("CreateBatch() over the limit = %+v", res)
	}

	// Cancelling one makes room for exactly one.
	if _, err := svc.Act(l.ID, api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	res, err = svc.CreateBatch([]api.CreateRequest{{Type: loop.Ralph, Task: "a"}, {Type: loop.Ralph, Task: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Created != 1 || res.Failed != 1 || res.Results[1].Error.Code != api.CodeQueueFull {
		t.Errorf("CreateBatch() with room for one = %+v", res)
	}

	// Spawned children are internal work: never refused.
	var ids []string
	err = svc.Store.Update(func(tx *store.Tx) error {
		parent := loop.Loop{ID: "phase1", Type: loop.Phase, Status: loop.Complete, Title: "p", Iteration: 1, MaxIterations: 1,
			CreatedAt: now, UpdatedAt: now, Owner: "alice"}
		if err := tx.Create(parent); err != nil {
			return err
		}
		doc := artifact.Doc{Type: loop.Phase, Sections: []artifact.Section{
			{N: 1, Name: "one", Text: "### Task 1: one", ConflictKey: "db"},
			{N: 2, Name: "two", Text: "### Task 2: two"},
		}}
		var err error
		ids, err = svc.SpawnChildren(tx, parent, doc, "phase.md", now)
		return err
	})
	if err != nil || len(ids) != 2 {
		t.Fatalf("SpawnChildren over the limits: %v %v", ids, err)
	}
	child, err := svc.Get(ids[0])
	if err != nil || child.Owner != "alice" || child.ConflictKey != "db" {
		t.Errorf("child = %+v, %v; want owner alice and conflict key db", child, err)
	}
}

// TestSnapshotPolicyInputs: the snapshot carries the running loops, each
// waiting loop's root (the default fairness key) and the fairness state.
func TestSnapshotPolicyInputs(t *testing.T) {
	t.Parallel()
	svc, _ := policyService(t, "scheduler: {fairness: {enabled: true}}\n")
	mk := func(id, typ, parent string, st loop.Status) loop.Loop {
		return loop.Loop{ID: id, Type: typ, Status: st, Parent: parent, Title: id, Iteration: 1, MaxIterations: 3,
			CreatedAt: now, UpdatedAt: now}
	}
	loops := []loop.Loop{
		mk("plan1", loop.Plan, "", loop.Complete),
		mk("spec1", loop.Spec, "plan1", loop.Complete),
		mk("phase1", loop.Phase, "spec1", loop.Complete),
		mk("r1", loop.Ralph, "phase1", loop.Pending),
		mk("r2", loop.Ralph, "phase1", loop.Running),
		mk("spec2", loop.Spec, "plan1", loop.Pending),
		mk("solo", loop.Ralph, "", loop.Pending),
		mk("keyed", loop.Ralph, "phase1", loop.Pending),
	}
	loops[7].FairnessKey = "team"
	loops[4].ConflictKey = "db"
	if _, err := svc.Store.Import(loops); err != nil {
		t.Fatal(err)
	}
	if err := svc.Charge([]scheduler.Charge{{ID: "r2", Type: loop.Ralph, Key: "plan1", Cost: 60}}, now); err != nil {
		t.Fatal(err)
	}
	snap, err := svc.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	roots := map[string]string{}
	for _, c := range snap.Waiting {
		roots[c.Loop.ID] = c.Root
	}
	// keyed names its own fairness key, but the tree term (on by
	// default) needs its tree: its root is read too.
	if diff := cmp.Diff(map[string]string{"r1": "plan1", "spec2": "plan1", "solo": "", "keyed": "plan1"}, roots); diff != "" {
		t.Errorf("roots mismatch (-want +got)\n%s", diff)
	}
	if len(snap.Active) != 1 || snap.Active[0].ID != "r2" || snap.Active[0].ConflictKey != "db" {
		t.Errorf("Active = %v, want r2", snap.Active)
	}
	if u := snap.Fairness.Keys["plan1"]; u.Used != 60 || !u.Seen.Equal(now) {
		t.Errorf("Fairness[plan1] = %+v, want used 60 seen now", u)
	}

	// The plan: both of plan1's loops share a key.
	_, d, err := svc.Plan(now)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, r := range d.Rows {
		keys[r.Loop.ID] = r.Key
	}
	if diff := cmp.Diff(map[string]string{"r1": "plan1", "spec2": "plan1", "solo": "solo", "keyed": "team"}, keys); diff != "" {
		t.Errorf("fairness keys mismatch (-want +got)\n%s", diff)
	}
	view, err := svc.Scheduler(now)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range view.Rows {
		if r.FairnessKey != keys[r.ID] || r.Cost != 60 {
			t.Errorf("debug row %s: key %q cost %v; want %q, 60", r.ID, r.FairnessKey, r.Cost, keys[r.ID])
		}
	}
}

// TestObserveCost: a finished iteration's wall time moves the learned cost
// of its (type, root key), only with fairness on.
func TestObserveCost(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		svc, _ := policyService(t, "scheduler: {fairness: {enabled: "+map[bool]string{true: "true", false: "false"}[on]+", alpha: 0.5}}\n")
		plan := loop.Loop{ID: "plan1", Type: loop.Plan, Status: loop.Complete, Title: "p", Iteration: 1, MaxIterations: 1, CreatedAt: now, UpdatedAt: now}
		r := loop.Loop{ID: "r1", Type: loop.Ralph, Status: loop.Complete, Parent: "plan1", Depth: 1, Title: "r", Iteration: 1, MaxIterations: 1, CreatedAt: now, UpdatedAt: now}
		if _, err := svc.Store.Import([]loop.Loop{plan, r}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Observe(r, 20*time.Second, now); err != nil {
			t.Fatal(err)
		}
		var f scheduler.Fairness
		err := svc.Store.View(func(tx *store.Tx) error {
			key, err := control.KeyOf(tx, r)
			if err != nil || key != "plan1" {
				t.Errorf("KeyOf(r1) = %q, %v; want plan1", key, err)
			}
			_, err = tx.Meta(control.FairnessKey, &f)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		got := f.Keys["plan1"].Cost[loop.Ralph]
		if want := map[bool]float64{true: 40, false: 0}[on]; got != want { // 0.5 × 20 + 0.5 × 60
			t.Errorf("fairness %v: learned cost %v, want %v", on, got, want)
		}
	}
}

// TestWhyPolicyGates: `loopr why` lists the tier, quota and conflict gates
// of a loop that has them, passed or failed, with numbers.
func TestWhyPolicyGates(t *testing.T) {
	t.Parallel()
	svc, _ := policyService(t, "loops: {ralph: {tier: 1}}\nquotas: {alice: {max_running: 1}}\n")
	mk := func(id string, st loop.Status) loop.Loop {
		return loop.Loop{ID: id, Type: loop.Ralph, Status: st, Title: id, Iteration: 1, MaxIterations: 3,
			CreatedAt: now, UpdatedAt: now, Owner: "alice", ConflictKey: "db"}
	}
	if _, err := svc.Store.Import([]loop.Loop{mk("r0", loop.Running), mk("r1", loop.Pending)}); err != nil {
		t.Fatal(err)
	}
	w, err := svc.Why("r1", now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Gate{}
	for _, g := range w.Gates {
		got[g.Code] = g
	}
	for _, want := range []api.Gate{
		{Code: "tier_cap", OK: false, Text: "tier 1 cap 1/1"},
		{Code: "quota", OK: false, Text: "quota alice 1/1"},
		{Code: "conflict", OK: false, Text: "conflict code/db: held by r0 (running)"},
	} {
		if diff := cmp.Diff(want, got[want.Code]); diff != "" {
			t.Errorf("Why() gate %s mismatch (-want +got)\n%s", want.Code, diff)
		}
	}
}
