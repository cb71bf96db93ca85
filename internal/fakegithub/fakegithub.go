// Package fakegithub is a local fake of the GitHub API for tests of
// `loopr pr` with the real gh CLI: the GitHub Enterprise form gh speaks to
// a host given by GH_HOST (https://HOST/api/v3/ and /api/graphql), over
// TLS with a certificate made for the test, which gh trusts through
// SSL_CERT_FILE. It keeps pull requests in memory and records every
// request.
package fakegithub

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// PR is a pull request the fake holds.
type PR struct {
	Number  int    `json:"number"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	Head    string `json:"head"` // "OWNER:BRANCH" as created
	Base    string `json:"base"`
	Draft   bool   `json:"draft"`
	State   string `json:"state"`
	HTMLURL string `json:"html_url"`
}

// Request is one request the fake received.
type Request struct {
	Method, Path, Query, Auth string
	Body                      string
}

// Server is a running fake.
type Server struct {
	Host   string // 127.0.0.1:PORT, for GH_HOST
	CAFile string // the PEM certificate to trust (SSL_CERT_FILE)
	Token  string // the token it accepts (GH_ENTERPRISE_TOKEN)

	srv   *httptest.Server
	mu    sync.Mutex
	pulls map[string][]*PR // "owner/repo" → its pull requests
	reqs  []Request
}

// Start runs a fake on 127.0.0.1 with a new certificate for 127.0.0.1
// and localhost, written to a file under t.TempDir(); it stops with the
// test.
func Start(t testing.TB) *Server {
	t.Helper()
	cert, certPEM, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Token: "fake-token-" + strconv.FormatInt(time.Now().UnixNano(), 36), pulls: map[string][]*PR{}}
	s.CAFile = filepath.Join(t.TempDir(), "fakegithub-ca.pem")
	if err := os.WriteFile(s.CAFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Host = s.srv.Listener.Addr().String() // before it serves: the handler reads it
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Pulls returns the pull requests of owner/repo.
func (s *Server) Pulls(repo string) []PR {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PR
	for _, p := range s.pulls[repo] {
		out = append(out, *p)
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: string(body)})
	if r.Header.Get("Authorization") != "token "+s.Token {
		reply(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	w.Header().Set("X-Oauth-Scopes", "repo, read:org, gist")
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.URL.Path == "/api/graphql":
		reply(w, http.StatusOK, map[string]any{"data": map[string]any{"viewer": map[string]string{"login": "tester"}}})
	case path == "" || path == "/":
		reply(w, http.StatusOK, map[string]string{"current_user_url": "https://" + s.Host + "/api/v3/user"})
	case path == "/user":
		reply(w, http.StatusOK, map[string]string{"login": "tester"})
	case len(parts) >= 4 && parts[0] == "repos" && parts[3] == "pulls":
		s.pullsRoute(w, r, parts[1]+"/"+parts[2], parts[4:], body)
	default:
		reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
}

// pullsRoute serves /repos/OWNER/REPO/pulls[/N].
func (s *Server) pullsRoute(w http.ResponseWriter, r *http.Request, repo string, rest []string, body []byte) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		head, state := r.URL.Query().Get("head"), r.URL.Query().Get("state")
		out := []map[string]any{}
		for _, p := range s.pulls[repo] {
			if (head == "" || p.Head == head) && (state == "" || state == "all" || p.State == state) {
				out = append(out, p.wire(s.Host, repo))
			}
		}
		reply(w, http.StatusOK, out)
	case len(rest) == 0 && r.Method == http.MethodPost:
		var in struct {
			Title, Body, Head, Base string
			Draft                   bool
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Head == "" || in.Base == "" || in.Title == "" {
			reply(w, http.StatusUnprocessableEntity, map[string]string{"message": fmt.Sprintf("Validation Failed: %v", err)})
			return
		}
		if !strings.Contains(in.Head, ":") {
			in.Head = strings.Split(repo, "/")[0] + ":" + in.Head
		}
		p := &PR{Number: len(s.pulls[repo]) + 1, Title: in.Title, Body: in.Body, Head: in.Head, Base: in.Base, Draft: in.Draft, State: "open"}
		p.HTMLURL = fmt.Sprintf("https://%s/%s/pull/%d", s.Host, repo, p.Number)
		s.pulls[repo] = append(s.pulls[repo], p)
		reply(w, http.StatusCreated, p.wire(s.Host, repo))
	case len(rest) == 1 && r.Method == http.MethodPatch:
		n, _ := strconv.Atoi(rest[0])
		if n < 1 || n > len(s.pulls[repo]) {
			reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		p := s.pulls[repo][n-1]
		var in map[string]any
		if err := json.Unmarshal(body, &in); err != nil {
			reply(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
			return
		}
		if v, ok := in["title"].(string); ok {
			p.Title = v
		}
		if v, ok := in["body"].(string); ok {
			p.Body = v
		}
		if v, ok := in["base"].(string); ok {
			p.Base = v
		}
		reply(w, http.StatusOK, p.wire(s.Host, repo))
	default:
		reply(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
	}
}

// wire is p as GitHub's REST API answers it (the fields gh and loopr read).
func (p *PR) wire(host, repo string) map[string]any {
	owner, branch, _ := strings.Cut(p.Head, ":")
	return map[string]any{
		"number": p.Number, "title": p.Title, "body": p.Body, "state": p.State, "draft": p.Draft,
		"html_url": p.HTMLURL, "url": fmt.Sprintf("https://%s/api/v3/repos/%s/pulls/%d", host, repo, p.Number),
		"head": map[string]any{"ref": branch, "label": p.Head, "user": map[string]string{"login": owner}},
		"base": map[string]any{"ref": p.Base},
	}
}

func reply(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

// selfSigned makes a certificate for 127.0.0.1 and localhost that is its
// own CA, and its PEM.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "fakegithub"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, certPEM, err
}
