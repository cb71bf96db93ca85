package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/etcdtest"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestEtcdDaemonTLSAndUser runs the real daemon on an etcd that serves
// TLS, requires client certificates and has authentication enabled
// (docs/several-machines.md, "TLS and users": a user whose role covers
// only the store's prefix). The TLS files are given relative to
// loopr.yml. A loop runs to completion; then daemons and the direct CLI
// with a wrong password, a missing key file and the wrong CA each stop
// at once with one line naming the setting.
func TestEtcdDaemonTLSAndUser(t *testing.T) {
	t.Parallel()
	certs := etcdtest.NewCerts(t, "loopr")
	srv := etcdtest.Start(t, etcdtest.Options{NoFsync: true, TLS: certs, ClientCertAuth: true})
	const prefix = "/loopr/tls"
	srv.EnableAuth(t, etcdtest.Auth{RootPassword: "root-secret", User: "loopr", Password: "loopr-secret", Role: "loopr-tls", Prefix: prefix})
	storeYML := func(password, ca, key string) string {
		return fmt.Sprintf(`store:
  backend: etcd
  etcd:
    endpoints: [%q]
    prefix: %s
    username: loopr
    password: %s
    ca_file: %s
    cert_file: tls/client.pem
    key_file: %s
    dial_timeout_secs: %d
`, srv.Endpoint(), prefix, password, ca, key, int(testslack.Scale(5*time.Second).Seconds()))
	}
	newTLSRepo := func(password, ca, key string) repo {
		r := newRepo(t, treeConfig(t, 3, validateCmd(t), "tree")+storeYML(password, ca, key))
		dir := filepath.Join(r.dir, "tls")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for src, dst := range map[string]string{certs.CA: "ca.pem", certs.OtherCA: "other-ca.pem", certs.ClientCert: "client.pem", certs.ClientKey: "client-key.pem"} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(r.dir, ".git", "info", "exclude"), []byte("/tls/\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := newTLSRepo("loopr-secret", "tls/ca.pem", "tls/client-key.pem")
	d := startDaemon(t, r)
	var added loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--task", "Runs over TLS as user loopr", "--json"), &added)
	waitEvery(t, 60*time.Second, slowPoll, "the loop to finish", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		return show(t, r, added.ID).Status.Terminal()
	})
	if got := show(t, r, added.ID); got.Status != loop.Complete {
		t.Errorf("loop ended %s, want complete", got.Status)
	}
	if c := status(t, r).Cluster; c == nil || c.Worker == "" || c.Scheduler != c.Worker {
		t.Errorf("status cluster = %+v; want this daemon's worker, elected scheduler under the user's role", c)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit %d after SIGTERM:\n%s", code, tail(d.output(), 40))
	}

	for _, tc := range []struct {
		name, password, ca, key string
		want                    string
	}{
		{"wrong password", "nope", "tls/ca.pem", "tls/client-key.pem", `etcd refused user "loopr": wrong store.etcd.username or password`},
		{"missing key file", "loopr-secret", "tls/ca.pem", "tls/gone.pem", "store.etcd.key_file: open %s/tls/gone.pem: no such file or directory; give a file the daemon's user can read"},
		{"wrong CA", "loopr-secret", "tls/other-ca.pem", "tls/client-key.pem", "is not signed by store.etcd.ca_file %s/tls/other-ca.pem; set ca_file to the CA that signed etcd's --cert-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTLSRepo(tc.password, tc.ca, tc.key)
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, r.dir)
			}
			for _, args := range [][]string{{"daemon"}, {"list"}} {
				res := run(t, r.dir, "", args...)
				if res.code == 0 || !strings.Contains(res.stderr, want) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
					t.Errorf("loopr %s: exit %d, stderr %q; want one line saying %q", args[0], res.code, res.stderr, want)
				}
			}
		})
	}
}
