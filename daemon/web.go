package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/web"
)

// The web dashboard (api.web, package web, docs/web.md). With api.listen
// it shares the TCP listener: /v1/ and /metrics stay behind the bearer
// token, every other path is the dashboard, which asks for the same token
// once and keeps a session cookie. Without api.listen it gets a listener
// of its own on api.web_listen (default 127.0.0.1, a free port), and its
// token is api.token_file's when set, else one the daemon generates once
// in <home>/web.token (0600). A non-loopback address without
// api.token_file is refused at start. The dashboard reads and acts through
// a client of the daemon's own socket, like any other client.

// webTokenFile is the generated token's file in the home.
const webTokenFile = "web.token"

// webMount is the dashboard as the daemon serves it.
type webMount struct {
	srv *web.Server
	url string // e.g. http://127.0.0.1:41234/
}

// newWeb builds the dashboard when api.web is on (nil otherwise). token
// is api.token_file's, nil when there is none.
func (d *daemon) newWeb(cfg *config.Config, token []byte) (*web.Server, error) {
	if !cfg.API.Web {
		return nil, nil
	}
	if token == nil {
		var err error
		if token, err = generatedToken(filepath.Join(d.paths.Home, webTokenFile)); err != nil {
			return nil, err
		}
	}
	sock := d.paths.Socket()
	return web.New(web.Options{
		Token: token,
		Log:   d.log,
		Dial: func(ctx context.Context) (web.Backend, error) {
			return client.Dial(ctx, sock)
		},
	})
}

// generatedToken reads the token the daemon generated in path, or makes
// one (32 random bytes, hex) when there is none yet or it is not private.
func generatedToken(path string) ([]byte, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 == 0 {
		if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= web.MinTokenLen {
			return []byte(strings.TrimSpace(string(b))), nil
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("web token %s: %w", path, err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("web token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("web token: %w", err)
	}
	return []byte(tok), nil
}

// splitWeb serves the API's paths with apiH and every other path with
// webH (the dashboard) on one listener.
func splitWeb(apiH, webH http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/metrics" {
			apiH.ServeHTTP(w, r)
			return
		}
		webH.ServeHTTP(w, r)
	})
}

// listenWeb opens the dashboard's own listener on api.web_listen. A
// non-loopback address is refused without api.token_file.
func listenWeb(cfg *config.Config, h http.Handler, log *slog.Logger) (*tcpServer, error) {
	addr := cfg.API.WebListen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("api.web_listen: %w", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		if cfg.API.TokenFile == "" {
			ln.Close()
			return nil, fmt.Errorf("api.web_listen %s is not a loopback address: refused without api.token_file (the token the dashboard asks for); set one, or listen on 127.0.0.1", addr)
		}
		log.Warn("the web dashboard listens beyond this machine without TLS: its token and cookie cross the network in clear text", "web", ln.Addr().String())
	}
	return serveTCP(ln, h, log), nil
}

// serveTCP serves h on ln until shutdown.
func serveTCP(ln net.Listener, h http.Handler, log *slog.Logger) *tcpServer {
	t := &tcpServer{ln: ln, done: make(chan error, 1), srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	go func() { t.done <- t.srv.Serve(ln) }()
	return t
}

// webURL is the dashboard's address as a browser elsewhere reaches it: an
// unspecified address (0.0.0.0, ::) becomes this machine's first
// non-loopback address.
func webURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + "/"
	}
	ip := ta.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, x := range addrs {
				if n, ok := x.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
					ip = n.IP
					break
				}
			}
		}
	}
	return "http://" + net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port)) + "/"
}

// webLogin is POST /v1/web/login: the dashboard's URL and a one-time
// login link (`loopr web`).
func (d *daemon) webLogin(w http.ResponseWriter, r *http.Request) error {
	m := d.web.Load()
	if m == nil {
		writeError(w, http.StatusConflict, api.CodeConflict, "the web dashboard is off: set api.web: true in loopr.yml and restart the daemon")
		return nil
	}
	link, exp := m.srv.LoginLink(m.url)
	return writeJSON(w, http.StatusOK, api.WebLogin{URL: m.url, LoginURL: link, ExpiresAt: exp.UTC()})
}
