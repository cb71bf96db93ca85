package control_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// decisionStore builds a store with n pending ralph loops the way a large
// workspace looks — plan → spec → phase → ralph, 10 ralphs per phase, the
// ralphs of one phase in ten blocked by their parent (a failed phase), one
// in twenty in a retry backoff, each naming its phase's artifact (a real
// file) — and 45 running loops of 50 allowed (caps near full).
func decisionStore(b *testing.B, n int, policies bool) (*control.Service, time.Time) {
	return decisionStoreOn(b, n, policies, "")
}

// decisionStoreOn is decisionStore on the bbolt file (etcd == ""), or on
// the etcd store at that endpoint, every phase artifact also kept as the
// store's copy.
func decisionStoreOn(b *testing.B, n int, policies bool, etcd string) (*control.Service, time.Time) {
	b.Helper()
	dir := b.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	var st *store.Store
	var err error
	if etcd == "" {
		st, err = store.Open(paths.DB(), store.Options{NoSync: true}) // setup speed; decisions only read
	} else {
		st, err = store.OpenEtcd(store.EtcdConfig{Endpoints: []string{etcd}, Prefix: "/loopr/decision"}, store.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	cfg := config.Default()
	cfg.Storage.DiskQuotaMinGB = 0
	if policies { // tiers, owners' quotas and conflict keys (ralph is in group code)
		for t, tier := range map[string]int{loop.Phase: 30, loop.Ralph: 40} {
			ls := cfg.Loops[t]
			ls.Tier = tier
			cfg.Loops[t] = ls
		}
		cfg.Quotas = map[string]config.Quota{"alice": {MaxRunning: 3}, "bob": {MaxRunning: 3}}
	}
	now := time.Date(2026, 1, 25, 12, 0, 0, 0, time.UTC)
	svc := control.New(st, paths, func() *config.Config { return cfg }, func() time.Time { return now })

	mk := func(id, typ, parent string, depth int, status loop.Status, age time.Duration) loop.Loop {
		return loop.Loop{ID: id, Type: typ, Status: status, Parent: parent, Depth: depth, Title: "item " + id,
			Iteration: 1, MaxIterations: 100, CreatedAt: now.Add(-age), UpdatedAt: now.Add(-age)}
	}
	var loops []loop.Loop
	phases := n / 10
	specs := max(phases/10, 1)
	plans := max(specs/10, 1)
	for i := range plans {
		loops = append(loops, mk(fmt.Sprintf("pl%06d", i), loop.Plan, "", 0, loop.Complete, 3*time.Hour))
	}
	for i := range specs {
		loops = append(loops, mk(fmt.Sprintf("sp%06d", i), loop.Spec, fmt.Sprintf("pl%06d", i%plans), 1, loop.Complete, 3*time.Hour))
	}
	var copies []string // artifacts kept in the etcd store only
	art := filepath.Join(dir, "artifacts")
	if err := os.MkdirAll(art, 0o700); err != nil {
		b.Fatal(err)
	}
	for i := range phases {
		l := mk(fmt.Sprintf("ph%06d", i), loop.Phase, fmt.Sprintf("sp%06d", i%specs), 2, loop.Complete, 2*time.Hour)
		if i%10 == 3 {
			l.Status = loop.Failed // its ralphs wait: parent_incomplete
		} else {
			l.Artifact = filepath.Join(art, l.ID+".md")
			if err := os.WriteFile(l.Artifact, []byte("# Phase\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			if etcd != "" {
				copies = append(copies, l.Artifact)
			}
		}
		loops = append(loops, l)
	}
	for i := range n {
		p := fmt.Sprintf("ph%06d", i/10)
		l := mk(fmt.Sprintf("ra%07d", i), loop.Ralph, p, 3, loop.Pending, time.Duration(i*7919%7200)*time.Second)
		l.TriggeredBy = filepath.Join(art, p+".md")
		l.Iteration = 1 + i%4
		if policies {
			l.Owner = []string{"", "alice", "bob"}[i%3]
			if i%3 == 0 {
				l.ConflictKey = fmt.Sprintf("file-%d", i%500)
			}
		}
		if i%20 == 7 {
			l.RunnableAt = now.Add(time.Duration(1+i%600) * time.Second)
		}
		loops = append(loops, l)
	}
	running := map[string]int{loop.Plan: 1, loop.Spec: 4, loop.Phase: 18, loop.Ralph: 22} // 45 of 50
	for t, k := range running {
		for j := range k {
			l := mk(fmt.Sprintf("run-%s-%02d", t, j), t, "", 0, loop.Running, time.Minute)
			l.StartedAt = now
			loops = append(loops, l)
		}
	}
	chunkSize := 5000
	if etcd != "" {
		chunkSize = 500 // etcd's --max-txn-ops
	}
	for len(loops) > 0 {
		chunk := loops[:min(len(loops), chunkSize)]
		loops = loops[len(chunk):]
		if err := st.Update(func(tx *store.Tx) error {
			for _, l := range chunk {
				if err := tx.Create(l); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	for len(copies) > 0 {
		chunk := copies[:min(len(copies), chunkSize)]
		copies = copies[len(chunk):]
		if err := st.Update(func(tx *store.Tx) error {
			for _, path := range chunk {
				if err := tx.PutRaw(control.ArtifactKey(path), []byte("# Phase\n"), 0); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return svc, now
}

// seed004 is the selection of seed 004's Scheduler::select_runnable as it
// is written, over the same store: query every pending loop, keep those
// whose parent (a store read) is complete and whose artifact exists, walk
// each one's parent chain with a store read per step for its depth,
// compute its priority, sort by priority, truncate to the free slots.
// Two liberties, both in the baseline's favour: all reads share one read
// transaction, and each priority is computed once rather than inside the
// sort's comparison as the seed's Rust does (2 log2 n times per loop).
func seed004(st *store.Store, now time.Time, maxConcurrent, running int) ([]string, error) {
	available := maxConcurrent - running
	if available <= 0 {
		return nil, nil
	}
	base := map[string]int{loop.Ralph: 100, loop.Phase: 80, loop.Spec: 60, loop.Plan: 40}
	type scored struct {
		l    loop.Loop
		prio int
	}
	var runnable []scored
	err := st.View(func(tx *store.Tx) error {
		var pending []loop.Loop
		if err := tx.ByStatus(loop.Pending, func(l loop.Loop) bool { pending = append(pending, l); return true }); err != nil {
			return err
		}
		for _, l := range pending {
			if l.Parent != "" { // is_runnable: the parent is complete
				p, err := tx.Get(l.Parent)
				if err != nil || p.Status != loop.Complete {
					continue
				}
			}
			if l.TriggeredBy != "" { // and the triggering artifact exists
				if _, err := os.Stat(l.TriggeredBy); err != nil {
					continue
				}
			}
			depth := 0 // calculate_depth: a store read per step
			for cur := l.Parent; cur != ""; {
				depth++
				p, err := tx.Get(cur)
				if err != nil {
					break
				}
				cur = p.Parent
			}
			prio := base[l.Type] + min(int(now.Sub(l.CreatedAt)/time.Minute), 50) + depth*10 -
				min(max(l.Iteration-1, 0)*5, 30)
			runnable = append(runnable, scored{l, prio})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(runnable, func(a, b scored) int { return cmp.Compare(b.prio, a.prio) })
	out := make([]string, 0, available)
	for _, r := range runnable[:min(available, len(runnable))] {
		out = append(out, r.l.ID)
	}
	return out, nil
}

// BenchmarkDecision: one scheduling decision with n pending loops (10%
// blocked by parents, caps near full: 45 of 50 running) through the
// daemon's path — control.Service.Decide over the incremental index, the
// clock one second later each time — next to seed 004's selection over the
// same bbolt store measured in the same run. Targets at 100k: ≤ 1 ms and
// ≥ 500× faster than the baseline; cost growing no worse than n log n.
// The tree term is on (the configuration's default: 100 plans, each
// phase's ten ralphs in one of them); /notree is the same decision with
// its weights at 0.
func BenchmarkDecision(b *testing.B) {
	for _, c := range []struct {
		n                         int
		policies, depends, noTree bool
	}{{1_000, false, false, false}, {10_000, false, false, false}, {100_000, false, false, false},
		{100_000, true, false, false}, {100_000, false, true, false}, {100_000, false, false, true}} {
		name := fmt.Sprintf("pending=%d", c.n)
		if c.policies {
			name += "/policies" // tiers, quotas and conflict keys: still the incremental walk
		}
		if c.depends {
			name += "/depends" // 30% wait on the sibling before them (depends_on): still the incremental walk
		}
		if c.noTree {
			name += "/notree" // the tree term off (weights 0, seed 004): what the default tree term costs
		}
		n := c.n
		b.Run(name, func(b *testing.B) {
			svc, now := decisionStore(b, n, c.policies)
			if c.noTree {
				pr := &svc.Config().Scheduler.Priority
				pr.TreeBoostMax, pr.TreeAgeBoostPerMinute, pr.TreeAgeBoostMax = 0, 0, 0
			}
			if c.depends {
				dependOnSiblings(b, svc, n)
			}
			var base []time.Duration
			for range 3 {
				began := time.Now()
				got, err := seed004(svc.Store, now, 50, 45)
				if err != nil {
					b.Fatal(err)
				}
				base = append(base, time.Since(began))
				if len(got) != 5 {
					b.Fatalf("baseline chose %d loops, want 5", len(got))
				}
			}
			slices.Sort(base)
			if err := svc.EnableIndex(); err != nil { // the daemon builds it once at start
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			at := now
			for b.Loop() {
				at = at.Add(time.Second)
				d, err := svc.Decide(at)
				if err != nil {
					b.Fatal(err)
				}
				if len(d.Start) != 5 || !d.Fast {
					b.Fatalf("Decide started %d (fast %v), want 5 by the incremental walk", len(d.Start), d.Fast)
				}
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(base[1].Microseconds())/1000, "baseline-ms")
			b.ReportMetric(float64(base[1])/float64(per), "x-baseline")
		})
	}
}

// dependOnSiblings makes 30% of the n pending ralphs of a decision store
// depend on the ralph before them, a pending sibling: they wait (reason
// depends_on) and stay out of the index's ready groups.
func dependOnSiblings(b *testing.B, svc *control.Service, n int) {
	b.Helper()
	for lo := 0; lo < n; lo += 5000 {
		if err := svc.Store.Update(func(tx *store.Tx) error {
			for i := lo; i < min(lo+5000, n); i++ {
				if i%10 == 0 || i%10 > 3 {
					continue
				}
				l, err := tx.Get(fmt.Sprintf("ra%07d", i))
				if err != nil {
					return err
				}
				l.DependsOn = []string{fmt.Sprintf("ra%07d", i-1)}
				if err := tx.Put(l); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionEtcdArtifacts is BenchmarkDecision at 100k pending on
// an etcd store, twice: with the phase artifacts as files here, then with
// the files gone and only the store's copies left (the phases passed on
// other machines); and the same decision on the bbolt file in the same
// run. x-files (copies only ÷ files here) is what the artifact_missing
// check costs on etcd: a decision asks etcd (one keys-only request) only
// for paths neither a file here nor seen in the store before (first-ms:
// the first decision, which lists the 9,000 copies); x-bbolt is
// the whole difference. files-ms against bbolt-ms is the same decision on
// both stores: on etcd it reads the rate-limit, fairness and budget state
// from memory (control/metacache.go), so it reads no etcd at all.
func BenchmarkDecisionEtcdArtifacts(b *testing.B) {
	const n = 100_000
	decide := func(b *testing.B, svc *control.Service, at time.Time, rounds int) time.Duration {
		began := time.Now()
		for range rounds {
			at = at.Add(time.Second)
			d, err := svc.Decide(at)
			if err != nil {
				b.Fatal(err)
			}
			if len(d.Start) != 5 || !d.Fast {
				b.Fatalf("Decide started %d (fast %v), want 5 by the incremental walk", len(d.Start), d.Fast)
			}
		}
		return time.Since(began) / time.Duration(rounds)
	}
	local, now := decisionStoreOn(b, n, false, "")
	if err := local.EnableIndex(); err != nil {
		b.Fatal(err)
	}
	srv := etcdtest.Start(b, etcdtest.Options{NoFsync: true}) // setup speed; decisions only read
	svc, _ := decisionStoreOn(b, n, false, srv.Endpoint())
	if err := svc.EnableIndex(); err != nil {
		b.Fatal(err)
	}
	// The decision with the files here, on etcd and on bbolt, measured in
	// alternating blocks (the median block of each): a busy machine slows
	// both alike.
	var onEtcd, onBolt []time.Duration
	for i := range 9 {
		onEtcd = append(onEtcd, decide(b, svc, now.Add(time.Duration(i)*5*time.Minute), 100))
		onBolt = append(onBolt, decide(b, local, now.Add(3*time.Hour+time.Duration(i)*5*time.Minute), 100))
	}
	slices.Sort(onEtcd)
	slices.Sort(onBolt)
	files, bolt := onEtcd[len(onEtcd)/2], onBolt[len(onBolt)/2]
	ph, err := svc.Get("ph000000")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(filepath.Dir(ph.Artifact), filepath.Dir(ph.Artifact)+".gone"); err != nil {
		b.Fatal(err)
	}
	first := decide(b, svc, now.Add(time.Hour), 1) // asks etcd, fills the cache of copies seen
	b.ReportAllocs()
	b.ResetTimer()
	at := now.Add(2 * time.Hour)
	for b.Loop() {
		at = at.Add(time.Second)
		d, err := svc.Decide(at)
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Start) != 5 || !d.Fast {
			b.Fatalf("Decide on etcd started %d (fast %v), want 5 by the incremental walk", len(d.Start), d.Fast)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
	b.ReportMetric(float64(files.Microseconds())/1000, "files-ms")
	b.ReportMetric(float64(bolt.Microseconds())/1000, "bbolt-ms")
	b.ReportMetric(float64(per)/float64(files), "x-files")
	b.ReportMetric(float64(per)/float64(bolt), "x-bbolt")
}

// BenchmarkDecisionProfiles is BenchmarkDecision at 100k with the agent
// profiles and budgets of issue 11 in play: the default profile limited
// with a free fallback (every loop picks it), every profile limited, and
// one plan tree in a hundred over its budget. Each must stay on the
// incremental walk.
func BenchmarkDecisionProfiles(b *testing.B) {
	limited := ratelimit.State{Hits: 1, BackoffUntil: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, c := range []struct {
		name   string
		limits map[string]ratelimit.State
		spent  bool
		starts int
	}{
		{"default-limited-fallback-free", map[string]ratelimit.State{config.DefaultProfile: limited}, false, 5},
		{"every-profile-limited", map[string]ratelimit.State{config.DefaultProfile: limited, "codex": limited}, false, 0},
		{"one-tree-in-100-over-budget", nil, true, 5},
	} {
		b.Run(c.name, func(b *testing.B) {
			svc, now := decisionStore(b, 100_000, false)
			cfg := svc.Config()
			cfg.Agents = map[string]config.Agent{"codex": config.DefaultAgent()}
			cfg.Agent.Fallback = []string{"codex"}
			err := svc.Store.Update(func(tx *store.Tx) error {
				if c.limits != nil {
					if err := control.SaveLimits(tx, c.limits); err != nil {
						return err
					}
				}
				if !c.spent {
					return nil
				}
				root, err := tx.Get("pl000000")
				if err != nil {
					return err
				}
				root.Budget, root.Usage = loop.Budget{USD: 1}, loop.Usage{CostUSD: 2}
				if err := tx.Put(root); err != nil {
					return err
				}
				return tx.SetMeta(control.BudgetsKey, true)
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := svc.EnableIndex(); err != nil {
				b.Fatal(err)
			}
			// The first decision finds the spent trees (once per daemon);
			// reported apart from the steady state.
			began := time.Now()
			if _, err := svc.Decide(now); err != nil {
				b.Fatal(err)
			}
			first := time.Since(began)
			b.ReportAllocs()
			b.ResetTimer()
			at := now
			for b.Loop() {
				at = at.Add(time.Second)
				d, err := svc.Decide(at)
				if err != nil {
					b.Fatal(err)
				}
				if len(d.Start) != c.starts || !d.Fast {
					b.Fatalf("Decide started %d (fast %v), want %d by the incremental walk", len(d.Start), d.Fast, c.starts)
				}
			}
			b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
		})
	}
}
