package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// api checks the `api:` section: listen is host:port, and a listener
// needs a token file. The file itself (present, private, not empty) is the
// daemon's to check when it starts.
func (v *checker) api(a API) {
	if a.WebListen != "" {
		if host, ok := v.hostPort("api.web_listen", a.WebListen); ok && a.Listen == "" && a.TokenFile == "" && !LoopbackHost(host) {
			v.fail("api.web_listen", "%q is not a loopback address: set api.token_file too, so the dashboard asks for its token", a.WebListen)
		}
	}
	if a.Listen == "" {
		return
	}
	v.hostPort("api.listen", a.Listen)
	if a.TokenFile == "" {
		v.fail("api.token_file", "required with api.listen: every TCP request must carry the bearer token this file holds")
	}
}

// hostPort checks that s, the value of key, is host:port and returns the host.
func (v *checker) hostPort(key, s string) (string, bool) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		v.fail(key, `want host:port, e.g. "127.0.0.1:7070" (%v)`, err)
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.fail(key, "port %q: want a number from 0 to 65535", port)
		return "", false
	}
	return host, true
}

// LoopbackHost reports whether host (of a host:port) names only this
// machine: localhost or a loopback IP. "" and 0.0.0.0 mean every address.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// store checks the `store:` section: a known backend, and for etcd at
// least one endpoint URL, a prefix that names the store, a positive dial
// timeout, and TLS and password settings that go together.
func (v *checker) store(s Store) {
	switch s.Backend {
	case "bbolt":
		return
	case "etcd":
	default:
		v.fail("store.backend", "%q: want bbolt (the file <home>/loopr.db) or etcd", s.Backend)
		return
	}
	e := s.Etcd
	if len(e.Endpoints) == 0 {
		v.fail("store.etcd.endpoints", `required with store.backend etcd: the client URLs of the etcd cluster, e.g. ["http://127.0.0.1:2379"]`)
	}
	for i, ep := range e.Endpoints {
		u, err := url.Parse(ep)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
			v.fail(fmt.Sprintf("store.etcd.endpoints[%d]", i), "%q: want an http or https URL with host:port, e.g. http://127.0.0.1:2379", ep)
		case badPort(u) != "":
			v.fail(fmt.Sprintf("store.etcd.endpoints[%d]", i), "%q: %s", ep, badPort(u))
		}
	}
	if p := e.Prefix; p != "" && (!strings.HasPrefix(p, "/") || strings.Trim(p, "/") == "") {
		v.fail("store.etcd.prefix", "%q: must start with / and name the store, e.g. /loopr/myrepo", p)
	}
	v.positive("store.etcd.dial_timeout_secs", e.DialTimeoutSecs)
	if (e.Username == "") != (e.Password == "") {
		v.fail("store.etcd.username", "username and password go together: set both or neither")
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		v.fail("store.etcd.cert_file", "cert_file and key_file go together: set both or neither")
	}
}

// worker checks the `worker:` section and git.remote.
func (v *checker) worker(w Worker, g Git) {
	if w.Name != "" && !validWorkerName(w.Name) {
		v.fail("worker.name", "%q: use letters, digits, '.', '_' and '-' (at most 64), e.g. build-1", w.Name)
	}
	if w.MaxLoops < 0 {
		v.fail("worker.max_loops", "%d: want 0 (the global cap concurrency.max_loops) or more", w.MaxLoops)
	}
	for i, l := range w.Labels {
		if !validWorkerName(l) {
			v.fail(fmt.Sprintf("worker.labels[%d]", i), "%q: use letters, digits, '.', '_' and '-' (at most 64)", l)
		}
	}
	if w.LeaseTTLSecs < 2 || w.LeaseTTLSecs > 300 {
		v.fail("worker.lease_ttl_secs", "%d: want 2 to 300 seconds (15 is the default)", w.LeaseTTLSecs)
	}
	if g.Remote != "" && (strings.HasPrefix(g.Remote, "-") || strings.ContainsAny(g.Remote, " \t\n:/\\") || strings.Contains(g.Remote, "..")) {
		v.fail("git.remote", "%q: want the name of a git remote of the repository, e.g. origin", g.Remote)
	}
}

// validWorkerName reports whether s is a worker name or label: 1 to 64 of
// [A-Za-z0-9._-], not starting with '-' or '.'.
func validWorkerName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' || s[0] == '.' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// badPort says what is wrong with the port u names ("" when it names none
// or a good one): url.Parse takes any digits, 99999 included.
func badPort(u *url.URL) string {
	p := u.Port()
	if p == "" {
		if strings.HasSuffix(u.Host, ":") {
			return "port missing after the colon: want a number from 1 to 65535, or no colon"
		}
		return ""
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port %s: want a number from 1 to 65535", p)
	}
	return ""
}
