package sandbox

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// Shim is `loopr sandbox-shim --proxy SOCKET [--tunnel HOST:PORT]... --
// ARGV...`, which loopr runs inside a sandbox with network allow, in front
// of the agent. In the empty network namespace nothing reaches the proxy's
// unix socket but through it: it listens on 127.0.0.1 (a free port) and
// forwards every connection to the socket as it is, and gives the agent
// HTTP_PROXY and HTTPS_PROXY (and the lowercase ones) naming it; for each
// --tunnel, a loopback host:port of the allow list (a local API), it
// listens on that address and tunnels each connection through the proxy
// with CONNECT, so a plain http:// base URL works, and adds the host to
// NO_PROXY. It passes on the environment it got otherwise unchanged, runs
// ARGV in its own process group's place (the same group), ignores the
// SIGTERM and SIGINT the group gets (the agent gets them too, and the shim
// keeps forwarding while the agent shuts down), and exits as ARGV did.
func Shim(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(ShimCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("proxy", "", "the proxy's unix socket")
	var tunnels listFlag
	fs.Var(&tunnels, "tunnel", "a loopback host:port to tunnel through the proxy (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if *sock == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "loopr sandbox-shim: usage: --proxy SOCKET [--tunnel HOST:PORT]... -- ARGV...")
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(stderr, "loopr sandbox-shim: %v\n", err)
		return 1
	}
	go accept(ln, func(c net.Conn) { forward(c, *sock, "") })
	var noProxy []string
	for _, t := range tunnels {
		tl, err := net.Listen("tcp", t)
		if err != nil {
			fmt.Fprintf(stderr, "loopr sandbox-shim: tunnel %s: %v\n", t, err)
			return 1
		}
		go accept(tl, func(c net.Conn) { forward(c, *sock, t) })
		host, _, _ := net.SplitHostPort(t)
		noProxy = append(noProxy, host)
	}
	env := shimEnv(os.Environ(), "http://"+ln.Addr().String(), noProxy)

	// Caught, not ignored: the agent (exec resets what is caught) keeps
	// the default dispositions.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "loopr sandbox-shim: %v\n", err)
		return 127
	}
	err = cmd.Wait()
	signal.Stop(sigs)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(stderr, "loopr sandbox-shim: %v\n", err)
		return 1
	}
	return 0
}

// shimEnv is env with the proxy variables set to proxy and the hosts of
// noProxy added to NO_PROXY.
func shimEnv(env []string, proxy string, noProxy []string) []string {
	set := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		set[k] = proxy
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		v := strings.Join(noProxy, ",")
		if old := Getenv(env, k); old != "" && v != "" {
			v = old + "," + v
		} else if old != "" {
			v = old
		}
		if v != "" {
			set[k] = v
		}
	}
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); set[k] == "" {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy"} {
		if v := set[k]; v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func accept(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go serve(c)
	}
}

// forward connects c to the proxy's socket: as it is when target is "",
// else through a CONNECT to target.
func forward(c net.Conn, sock, target string) {
	defer c.Close()
	up, err := net.Dial("unix", sock)
	if err != nil {
		return
	}
	defer up.Close()
	var from io.Reader = up
	if target != "" {
		fmt.Fprintf(up, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(up)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			return
		}
		from = br
	}
	splice(c, c, up, from)
}
