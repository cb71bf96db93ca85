package daemon_test

import (
	"bytes"
	"context"
	"github.com/go-json-experiment/json/v1"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/workspace"
)

// FuzzAPI sends arbitrary requests — any method, path and body — to a real
// daemon over its socket. No answer is a 500, and every error is an
// api.Error JSON body. The event stream is left out (it never ends),
// redirects are not followed, and paths with spaces or control characters
// are not sent (they break the request line itself, which net/http
// refuses before loopr sees it). The committed corpus is in
// testdata/fuzz/FuzzAPI.
func FuzzAPI(f *testing.F) {
	dir := f.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Paths: paths, Config: testConfig(), Log: slog.New(slog.DiscardHandler),
			Version: "fuzz", Ready: func(pid int) { ready <- pid }})
	}()
	f.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		f.Fatalf("daemon.Run() = %v", err)
	case <-time.After(testslack.Scale(20 * time.Second)):
		f.Fatal("daemon not ready")
	}
	hc := socketHTTP(paths.Socket())
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	f.Cleanup(hc.CloseIdleConnections)

	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"}
	seeds := []struct {
		m          uint8
		path, body string
	}{
		{0, "/v1/status", ""},
		{0, "/v1/loops?status=pending,running&type=ralph", ""},
		{1, "/v1/loops", `{"type":"ralph","task":"fuzz","runnable_at":"2099-01-01T00:00:00Z"}`},
		{1, "/v1/loops", `{"type":`},
		{1, "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"a"},{"type":"dragon"}]}`},
		{1, "/v1/loops/nope/cancel", `{"reason":5}`},
		{1, "/v1/loops/..%2F..%2Fetc/pause", ``},
		{0, "/v1/loops/x/why?now=yesterday", ""},
		{0, "/v1/loops/x/output?bytes=-1", ""},
		{0, "/v1/scheduler?now=2026-01-01T00:00:00Z&x=1", ""},
		{1, "/v1/import", `{"id":"a"}` + "\n" + `{"id":`},
		{0, "/v1/export", ""},
		{0, "/metrics?format=x", ""},
		{3, "/v1/loops", ""},
		{0, "/v1/loops/" + strings.Repeat("a", 65), ""},
		{1, "/v1/gc", `{"dry_run":true}`},
		{0, "/v1/stats", ""},
	}
	for _, s := range seeds {
		f.Add(s.m, s.path, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, m uint8, path string, body []byte) {
		method := methods[int(m)%len(methods)]
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		if strings.Contains(strings.ToLower(path), "events") {
			return // the stream: an answer that never ends
		}
		if strings.ContainsFunc(path, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			// Not a request line: net/http answers its own plain-text
			// "400 Bad Request" before any route sees it.
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(10*time.Second))
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, method, "http://loopr"+path, bytes.NewReader(body))
		if err != nil {
			return // not a URL a client can send
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %q: %v", method, path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %q %q = %d: %s", method, path, body, resp.StatusCode, raw)
		}
		if resp.StatusCode >= 400 && method != "HEAD" {
			var e api.Error
			if err := json.Unmarshal(raw, &e); err != nil || e.Err.Code == "" || e.Err.Message == "" {
				t.Fatalf("%s %q = %d with body %q: not an api.Error", method, path, resp.StatusCode, raw)
			}
		}
	})
}
