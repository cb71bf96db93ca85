package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/api"
)

// peerListener drops every connection whose peer runs as another uid,
// before the HTTP server reads from it. The socket's mode (0600) and the
// home's (0700) already keep others out; this is the second lock.
type peerListener struct {
	net.Listener
	uid int
	log *slog.Logger
}

// Accept returns the next connection from a peer of the daemon's uid.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := peerCred(c)
		if err != nil {
			l.log.Warn("refused connection: peer credentials unknown", "err", err)
			c.Close()
			continue
		}
		if uid != l.uid {
			l.log.Warn("refused connection from another user", "peer_uid", uid, "peer_pid", pid)
			c.Close()
			continue
		}
		return c, nil
	}
}

// errNotUnix is returned for connections that are not unix sockets.
var errNotUnix = errors.New("not a unix socket connection")

// probe reports whether something answers on the socket, and the pid a
// loopr daemon there reports (0 when it does not say).
func probe(sock string) (pid int, answers bool) {
	conn, err := net.DialTimeout("unix", sock, 500*time.Millisecond)
	if err != nil {
		return 0, false // missing, refused (stale) or not a socket
	}
	conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://loopr/v1/status", nil)
	if err != nil {
		return 0, true
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, true
	}
	defer resp.Body.Close()
	var st api.Status
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return 0, true
	}
	return st.PID, true
}

// rawConn returns the syscall view of a unix connection.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNotUnix, c)
	}
	return uc.SyscallConn()
}

// SocketPID returns the pid, as this process sees it, of the process
// listening on sock, from the kernel (SO_PEERCRED) rather than from what
// the daemon says: the two differ across pid namespaces, and a signal must
// go to the process this one sees. An error where the OS cannot tell.
func SocketPID(sock string) (int, error) {
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_, pid, err := peerCred(conn)
	if err == nil && pid <= 0 {
		err = errors.New("the kernel did not say the peer's pid")
	}
	return pid, err
}
