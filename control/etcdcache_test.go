package control_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// etcdService returns a Service over its own client of the etcd store at
// endpoint and prefix: one daemon of a cluster.
func etcdService(t *testing.T, endpoint, prefix string) *control.Service {
	t.Helper()
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	st, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{endpoint}, Prefix: prefix}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	cfg.Scheduler.Fairness.Enabled = true
	return control.New(st, paths, func() *config.Config { return cfg }, func() time.Time { return now })
}

// decideUntil decides on svc until ok accepts the loops it would start,
// for at most 5 s (another daemon's commit reaches svc through its store
// follower), and returns them.
func decideUntil(t *testing.T, svc *control.Service, what string, ok func(start []string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for {
		d, err := svc.Decide(now)
		if err != nil {
			t.Fatal(err)
		}
		if ok(d.Start) {
			return d.Start
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: after 5 s the decision still starts %v", what, d.Start)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEtcdDecisionSeesOtherDaemons: two daemons on one etcd store, the
// scheduler A deciding from its index and its in-memory meta. Usage
// recorded by daemon B that spends a tree's budget stops A starting the
// rest of that tree; a rate limit B records stops A starting loops of the
// profile until B records its end; a fairness charge by B reaches A's
// snapshot. Once nothing changes, A decides with etcd stopped: a
// decision reads no etcd.
func TestEtcdDecisionSeesOtherDaemons(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	a := etcdService(t, srv.Endpoint(), "/loopr/dec")
	b := etcdService(t, srv.Endpoint(), "/loopr/dec")

	root := rec("r", "", loop.Complete, time.Minute)
	root.Type, root.Budget, root.Usage = loop.Plan, loop.Budget{USD: 1}, loop.Usage{CostUSD: 0.2}
	ran := rec("r-001", "r", loop.Complete, time.Minute)
	other := rec("o", "", loop.Pending, 0)
	if _, err := b.Import([]loop.Loop{root, ran, rec("r-002", "r", loop.Pending, 0), rec("r-003", "r", loop.Pending, 0), other}); err != nil {
		t.Fatal(err)
	}
	if err := a.EnableIndex(); err != nil {
		t.Fatal(err)
	}
	all := []string{"o", "r-002", "r-003"}
	decideUntil(t, a, "before any usage", func(start []string) bool {
		return slices.Equal(sorted(start), all)
	})

	// B records r-001's iteration: $0.9 spends the tree's $1 budget.
	if err := b.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get("r-001")
		if err != nil {
			return err
		}
		l.Usage = loop.Usage{CostUSD: 0.9}
		if err := tx.Put(l); err != nil {
			return err
		}
		r, err := tx.Get("r")
		if err != nil {
			return err
		}
		_, _, err = b.RecheckBudget(tx, r)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	decideUntil(t, a, "tree r's budget spent on B", func(start []string) bool {
		return slices.Equal(start, []string{"o"})
	})

	// B records a 429 of the default profile: A starts nothing until it ends.
	setLimits := func(m map[string]ratelimit.State) {
		t.Helper()
		if err := b.Store.Update(func(tx *store.Tx) error { return control.SaveLimits(tx, m) }); err != nil {
			t.Fatal(err)
		}
	}
	setLimits(map[string]ratelimit.State{config.DefaultProfile: {Hits: 1, BackoffUntil: now.Add(time.Hour), LastHit: now, Since: now}})
	decideUntil(t, a, "a rate limit recorded on B", func(start []string) bool { return len(start) == 0 })
	setLimits(map[string]ratelimit.State{config.DefaultProfile: {LastSuccess: now}})
	decideUntil(t, a, "the rate limit ended on B", func(start []string) bool {
		return slices.Equal(start, []string{"o"})
	})

	// B charges a fairness key: A's snapshot has it.
	if err := b.Charge([]scheduler.Charge{{ID: "o", Type: loop.Ralph, Key: "team-b", Cost: 30}}, now); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testslack.Scale(5 * time.Second))
	for {
		snap, err := a.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if u, ok := snap.Fairness.Keys["team-b"]; ok && u.Used >= 30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fairness charged on B: A's snapshot still has %+v", snap.Fairness.Keys)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Nothing changes any more: the decision is made from memory.
	srv.Stop()
	began := time.Now()
	d, err := a.Decide(now)
	if err != nil {
		t.Fatalf("decision with etcd stopped: %v", err)
	}
	if !slices.Equal(d.Start, []string{"o"}) {
		t.Errorf("decision with etcd stopped starts %v, want [o]", d.Start)
	}
	if took := time.Since(began); took > 500*time.Millisecond {
		t.Errorf("decision with etcd stopped took %s: it waited for etcd", took)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
