package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Auth is what EnableAuth sets up: the steps docs/several-machines.md
// ("TLS and users") gives as etcdctl commands, run through the client API.
type Auth struct {
	RootPassword string
	// User (with Password) gets Role, which may read and write every key
	// under Prefix + "/" and nothing else.
	User, Password, Role string
	Prefix               string // a store's prefix, such as /loopr/web
}

// Client is a client of s as user ("" for none: before auth is enabled),
// over TLS with the client certificate when the server serves TLS. It is
// closed when tb ends.
func (s *Server) Client(tb testing.TB, user, password string) *clientv3.Client {
	tb.Helper()
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: testslack.Scale(5 * time.Second),
		Username: user, Password: password, Logger: zap.NewNop()}
	if c := s.Opts.TLS; c != nil {
		tc, err := transport.TLSInfo{TrustedCAFile: c.CA, CertFile: c.ClientCert, KeyFile: c.ClientKey}.ClientConfig()
		if err != nil {
			tb.Fatalf("etcdtest: client TLS: %v", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		tb.Fatalf("etcdtest: client: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// AuthCommands are the etcdctl commands EnableAuth runs the equivalent
// of, as docs/several-machines.md ("TLS and users") gives them (etcdctl
// asks for the passwords).
func AuthCommands(a Auth) []string {
	var c []string
	for _, st := range authSteps(context.Background(), nil, a) {
		c = append(c, st.etcdctl)
	}
	return c
}

type authStep struct {
	etcdctl string
	do      func() error
}

func authSteps(ctx context.Context, cli *clientv3.Client, a Auth) []authStep {
	key := a.Prefix + "/"
	return []authStep{
		{"etcdctl user add root", func() error { _, err := cli.UserAdd(ctx, "root", a.RootPassword); return err }},
		{"etcdctl user grant-role root root", func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err }},
		{"etcdctl role add " + a.Role, func() error { _, err := cli.RoleAdd(ctx, a.Role); return err }},
		{"etcdctl role grant-permission " + a.Role + " readwrite --prefix=true " + key, func() error {
			_, err := cli.RoleGrantPermission(ctx, a.Role, key, clientv3.GetPrefixRangeEnd(key), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"etcdctl user add " + a.User, func() error { _, err := cli.UserAdd(ctx, a.User, a.Password); return err }},
		{"etcdctl user grant-role " + a.User + " " + a.Role, func() error { _, err := cli.UserGrantRole(ctx, a.User, a.Role); return err }},
		{"etcdctl auth enable", func() error { _, err := cli.AuthEnable(ctx); return err }},
	}
}

// EnableAuth creates root and a.User with a.Role granted readwrite on
// a.Prefix + "/" (with --prefix), then enables authentication: the steps
// of AuthCommands, through the client API.
func (s *Server) EnableAuth(tb testing.TB, a Auth) {
	tb.Helper()
	cli := s.Client(tb, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(10*time.Second))
	defer cancel()
	for _, st := range authSteps(ctx, cli, a) {
		if err := st.do(); err != nil {
			tb.Fatalf("etcdtest: %s: %v", st.etcdctl, err)
		}
	}
}
