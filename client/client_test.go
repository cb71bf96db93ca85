package client_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/workspace"
)

// serve runs h on a unix socket in a temporary directory.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "loopr.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return sock
}

func dial(sock string) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(2*time.Second))
	defer cancel()
	return client.Dial(ctx, sock)
}

func TestDialWithoutDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	tests := []struct{ name, sock string }{
		{"missing socket", filepath.Join(dir, "missing.sock")},
		{"stale socket", stale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dial(tt.sock)
			if !errors.Is(err, client.ErrNoDaemon) {
				t.Errorf("Dial(%s) = %v; want ErrNoDaemon", tt.name, err)
			}
		})
	}
}

func TestDialChecksProtocol(t *testing.T) {
	t.Parallel()
	sock := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.Status{Daemon: true, PID: 42, Protocol: api.ProtocolVersion + 98, Version: "9.9.9"})
	}))
	_, err := dial(sock)
	var ve *client.VersionError
	if !errors.As(err, &ve) || ve.Daemon != api.ProtocolVersion+98 || ve.Client != api.ProtocolVersion {
		t.Fatalf("Dial() = %v; want a *VersionError naming both versions", err)
	}
	for _, want := range []string{fmt.Sprintf("protocol %d", api.ProtocolVersion+98), fmt.Sprintf("protocol %d", api.ProtocolVersion), "9.9.9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Dial() error %q does not mention %q", err, want)
		}
	}
	if errors.Is(err, client.ErrNoDaemon) {
		t.Errorf("a daemon of another version is not ErrNoDaemon")
	}
}

func TestDialNotLoopr(t *testing.T) {
	t.Parallel()
	sock := serve(t, http.NotFoundHandler())
	_, err := dial(sock)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 404 || errors.Is(err, client.ErrNoDaemon) {
		t.Errorf("Dial(something else) = %v; want a 404 APIError, not ErrNoDaemon", err)
	}
}

func TestAPIErrorUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		usage  bool
	}{
		{400, true}, {404, true}, {409, true}, {413, true}, {500, false}, {503, false},
	}
	for _, tt := range tests {
		e := &client.APIError{Status: tt.status, Code: "x", Message: "m"}
		if got := e.Usage(); got != tt.usage {
			t.Errorf("APIError{Status: %d}.Usage() = %v, want %v", tt.status, got, tt.usage)
		}
	}
	if got := (&client.APIError{Status: 500}).Error(); !strings.Contains(got, "500") {
		t.Errorf("APIError without message = %q; want the status", got)
	}
}

// TestAgainstDaemon drives the error mapping, the event stream's end and
// Close against a real daemon.
func TestAgainstDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths := workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Paths: paths, Version: "t", Ready: func(int) { close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("daemon.Run() = %v", err)
	}
	c, err := dial(paths.Socket())
	if err != nil {
		t.Fatalf("Dial() = %v", err)
	}
	defer c.Close()

	_, err = c.Act(context.Background(), "nope", api.ActionCancel, api.ActionRequest{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != api.CodeNotFound || !ae.Usage() || !strings.Contains(ae.Message, "nope") {
		t.Errorf("Act(unknown) = %#v; want a 404 not_found APIError naming the id", err)
	}

	sctx, scancel := context.WithCancel(context.Background())
	ch, err := c.Events(sctx)
	if err != nil {
		t.Fatalf("Events() = %v", err)
	}
	if m := <-ch; m.Type != api.StreamSnapshot {
		t.Errorf("first message = %q, want snapshot", m.Type)
	}
	scancel()
	for range ch { // closes once the context ends
	}

	ch, err = c.Events(context.Background())
	if err != nil {
		t.Fatalf("Events() = %v", err)
	}
	<-ch
	cancel() // the daemon stops: the stream must end
	timeout := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-timeout:
			t.Fatal("event stream still open 10s after the daemon stopped")
		}
	}
	if _, err := c.Status(context.Background()); err == nil {
		t.Error("Status() after the daemon stopped = nil error")
	}
}

func TestDialTooLongPath(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), strings.Repeat("h", 120), "loopr.sock")
	if _, err := dial(sock); !errors.Is(err, client.ErrNoDaemon) || !strings.Contains(err.Error(), "too long") {
		t.Errorf("Dial(long path) = %v; want ErrNoDaemon saying the path is too long", err)
	}
}
