package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// startProxy runs a Proxy admitting allow on a fresh socket and returns a
// dialer of that socket and the targets it refused so far.
func startProxy(t *testing.T, allow ...string) (dial func() net.Conn, refused func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	p := &Proxy{Allow: allow, Refused: func(target string) { mu.Lock(); got = append(got, target); mu.Unlock() }}
	dir, stop, err := p.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return func() net.Conn {
			c, err := net.Dial("unix", filepath.Join(dir, SocketName))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), got...)
		}
}

func hello(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, u.Host
}

func TestProxyConnect(t *testing.T) {
	t.Parallel()
	_, allowed := hello(t)
	_, other := hello(t)
	dial, refused := startProxy(t, allowed)

	c := dial()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", allowed, allowed)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT %s (allowed): %v %v, want 200", allowed, resp, err)
	}
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", allowed)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello /x" {
		t.Errorf("through the tunnel: %q, want %q", body, "hello /x")
	}

	c = dial()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", other, other)
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT %s (not allowed): %v %v, want 403", other, resp, err)
	}
	body, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "not in sandbox.allow_hosts") {
		t.Errorf("403 body %q: want it to say why", body)
	}
	if got := refused(); len(got) != 1 || got[0] != other {
		t.Errorf("refused %q, want [%s]", got, other)
	}
}

// TestProxyAbsoluteForm: a plain-http request through the proxy (what
// HTTP_PROXY makes of an http:// URL) is forwarded when its host is
// allowed, refused with 403 otherwise.
func TestProxyAbsoluteForm(t *testing.T) {
	t.Parallel()
	_, allowed := hello(t)
	_, other := hello(t)
	dial, refused := startProxy(t, allowed)
	for _, tc := range []struct {
		host string
		code int
		body string
	}{{allowed, 200, "hello /abs"}, {other, 403, ""}} {
		c := dial()
		fmt.Fprintf(c, "GET http://%s/abs HTTP/1.1\r\nHost: %s\r\nProxy-Connection: keep-alive\r\n\r\n", tc.host, tc.host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("GET http://%s/abs: %v", tc.host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.code || tc.body != "" && string(body) != tc.body {
			t.Errorf("GET http://%s/abs: %d %q, want %d %q", tc.host, resp.StatusCode, body, tc.code, tc.body)
		}
	}
	if got := refused(); len(got) != 1 || got[0] != other {
		t.Errorf("refused %q, want [%s]", got, other)
	}
}

func TestProxyAdmits(t *testing.T) {
	t.Parallel()
	p := &Proxy{Allow: []string{"API.Anthropic.com:443"}}
	for target, want := range map[string]bool{
		"api.anthropic.com:443": true, "api.anthropic.com:80": false, "evil.com:443": false, "api.anthropic.com": false,
	} {
		if got := p.Admits(target); got != want {
			t.Errorf("Admits(%q) = %v, want %v", target, got, want)
		}
	}
}

// TestProxyStopEndsTunnels: stopping the proxy ends an open tunnel (a
// stuck upstream must not keep an iteration's cleanup waiting).
func TestProxyStopEndsTunnels(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	p := &Proxy{Allow: []string{ln.Addr().String()}}
	dir, stop, err := p.Listen()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", ln.Addr())
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	stop() // returns only once every tunnel's goroutines are gone
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the tunnel is still open after stop")
	}
}
