// Package etcdtest runs a real etcd server, embedded from
// go.etcd.io/etcd/server/v3/embed, on 127.0.0.1 ports for tests and
// benchmarks of the store's etcd backend. Only test binaries import it.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/testslack"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Options tune the server.
type Options struct {
	// NoFsync skips etcd's fsyncs (faster tests; never for a benchmark
	// that claims durability).
	NoFsync bool
	// MaxTxnOps is etcd's --max-txn-ops; 0 means 4096 (etcd's default,
	// 128, is too few for a transaction that moves many loops).
	MaxTxnOps uint
	// MaxRequestBytes is etcd's --max-request-bytes; 0 means etcd's
	// default (1.5 MiB).
	MaxRequestBytes uint
	// Dir is the data directory; "" means a new temporary one. Start a
	// server again on the same Dir and ports to restart it.
	Dir string
	// ClientPort and PeerPort; 0 picks free ones.
	ClientPort, PeerPort int
	// Name and InitialCluster make the server a member of a cluster
	// (StartCluster sets them); "" means a one-member cluster named test.
	Name, InitialCluster string
	// TLS, when set, serves clients over https with TLS.ServerCert
	// (etcd's --cert-file, --key-file, --trusted-ca-file).
	TLS *Certs
	// ClientCertAuth is etcd's --client-cert-auth: with TLS, a client
	// must present a certificate TLS.CA signed.
	ClientCertAuth bool
	// AuthTokenTTL is etcd's --auth-token-ttl in seconds: how long an
	// idle client's token lasts once auth is enabled; 0 means etcd's 300.
	AuthTokenTTL uint
}

// Server is a running embedded etcd.
type Server struct {
	e       *embed.Etcd
	stopped bool
	Opts    Options // as started, ports and Dir filled in
}

// Endpoint is the client URL to give the store.
func (s *Server) Endpoint() string {
	return fmt.Sprintf("%s://127.0.0.1:%d", s.scheme(), s.Opts.ClientPort)
}

func (s *Server) scheme() string {
	if s.Opts.TLS != nil {
		return "https"
	}
	return "http"
}

// Stop stops the server (the data stays in Opts.Dir). Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	if !s.stopped {
		s.stopped = true
		s.e.Close()
	}
}

// Start starts a one-member etcd and stops it when tb ends.
func Start(tb testing.TB, o Options) *Server {
	tb.Helper()
	s, err := start(tb, o)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

func start(tb testing.TB, o Options) (*Server, error) {
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	if o.MaxTxnOps == 0 {
		o.MaxTxnOps = 4096
	}
	var err error
	if o.ClientPort == 0 {
		if o.ClientPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if o.PeerPort == 0 {
		if o.PeerPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	if o.Name != "" {
		cfg.Name = o.Name
	}
	cfg.Dir = o.Dir
	cu := url.URL{Scheme: (&Server{Opts: o}).scheme(), Host: fmt.Sprintf("127.0.0.1:%d", o.ClientPort)}
	if c := o.TLS; c != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: c.ServerCert, KeyFile: c.ServerKey,
			TrustedCAFile: c.CA, ClientCertAuth: o.ClientCertAuth}
	}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", o.PeerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, pu.String())
	if o.InitialCluster != "" {
		cfg.InitialCluster = o.InitialCluster
	}
	cfg.MaxTxnOps = o.MaxTxnOps
	if o.MaxRequestBytes != 0 {
		cfg.MaxRequestBytes = o.MaxRequestBytes
	}
	if o.AuthTokenTTL != 0 {
		cfg.AuthTokenTTL = o.AuthTokenTTL
	}
	cfg.UnsafeNoFsync = o.NoFsync
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(testslack.Scale(20 * time.Second)):
		e.Close()
		return nil, fmt.Errorf("etcd on %s not ready after %s", cu.Host, testslack.Scale(20*time.Second))
	}
	return &Server{e: e, Opts: o}, nil
}

// Restart stops the server and starts it again on the same data and
// ports (a member that went away and came back).
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	n, err := start(tb, s.Opts)
	if err != nil {
		tb.Fatalf("etcdtest: restart: %v", err)
	}
	s.e, s.stopped = n.e, false
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartCluster starts an n-member etcd cluster (each member a Server on
// its own ports and data) and stops it when tb ends.
func StartCluster(tb testing.TB, n int, o Options) []*Server {
	tb.Helper()
	opts := make([]Options, n)
	var members []string
	for i := range opts {
		opts[i] = o
		opts[i].Name = fmt.Sprintf("m%d", i)
		opts[i].Dir = tb.TempDir()
		var err error
		if opts[i].ClientPort, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		if opts[i].PeerPort, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		members = append(members, fmt.Sprintf("%s=http://127.0.0.1:%d", opts[i].Name, opts[i].PeerPort))
	}
	servers := make([]*Server, n)
	errs := make(chan error, n)
	for i := range opts {
		opts[i].InitialCluster = strings.Join(members, ",")
		go func() { // a member is ready only once a quorum is up
			s, err := start(tb, opts[i])
			servers[i] = s
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			tb.Fatalf("etcdtest: cluster: %v", err)
		}
	}
	for _, s := range servers {
		tb.Cleanup(s.Stop)
	}
	return servers
}
