package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
)

// The optional TCP listener (api.listen in loopr.yml). The unix socket is
// guarded by its file mode and SO_PEERCRED; a TCP port has neither, so
// every request on it must carry the token of api.token_file as
// `Authorization: Bearer <token>`, compared in constant time, or get a 401
// JSON error. The daemon refuses to start when the token file is missing,
// empty, too short, not its own, or readable or writable by other users.

// MinTokenLen is the shortest bearer token the daemon accepts.
const MinTokenLen = 16

// apiToken reads and checks the token file when the configuration asks for
// a TCP listener; it returns nil when there is none.
func apiToken(cfg *config.Config) ([]byte, error) {
	if cfg.API.Listen == "" && !(cfg.API.Web && cfg.API.TokenFile != "") { // the dashboard asks for it too (web.go)
		return nil, nil
	}
	path := cfg.TokenPath()
	fail := func(format string, args ...any) error {
		return fmt.Errorf("api.token_file %s: "+format, append([]any{path}, args...)...)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fail("%v", errors.Unwrap(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fail("not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fail("mode %04o lets other users read or change the token; run chmod 600 %s", perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fail("owned by uid %d, not by the daemon's user (uid %d)", st.Uid, os.Geteuid())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fail("%v", errors.Unwrap(err))
	}
	tok := bytes.TrimSpace(b)
	switch {
	case len(tok) == 0:
		return nil, fail("empty")
	case bytes.ContainsAny(tok, "\r\n"):
		return nil, fail("more than one line: the token is the file's only line")
	case len(tok) < MinTokenLen:
		return nil, fail("token too short (%d characters, want at least %d; e.g. openssl rand -hex 32)", len(tok), MinTokenLen)
	}
	return tok, nil
}

// bearer serves h to requests that carry token, and answers every other
// request 401. Both sides are hashed first, so the comparison takes the
// same time whatever the length or content of what was sent.
func bearer(token []byte, log *slog.Logger, h http.Handler) http.Handler {
	want := sha256.Sum256(token)
	var mu sync.Mutex
	var last time.Time // last refusal logged
	suppressed := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !strings.EqualFold(scheme, "Bearer") {
			// At most one line a second: a flood of bad requests must
			// not fill the disk with the log.
			mu.Lock()
			if now := time.Now(); now.Sub(last) >= time.Second {
				log.Warn("refused API request without the bearer token", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "more_refused", suppressed)
				last, suppressed = now, 0
			} else {
				suppressed++
			}
			mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Bearer realm="loopr"`)
			writeError(w, http.StatusUnauthorized, api.CodeUnauthorized,
				"missing or wrong bearer token: send Authorization: Bearer <the token in api.token_file>")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// tcpServer is the API on api.listen.
type tcpServer struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// listenTCP opens the TCP listener of cfg (nil when none is configured)
// and serves h behind the bearer token; with webH (api.web), every path
// but the API's is the dashboard (web.go).
func listenTCP(cfg *config.Config, token []byte, h, webH http.Handler, log *slog.Logger) (*tcpServer, error) {
	if cfg.API.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.API.Listen)
	if err != nil {
		return nil, fmt.Errorf("api.listen: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		log.Warn("the API listens beyond this machine without TLS: the bearer token crosses the network in clear text", "tcp", addr.String())
	}
	h = bearer(token, log, h)
	if webH != nil {
		h = splitWeb(h, webH)
	}
	t := serveTCP(ln, h, log)
	log.Info("api listening", "tcp", addr.String())
	return t, nil
}

// shutdown stops the TCP server, waiting for requests in flight until ctx ends.
func (t *tcpServer) shutdown(ctx context.Context, log *slog.Logger) {
	if t == nil {
		return
	}
	if err := t.srv.Shutdown(ctx); err != nil {
		log.Warn("tcp api shutdown", "err", err)
		t.srv.Close()
	}
	<-t.done
}
