package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// dialTimeout bounds the proxy's connection to an admitted host.
const dialTimeout = 30 * time.Second

// Proxy is the HTTP proxy of network allow: it admits a CONNECT (and a
// plain-http request in absolute form) to a host:port of Allow, compared
// without regard to case, and refuses anything else with 403 Forbidden,
// telling Refused.
type Proxy struct {
	Allow   []string
	Refused func(target string) // may be nil; must not block
	// Dial connects to an admitted target; nil: net.Dialer with a timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool // Serve returned: connections are closed as they come
	wg     sync.WaitGroup
}

// Listen starts p on a fresh unix socket, dir/SocketName in a new
// directory under the system's temporary directory (a socket's path is
// limited to about 100 bytes: loopr's home may be deeper). Closing the
// returned closer stops p, ends its open tunnels and removes the
// directory. dir is what Run.Proxy names.
func (p *Proxy) Listen() (dir string, stop func(), err error) {
	dir, err = os.MkdirTemp("", "loopr-proxy-")
	if err != nil {
		return "", nil, fmt.Errorf("sandbox proxy: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // bwrap binds it as it is
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("sandbox proxy: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("sandbox proxy: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Serve(ln)
	}()
	return dir, func() {
		ln.Close()
		<-done
		os.RemoveAll(dir)
	}, nil
}

// Serve answers the connections of ln until it is closed, then ends the
// tunnels still open and returns once their goroutines are gone.
func (p *Proxy) Serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			break
		}
		p.track(c, true)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			defer c.Close()
			p.handle(c)
		}()
	}
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	p.wg.Wait()
}

// track adds c to (or removes it from) the connections Serve closes when
// it stops.
func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return
	}
	if p.closed {
		c.Close()
		return
	}
	if p.conns == nil {
		p.conns = map[net.Conn]struct{}{}
	}
	p.conns[c] = struct{}{}
}

// Admits reports whether target (host:port) is in the allow list.
func (p *Proxy) Admits(target string) bool {
	return slices.ContainsFunc(p.Allow, func(a string) bool { return strings.EqualFold(a, target) })
}

func (p *Proxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	target := req.Host
	if req.Method != http.MethodConnect {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			reply(c, http.StatusBadRequest, "loopr sandbox proxy: only CONNECT and absolute http:// requests\n")
			return
		}
		target = req.URL.Host
		if req.URL.Port() == "" {
			target = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	if !p.Admits(target) {
		if p.Refused != nil {
			p.Refused(target)
		}
		reply(c, http.StatusForbidden, fmt.Sprintf("loopr sandbox proxy: %s is not in sandbox.allow_hosts\n", target))
		return
	}
	dial := p.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	up, err := dial(context.Background(), "tcp", target)
	if err != nil {
		reply(c, http.StatusBadGateway, fmt.Sprintf("loopr sandbox proxy: %s: %v\n", target, err))
		return
	}
	p.track(up, true)
	defer p.track(up, false)
	defer up.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
	} else {
		// One request per connection: the next could be for another host.
		req.Close = true
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		if err := req.Write(up); err != nil {
			return
		}
	}
	splice(c, br, up, up)
}

// splice copies both ways between a and b, reading each through its
// reader (which may hold bytes already read), until both directions end.
func splice(a net.Conn, ar io.Reader, b net.Conn, br io.Reader) {
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(b, ar)
		closeWrite(b)
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(a, br)
		closeWrite(a)
		done <- struct{}{}
	}()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

func reply(c net.Conn, code int, body string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}
