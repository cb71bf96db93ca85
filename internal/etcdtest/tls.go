package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are PEM files generated for one test (crypto/x509, valid for a
// day from now: nothing in testdata to expire).
type Certs struct {
	Dir string
	// CA signed the server's and the client's certificates.
	CA string
	// ServerCert and ServerKey are etcd's, for 127.0.0.1 and localhost.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client's; the certificate's common
	// name is ClientCN (etcd takes it as the user name when it has auth
	// enabled and the client gives no password).
	ClientCert, ClientKey string
	ClientCN              string
	// OtherCA signed OtherClientCert (OtherClientKey) and nothing of
	// the server: the wrong CA for a client, and a client certificate
	// the server does not trust.
	OtherCA                         string
	OtherClientCert, OtherClientKey string
}

// NewCerts writes a CA, a server certificate for 127.0.0.1 and a client
// certificate with common name cn into a new temporary directory, and a
// second CA with a client certificate of its own.
func NewCerts(tb testing.TB, cn string) *Certs {
	tb.Helper()
	dir := tb.TempDir()
	c := &Certs{Dir: dir, ClientCN: cn}
	ca, caKey := newCA(tb, dir, "ca", "loopr test CA")
	other, otherKey := newCA(tb, dir, "other-ca", "another CA")
	c.CA, c.OtherCA = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "other-ca.pem")
	c.ServerCert, c.ServerKey = leaf(tb, dir, "server", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		// etcd's gateway dials etcd itself with the server's certificate.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	c.ClientCert, c.ClientKey = leaf(tb, dir, "client", ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	c.OtherClientCert, c.OtherClientKey = leaf(tb, dir, "other-client", other, otherKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return c
}

var serial = big.NewInt(1)

func template(t *x509.Certificate) *x509.Certificate {
	serial = new(big.Int).Add(serial, big.NewInt(1))
	t.SerialNumber = serial
	t.NotBefore = time.Now().Add(-time.Hour)
	t.NotAfter = time.Now().Add(24 * time.Hour)
	return t
}

func newCA(tb testing.TB, dir, name, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key := newKey(tb)
	t := template(&x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	der, err := x509.CreateCertificate(rand.Reader, t, t, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("etcdtest: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("etcdtest: CA: %v", err)
	}
	writePEM(tb, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	return cert, key
}

func leaf(tb testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, t *x509.Certificate) (certFile, keyFile string) {
	tb.Helper()
	key := newKey(tb)
	t.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, template(t), ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("etcdtest: certificate %s: %v", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("etcdtest: key %s: %v", name, err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("etcdtest: key: %v", err)
	}
	return key
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
}

// String names the directory, for test logs.
func (c *Certs) String() string { return fmt.Sprintf("certs in %s", c.Dir) }
