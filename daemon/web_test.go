package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
)

// TestWebOpenBindRefused: the dashboard's own listener on an address
// beyond loopback is refused without api.token_file, and allowed with it.
func TestWebOpenBindRefused(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	h := http.NotFoundHandler()
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		cfg := config.Default()
		cfg.API.Web, cfg.API.WebListen = true, addr
		ws, err := listenWeb(cfg, h, log)
		if err == nil || !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), "api.token_file") {
			ws.shutdown(context.Background(), log)
			t.Errorf("web_listen %s without a token file: %v; want a refusal naming api.token_file", addr, err)
		}
		cfg.API.TokenFile = "token"
		ws, err = listenWeb(cfg, h, log)
		if err != nil {
			if strings.Contains(addr, "::") {
				continue // no IPv6 here
			}
			t.Errorf("web_listen %s with a token file: %v", addr, err)
			continue
		}
		if u := webURL(ws.ln.Addr()); strings.Contains(u, "0.0.0.0") || strings.Contains(u, "[::]") {
			t.Errorf("webURL(%s) = %s; want an address a browser can reach", ws.ln.Addr(), u)
		}
		ws.shutdown(context.Background(), log)
	}
	cfg := config.Default()
	cfg.API.Web = true // web_listen "": 127.0.0.1 on a free port, no token file needed
	ws, err := listenWeb(cfg, h, log)
	if err != nil {
		t.Fatalf("default web_listen: %v", err)
	}
	defer ws.shutdown(context.Background(), log)
	if u := webURL(ws.ln.Addr()); !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Errorf("default web_listen URL %s; want 127.0.0.1", u)
	}
}

// TestSplitWeb: on the shared TCP listener the API keeps its bearer token
// and every other path is the dashboard's.
func TestSplitWeb(t *testing.T) {
	t.Parallel()
	apiH := bearer([]byte("0123456789abcdef"), slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("api"))
	}))
	webH := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("web")) })
	h := splitWeb(apiH, webH)
	for path, want := range map[string]int{"/v1/status": 401, "/metrics": 401, "/": 200, "/loop/x": 200, "/v1": 200} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("GET %s without a bearer token: %d; want %d", path, rec.Code, want)
		}
	}
}

// TestGeneratedToken: the dashboard's own token is made once, private,
// and kept across starts; one others could read is replaced.
func TestGeneratedToken(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), webTokenFile)
	a, err := generatedToken(path)
	if err != nil || len(a) < 32 {
		t.Fatalf("generatedToken = %q, %v", a, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v; want 0600", fi.Mode().Perm())
	}
	if b, _ := generatedToken(path); string(b) != string(a) {
		t.Errorf("second start: token %q; want the first one kept", b)
	}
	os.Chmod(path, 0o644)
	if c, _ := generatedToken(path); string(c) == string(a) {
		t.Errorf("a world-readable token was kept")
	}
}
