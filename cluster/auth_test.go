package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/store"
)

// TestWithTLSAndAuth runs workers on an etcd that serves TLS, requires
// client certificates and has authentication enabled, as a user whose
// role covers only the store's prefix (readwrite on "<prefix>/" with
// --prefix, the grant docs/several-machines.md gives): registration,
// leases, the election and git locks all live under it.
func TestWithTLSAndAuth(t *testing.T) {
	certs := etcdtest.NewCerts(t, "loopr")
	const prefix = "/loopr/web"
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, TLS: certs, ClientCertAuth: true})
	srv.EnableAuth(t, etcdtest.Auth{RootPassword: "root-secret", User: "loopr", Password: "loopr-secret", Role: "loopr-web", Prefix: prefix})
	s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second),
		Username: "loopr", Password: "loopr-secret", CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	ttl := 5 * time.Second // a 2 s lease lost sessions on a loaded 2-core machine (keepalive silence > 2/3 TTL)
	var ws []*Worker
	stops := map[string]func(){}
	for _, n := range []string{"a", "b"} {
		w, err := Register(ctx, Options{Store: s, Info: info(n, "h", "/home/"+n), TTL: ttl})
		if err != nil {
			t.Fatalf("Register(%s) as a user limited to %s/: %v", n, prefix, err)
		}
		ws = append(ws, w)
		stops[n] = run(t, w)
	}
	leader := func() *Worker {
		for _, w := range ws {
			if w.Scheduler() {
				return w
			}
		}
		return nil
	}
	waitFor(t, 5*time.Second, "a scheduler elected", func() bool { return leader() != nil })
	first := leader()
	if err := s.Update(func(tx *store.Tx) error {
		return PutLease(tx, "L1", LoopLease{Worker: "b", Iteration: 1, Lease: LeaseHex(ws[1].Lease())}, ws[1].Lease())
	}); err != nil {
		t.Fatalf("PutLease: %v", err)
	}
	list, sched, err := Workers(ctx, s)
	if err != nil {
		t.Fatalf("Workers: %v", err)
	}
	if sched != first.Name() || len(list) != 2 {
		t.Fatalf("Workers() = %d workers, scheduler %q; want 2, %q", len(list), sched, first.Name())
	}
	unlock, err := ws[0].Locker().Lock(ctx, "loopr/plan")
	if err != nil {
		t.Fatalf("git lock: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := ws[1].Locker().Lock(tctx, "loopr/plan"); err == nil {
		t.Fatal("b took the git lock while a held it")
	}
	cancel()
	unlock()
	u, err := ws[1].Locker().Lock(ctx, "loopr/plan")
	if err != nil {
		t.Fatalf("git lock after unlock: %v", err)
	}
	u()
	// A clean stop revokes the scheduler's lease (a write on every key
	// attached to it, which the role must cover): the other takes over.
	stops[first.Name()]()
	waitFor(t, 2*ttl, "another scheduler after a clean stop", func() bool { l := leader(); return l != nil && l != first })
	if list, _, _ := Workers(ctx, s); len(list) != 1 {
		t.Fatalf("Workers() after a clean stop = %d; want 1", len(list))
	}
}
