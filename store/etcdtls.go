package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdTLS checks the TLS files of c, each with an error that names the
// setting, the file and what to do, and returns the client's TLS
// configuration (nil when c sets none).
func etcdTLS(c EtcdConfig) (*tls.Config, error) {
	if c.CAFile == "" && c.CertFile == "" && c.KeyFile == "" {
		return nil, nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		set, unset := "cert_file", "key_file"
		if c.CertFile == "" {
			set, unset = unset, set
		}
		return nil, fmt.Errorf("open store: etcd: store.etcd.%s is set but %s is not; set both (the client certificate and its key) or neither", set, unset)
	}
	read := func(setting, path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("open store: etcd: store.etcd.%s: %v; give a file the daemon's user can read", setting, err)
		}
		return b, nil
	}
	if c.CAFile != "" {
		b, err := read("ca_file", c.CAFile)
		if err != nil {
			return nil, err
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("open store: etcd: store.etcd.ca_file %s holds no PEM certificate; give the certificate of the CA that signed etcd's --cert-file", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := read("cert_file", c.CertFile)
		if err != nil {
			return nil, err
		}
		key, err := read("key_file", c.KeyFile)
		if err != nil {
			return nil, err
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			if strings.Contains(err.Error(), "does not match") {
				return nil, fmt.Errorf("open store: etcd: store.etcd.key_file %s is not the key of cert_file %s (%v); give the key the certificate was made for", c.KeyFile, c.CertFile, err)
			}
			return nil, fmt.Errorf("open store: etcd: store.etcd.cert_file %s with key_file %s: %v; both must be PEM files (a certificate, its private key)", c.CertFile, c.KeyFile, err)
		}
	}
	tc, err := transport.TLSInfo{TrustedCAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("open store: etcd TLS: %w", err)
	}
	return tc, nil
}

// etcdAuthError says what to do about an authentication or permission
// error from etcd; "" if err is neither.
func etcdAuthError(c EtcdConfig, prefix string, err error) string {
	user := fmt.Sprintf("etcd user %q", c.Username)
	if c.Username == "" {
		user = fmt.Sprintf("etcd user %q (the client certificate's common name)", certCN(c.CertFile))
		if c.CertFile == "" {
			user = "a client without a user"
		}
	}
	switch etcdErr(err) {
	case rpctypes.ErrAuthFailed:
		return fmt.Sprintf("etcd refused user %q: wrong store.etcd.username or password (%v)", c.Username, err)
	case rpctypes.ErrUserEmpty, rpctypes.ErrInvalidAuthToken:
		return "etcd has authentication enabled: set store.etcd.username and password, or a client certificate (cert_file, key_file) whose common name is an etcd user"
	case rpctypes.ErrPermissionDenied:
		return fmt.Sprintf("%s may not read and write %s/ (etcdserver: permission denied); grant its role the prefix: etcdctl role grant-permission <role> readwrite --prefix=true %s/ (docs/several-machines.md, TLS and users)", user, prefix, prefix)
	}
	return ""
}

// checkEtcdWrite asks etcd whether this client may write under prefix
// without writing: etcd checks the permissions of every operation of a
// transaction, also of the branch its compare does not take.
func checkEtcdWrite(ctx context.Context, cli *clientv3.Client, key string) error {
	_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "<", 0)).
		Then(clientv3.OpPut(key, "")).Commit()
	return err
}

// diagnoseEtcd looks at why no endpoint answered: for each, a TCP and
// (https) TLS handshake of its own, which names what a gRPC timeout does
// not (the wrong CA, a missing client certificate, http against https).
// "" when it finds nothing better to say than "not reachable".
func diagnoseEtcd(c EtcdConfig, tc *tls.Config) string {
	for _, ep := range c.Endpoints {
		if d := diagnoseEndpoint(c, ep, tc); d != "" {
			return d
		}
	}
	return ""
}

func diagnoseEndpoint(c EtcdConfig, ep string, tc *tls.Config) string {
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	const wait = time.Second
	dial := func() net.Conn {
		conn, err := net.DialTimeout("tcp", u.Host, wait)
		if err != nil {
			return nil
		}
		_ = conn.SetDeadline(time.Now().Add(wait))
		return conn
	}
	if u.Scheme == "http" {
		// Does a plain endpoint in fact speak TLS?
		conn := dial()
		if conn == nil {
			return ""
		}
		defer conn.Close()
		tconn := tls.Client(conn, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only asks whether the server speaks TLS
		err := tconn.Handshake()
		var alert tls.AlertError
		if err == nil || errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls:") {
			return fmt.Sprintf("endpoint %s serves TLS: write it https://%s and set store.etcd.ca_file (and cert_file, key_file if etcd asks for client certificates)", ep, u.Host)
		}
		return ""
	}
	conn := dial()
	if conn == nil {
		return ""
	}
	defer conn.Close()
	cfg := &tls.Config{}
	if tc != nil {
		cfg = tc.Clone()
	}
	cfg.ServerName = u.Hostname()
	tconn := tls.Client(conn, cfg)
	err = tconn.Handshake()
	if err == nil {
		// TLS 1.3: the server checks the client's certificate after the
		// handshake; its refusal is the first thing read.
		_, err = tconn.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return ""
		}
	}
	if err == nil {
		return ""
	}
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ie x509.CertificateInvalidError
	ca := "store.etcd.ca_file " + c.CAFile
	if c.CAFile == "" {
		ca = "a CA this machine trusts (store.etcd.ca_file is not set)"
	}
	switch {
	case errors.As(err, &rh):
		fallthrough
	case errors.Is(err, io.EOF) && speaksHTTP(dial()):
		return fmt.Sprintf("endpoint %s does not speak TLS: write it http://%s, or start etcd with --cert-file and --key-file", ep, u.Host)
	case errors.As(err, &ua):
		return fmt.Sprintf("etcd's certificate at %s is not signed by %s; set ca_file to the CA that signed etcd's --cert-file", ep, ca)
	case errors.As(err, &he):
		return fmt.Sprintf("etcd's certificate at %s is not for %s (%v); use an endpoint host it names, or give etcd a certificate for this one", ep, u.Hostname(), he)
	case errors.As(err, &ie):
		return fmt.Sprintf("etcd's certificate at %s is not valid (%v); renew etcd's --cert-file", ep, ie)
	case strings.Contains(err.Error(), "remote error: tls:"):
		if c.CertFile == "" {
			return fmt.Sprintf("etcd at %s requires a client certificate (%v; etcd runs with --client-cert-auth); set store.etcd.cert_file and key_file", ep, err)
		}
		return fmt.Sprintf("etcd at %s refused the client certificate %s (%v); it must be signed by the CA etcd trusts (its --trusted-ca-file)", ep, c.CertFile, err)
	}
	return fmt.Sprintf("TLS with %s failed: %v", ep, err)
}

// speaksHTTP says whether a plain HTTP request on conn (closed after)
// gets an HTTP answer.
func speaksHTTP(conn net.Conn) bool {
	if conn == nil {
		return false
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /version HTTP/1.0\r\n\r\n")); err != nil {
		return false
	}
	b := make([]byte, 5)
	_, err := io.ReadFull(conn, b)
	return err == nil && string(b) == "HTTP/"
}

// certCN is the common name of the certificate in file ("" if none).
func certCN(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return ""
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return ""
	}
	return cert.Subject.CommonName
}
