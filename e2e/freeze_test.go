package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestGuardFrozenWorker: a worker daemon of an etcd store frozen with
// SIGSTOP cannot keep its lease alive, and its loops go to other workers
// once the lease expires; its guard, which gets no heartbeat from it,
// must kill its agent, the agent's setsid grandchild and its validate
// command first: within 2/3 of the lease TTL + 1 s of the freeze, and
// before the lease expires (both measured and printed). After SIGCONT
// the daemon records nothing of the killed runs (exactly one attempt
// charged for each, no iteration recorded; its own fencing saw the
// keepalive gap), registers again and runs the loops again.
func TestGuardFrozenWorker(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cgroup", "subreaper"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			frozenWorker(t, mode)
		})
	}
}

func frozenWorker(t *testing.T, mode string) {
	const ttl = 4 * time.Second
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	const prefix = "/loopr/freeze"
	marks := t.TempDir()
	cfg := guardConfig(t, marks) + fmt.Sprintf("store:\n  backend: etcd\n  etcd:\n    endpoints: [%q]\n    prefix: %s\nworker:\n  lease_ttl_secs: %d\n",
		srv.Endpoint(), prefix, int(ttl/time.Second))
	r := newRepo(t, cfg)
	d, g, ids := startGuarded(t, r, marks, "LOOPR_CONTAINMENT="+mode)
	t.Cleanup(func() { _ = syscall.Kill(d.cmd.Process.Pid, syscall.SIGCONT) }) // never left stopped
	st := status(t, r)
	name, containment := st.Cluster.Worker, st.Containment
	guard := guardOf(d.cmd.Process.Pid)
	if guard == 0 || !procLive(guard) {
		t.Fatalf("no guard process for daemon %d", d.cmd.Process.Pid)
	}
	cli := etcdClientE2E(t, srv.Endpoint())
	registered := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(2*time.Second))
		defer cancel()
		res, err := cli.Get(ctx, prefix+"/workers/"+name)
		return err != nil || len(res.Kvs) > 0 // an error: not known to be gone
	}
	if !registered() {
		t.Fatalf("worker %s is not registered under %s/workers/", name, prefix)
	}

	if err := syscall.Kill(d.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	var killed, expired time.Duration
	for time.Since(frozen) < 3*ttl && (killed == 0 || expired == 0) {
		if killed == 0 && len(g.alive()) == 0 {
			killed = time.Since(frozen)
		}
		if expired == 0 && !registered() {
			expired = time.Since(frozen)
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := func(d time.Duration) string {
		if d == 0 {
			return "never"
		}
		return "after " + d.Round(time.Millisecond).String()
	}
	t.Logf("%s (%s): SIGSTOP of the worker daemon (lease TTL %s): its agent, the setsid grandchild and the validate command gone %s; its lease expired %s",
		mode, containment, ttl, took(killed), took(expired))
	if killed == 0 || killed > ttl*2/3+time.Second {
		t.Fatalf("the frozen daemon's processes outlived 2/3 of the lease TTL + 1 s: still alive %v\nguard.log: %s", g.alive(), guardLog(r))
	}
	if expired == 0 {
		t.Fatalf("the frozen worker's lease did not expire within %s", 3*ttl)
	}
	if killed >= expired {
		t.Errorf("the frozen daemon's processes died after its lease expired (%s ≥ %s): its loops could run on two workers at once", killed, expired)
	}
	if !procLive(guard) {
		t.Fatal("the guard exited after killing a frozen daemon's processes; it must watch on")
	}
	if !strings.Contains(guardLog(r), "sent no heartbeat") {
		t.Errorf("guard.log does not say the daemon was silent:\n%s", guardLog(r))
	}

	// It resumes: nothing of the killed runs is recorded, it registers
	// again, and the loops run again (one attempt charged each).
	clearMarks(t, marks, ids)
	if err := syscall.Kill(d.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	g2 := waitGuarded(t, d, marks, ids)
	if g2.agent == g.agent || g2.validate == g.validate {
		t.Fatalf("the loops did not run again: %+v then %+v", g, g2)
	}
	if !registered() {
		t.Errorf("the resumed worker %s is not registered again", name)
	}
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var evs []loop.Event
	if err := s.View(func(tx *store.Tx) (err error) { evs, err = tx.EventsSince(0, 0); return err }); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		charged := 0
		for _, e := range evs {
			if e.Loop != id {
				continue
			}
			if e.Kind == loop.EventIteration {
				t.Errorf("loop %s: an outcome of the killed run was recorded: %s", id, e.Message)
			}
			if strings.Contains(e.Message, "iteration 1 charged") {
				charged++
			}
		}
		if charged != 1 {
			var all []string
			for _, e := range evs {
				if e.Loop == id {
					all = append(all, string(e.Kind)+": "+e.Message)
				}
			}
			t.Errorf("loop %s: %d events charge iteration 1, want exactly 1:\n%s", id, charged, strings.Join(all, "\n"))
		}
	}
	for _, l := range list(t, r) {
		if l.ID == ids[0] && (l.Status != loop.Running || l.Iteration != 2) {
			t.Errorf("loop %s after the freeze: %s, iteration %d; want running its iteration 2", l.ID, l.Status, l.Iteration)
		}
	}
	// The resumed daemon's own fencing saw the keepalive gap.
	fenced := false
	for _, line := range strings.Split(d.output(), "\n") {
		if strings.Contains(line, "lost its etcd session") || strings.Contains(line, "result dropped") {
			t.Logf("daemon: %s", line)
			fenced = fenced || strings.Contains(line, "recording nothing")
		}
	}
	if !fenced {
		t.Errorf("the resumed daemon did not fence itself (no \"lost its etcd session … recording nothing\" in its log):\n%s", tail(d.output(), 30))
	}
	// A clean stop still releases the guard (the heartbeat is no crash).
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d after SIGTERM, want 0; log:\n%s", code, tail(d.output(), 40))
	}
	waitFor(t, 5*time.Second, "the guard to exit after the clean stop", func() bool { return !procLive(guard) })
	if left := g2.alive(); len(left) > 0 {
		t.Errorf("processes outlived the clean stop: %v", left)
	}
}
