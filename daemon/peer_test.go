package daemon

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestPeerListenerChecksUID runs real connections through the SO_PEERCRED
// check: a listener expecting this process's uid accepts them, one
// expecting another uid drops them before reading.
func TestPeerListenerChecksUID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		uid    int
		accept bool
	}{
		{"same uid", os.Getuid(), true},
		{"other uid", os.Getuid() + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sock := filepath.Join(t.TempDir(), "s.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			pl := &peerListener{Listener: ln, uid: tt.uid, log: slog.New(slog.DiscardHandler)}
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := pl.Accept()
				if err == nil {
					accepted <- c
				}
				close(accepted)
			}()
			conn, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if tt.accept {
				c, ok := <-accepted
				if !ok {
					t.Fatal("Accept() refused a peer of the same uid")
				}
				c.Close()
				ln.Close()
				return
			}
			// The refused connection is closed by the daemon: the peer reads EOF.
			_, err = conn.Read(make([]byte, 1))
			if !errors.Is(err, io.EOF) {
				t.Errorf("peer of another uid read %v; want EOF (connection closed)", err)
			}
			ln.Close() // ends the Accept loop
			if c, ok := <-accepted; ok {
				c.Close()
				t.Error("Accept() returned a connection from another uid")
			}
		})
	}
}

func TestPeerCredReportsThisProcess(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("unix", sock)
		if err == nil {
			defer c.Close()
			c.Read(make([]byte, 1))
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uid, pid, err := peerCred(c)
	wantPID := os.Getpid()
	if runtime.GOOS != "linux" {
		wantPID = 0 // only Linux reports the peer's pid
	}
	if err != nil || uid != os.Getuid() || pid != wantPID {
		t.Errorf("peerCred() = uid %d pid %d, %v; want %d %d", uid, pid, err, os.Getuid(), wantPID)
	}
}
