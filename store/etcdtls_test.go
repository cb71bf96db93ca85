package store

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// openEtcdWith opens a store with c (on its own prefix if c has none)
// and closes it when t ends.
func openEtcdWith(t *testing.T, c EtcdConfig) *Store {
	t.Helper()
	s, err := OpenEtcd(c, Options{})
	if err != nil {
		t.Fatalf("OpenEtcd() error: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestEtcdTLSAndUsers runs the store against a real etcd that serves
// TLS and requires client certificates (--client-cert-auth) and one with
// authentication enabled (a user whose role covers one store prefix, set
// up by the steps docs/several-machines.md gives): the conformance suite
// over TLS with a user, and every wrong setting refused at open with one
// line that names what is wrong and what to do.
func TestEtcdTLSAndUsers(t *testing.T) {
	certs := etcdtest.NewCerts(t, "loopr")
	const prefix = "/loopr/web"
	auth := etcdtest.Auth{RootPassword: "root-secret", User: "loopr", Password: "loopr-secret", Role: "loopr-web", Prefix: prefix}
	tlsSrv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, TLS: certs, ClientCertAuth: true})
	plain := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	authTLS := etcdtest.Start(t, etcdtest.Options{NoFsync: true, TLS: certs, ClientCertAuth: true})
	authTLS.EnableAuth(t, auth)
	authPlain := etcdtest.Start(t, etcdtest.Options{NoFsync: true})
	authPlain.EnableAuth(t, auth)
	// A user that may only read the prefix.
	root := authPlain.Client(t, "root", auth.RootPassword)
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "reader", prefix+"/", clientv3.GetPrefixRangeEnd(prefix+"/"), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "reader", "reader-secret"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "reader", "reader"); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	withCert := func(srv *etcdtest.Server) EtcdConfig {
		return EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(2 * time.Second),
			CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
	}
	t.Run("works", func(t *testing.T) {
		both := withCert(authTLS)
		both.Username, both.Password = auth.User, auth.Password
		cn := withCert(authTLS)
		cn.Prefix = prefix + "/cn" // under the role's prefix too
		for name, c := range map[string]EtcdConfig{
			"TLS with a client certificate":             withCert(tlsSrv),
			"a user and password":                       {Endpoints: []string{authPlain.Endpoint()}, Prefix: prefix, Username: auth.User, Password: auth.Password},
			"TLS and a user":                            both,
			"the certificate's common name as the user": cn,
		} {
			t.Run(name, func(t *testing.T) {
				followEveryCommitInOrder(t, openEtcdWith(t, c))
			})
		}
		// Every request checked against the role; the user is the
		// certificate's (a password costs a bcrypt per client, too slow
		// for a dozen parallel stores under -race).
		t.Run("conformance over TLS as the certificate's user", func(t *testing.T) {
			for i, tc := range storeSuite {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					c := cn
					c.DialTimeout = 10 * time.Second
					c.Prefix = prefix + "/suite" + strings.Repeat("x", i+1)
					s := openEtcdWith(t, c)
					tc.run(t, s)
					mustCheck(t, s)
				})
			}
		})
	})

	noPEM := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(noPEM, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone-key.pem")
	type wrong struct {
		name string
		c    EtcdConfig
		want []string // in the one line, in order
	}
	mod := func(c EtcdConfig, f func(*EtcdConfig)) EtcdConfig { f(&c); return c }
	cases := []wrong{
		{"wrong CA", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.CAFile = certs.OtherCA }),
			[]string{"etcd's certificate at " + tlsSrv.Endpoint() + " is not signed by store.etcd.ca_file " + certs.OtherCA, "set ca_file to the CA that signed etcd's --cert-file"}},
		{"no client certificate when etcd requires one", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.CertFile, c.KeyFile = "", "" }),
			[]string{"etcd at " + tlsSrv.Endpoint() + " requires a client certificate", "--client-cert-auth", "set store.etcd.cert_file and key_file"}},
		{"a client certificate of another CA", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.CertFile, c.KeyFile = certs.OtherClientCert, certs.OtherClientKey }),
			[]string{"refused the client certificate " + certs.OtherClientCert, "signed by the CA etcd trusts"}},
		{"certificate and key do not match", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.KeyFile = certs.OtherClientKey }),
			[]string{"store.etcd.key_file " + certs.OtherClientKey + " is not the key of cert_file " + certs.ClientCert, "give the key the certificate was made for"}},
		{"key file missing", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.KeyFile = missing }),
			[]string{"store.etcd.key_file: open " + missing + ": no such file or directory", "give a file the daemon's user can read"}},
		{"key file not PEM", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.KeyFile = noPEM }),
			[]string{"store.etcd.cert_file " + certs.ClientCert + " with key_file " + noPEM, "both must be PEM files"}},
		{"a certificate without its key", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.KeyFile = "" }),
			[]string{"store.etcd.cert_file is set but key_file is not", "set both"}},
		{"wrong password", EtcdConfig{Endpoints: []string{authPlain.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second), Username: auth.User, Password: "nope"},
			[]string{`etcd refused user "loopr": wrong store.etcd.username or password`}},
		{"no user when etcd has authentication", EtcdConfig{Endpoints: []string{authPlain.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second)},
			[]string{"etcd has authentication enabled: set store.etcd.username and password"}},
		{"a role that does not cover the prefix", EtcdConfig{Endpoints: []string{authPlain.Endpoint()}, Prefix: "/loopr/other", DialTimeout: testslack.Scale(5 * time.Second), Username: auth.User, Password: auth.Password},
			[]string{`etcd user "loopr" may not read and write /loopr/other/`, "etcdctl role grant-permission <role> readwrite --prefix=true /loopr/other/"}},
		{"a role that may only read", EtcdConfig{Endpoints: []string{authPlain.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second), Username: "reader", Password: "reader-secret"},
			[]string{`etcd user "reader" may not read and write /loopr/web/`}},
		{"https to a plain server", EtcdConfig{Endpoints: []string{"https" + strings.TrimPrefix(plain.Endpoint(), "http")}, Prefix: prefix, DialTimeout: testslack.Scale(2 * time.Second), CAFile: certs.CA},
			[]string{"does not speak TLS: write it " + plain.Endpoint(), "or start etcd with --cert-file and --key-file"}},
		{"http to a TLS server", EtcdConfig{Endpoints: []string{"http" + strings.TrimPrefix(tlsSrv.Endpoint(), "https")}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second)},
			[]string{"serves TLS: write it " + tlsSrv.Endpoint(), "set store.etcd.ca_file"}},
	}
	if os.Geteuid() != 0 { // root reads a file of mode 0
		unreadable := filepath.Join(t.TempDir(), "key.pem")
		b, err := os.ReadFile(certs.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(unreadable, b, 0); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, wrong{"key file unreadable", mod(withCert(tlsSrv), func(c *EtcdConfig) { c.KeyFile = unreadable }),
			[]string{"store.etcd.key_file: open " + unreadable + ": permission denied"}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			s, err := OpenEtcd(tc.c, Options{})
			if err == nil {
				s.Close()
				t.Fatal("OpenEtcd() succeeded; want an error")
			}
			msg := err.Error()
			t.Logf("%s: %s", time.Since(start).Round(time.Millisecond), msg)
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "open store: etcd") {
				t.Errorf("error is not one line starting with \"open store: etcd\": %q", msg)
			}
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error = %q\nwant it to say %q", msg, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestEtcdUserTokenExpires: etcd's token for a user expires after
// --auth-token-ttl of idleness (300 s by default; 1 s here); a store
// open longer than that — a daemon — goes on writing, and its follower
// goes on seeing others' commits, on new tokens the client fetches.
func TestEtcdUserTokenExpires(t *testing.T) {
	const prefix = "/loopr/web"
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, AuthTokenTTL: 1})
	srv.EnableAuth(t, etcdtest.Auth{RootPassword: "root-secret", User: "loopr", Password: "loopr-secret", Role: "loopr-web", Prefix: prefix})
	c := EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second), Username: "loopr", Password: "loopr-secret"}
	a, b := openEtcdWith(t, c), openEtcdWith(t, c)
	seen := make(chan string, 16)
	if err := a.Follow(func(*Tx) error { return nil }, func(cm Commit) {
		for _, ch := range cm.Changes {
			seen <- ch.ID
		}
	}); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"first", "after-expiry"} {
		if i > 0 {
			time.Sleep(3 * time.Second) // both clients' tokens expire
		}
		if err := b.Update(func(tx *Tx) error { return tx.Create(newLoop(id, loop.Pending, "")) }); err != nil {
			t.Fatalf("Update %d (%s): %v", i, id, err)
		}
		select {
		case got := <-seen:
			if got != id {
				t.Fatalf("follower saw %s; want %s", got, id)
			}
		case <-time.After(testslack.Scale(10 * time.Second)):
			t.Fatalf("follower did not see %s within 10 s", id)
		}
		if err := a.Update(func(tx *Tx) error {
			l, err := tx.Get(id)
			if err != nil {
				return err
			}
			l.Iteration++
			return tx.Put(l)
		}); err != nil {
			t.Fatalf("Update by the follower's store after %d s idle: %v", 3*i, err)
		}
		<-seen // its own commit
	}
}

// TestEtcdUserKeepsLeaseAlive: a lease kept alive through a store that
// logs in with a password (a worker's session) outlives etcd's token TTL
// (--auth-token-ttl 2 s here) with no other request on the client: the
// keepalives go on (normally every TTL/3 plus the client's 500 ms send
// tick) with no silence as long as the lease's TTL.
func TestEtcdUserKeepsLeaseAlive(t *testing.T) {
	const prefix = "/loopr/web"
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, AuthTokenTTL: 2})
	srv.EnableAuth(t, etcdtest.Auth{RootPassword: "root-secret", User: "loopr", Password: "loopr-secret", Role: "loopr-web", Prefix: prefix})
	s := openEtcdWith(t, EtcdConfig{Endpoints: []string{srv.Endpoint()}, Prefix: prefix, DialTimeout: testslack.Scale(5 * time.Second), Username: "loopr", Password: "loopr-secret"})
	cli := s.EtcdClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lease, err := cli.Grant(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, prefix+"/workers/w", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	ka, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(8 * time.Second) // four token lifetimes
	last := time.Now()
	var longest time.Duration
	for {
		select {
		case r, ok := <-ka:
			if !ok || r == nil {
				t.Fatalf("keepalive ended after %s: the lease was lost", time.Since(last))
			}
			longest = max(longest, time.Since(last))
			last = time.Now()
			continue
		case <-deadline:
		}
		break
	}
	t.Logf("longest keepalive silence %s (lease TTL 3 s, token TTL 2 s)", longest)
	// The promise is the lease's: a silence as long as its TTL could let
	// it expire. The cadence (1.5 s) stretches on a loaded machine (2.07 s
	// seen in CI), which is no lost token.
	if longest >= 3*time.Second {
		t.Errorf("a keepalive silence of %s; want under the lease's 3 s", longest)
	}
	if r, err := cli.TimeToLive(ctx, lease.ID); err != nil || r.TTL <= 0 {
		t.Errorf("lease after 8 s: TTL %v, %v; want alive", r, err)
	}
}
