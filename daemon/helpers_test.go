package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/workspace"
)

// testConfig runs agents as `true`, without git, approval, validation or
// a disk quota.
func testConfig(agent ...string) *config.Config {
	c := config.Default()
	c.Agent.Command = []string{"true"}
	if len(agent) > 0 {
		c.Agent.Command = agent
	}
	c.Git.Worktrees = false
	c.Storage.DiskQuotaMinGB = 0
	c.Loops = maps.Clone(c.Loops)
	for t, ls := range c.Loops {
		ls.Validate = nil
		if t == loop.Plan {
			ls.RequireApproval = false
		}
		c.Loops[t] = ls
	}
	return c
}

// syncBuffer is a log sink shared by the daemon's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testDaemon is a daemon running in this process on a temporary home.
type testDaemon struct {
	paths  workspace.Paths
	c      *client.Client
	pid    int
	cancel context.CancelFunc
	done   chan error
	log    *syncBuffer
}

// newPaths returns paths of a fresh workspace with its home inside.
func newPaths(t *testing.T) workspace.Paths {
	dir := t.TempDir()
	return workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}
}

// startDaemon runs daemon.Run on paths until the test ends, and returns
// once it serves, with a client dialled to it.
func startDaemon(t *testing.T, paths workspace.Paths, cfg *config.Config) *testDaemon {
	t.Helper()
	return startDaemonWith(t, paths, cfg, nil)
}

// startDaemonWith is startDaemon with a hook that adjusts the options.
func startDaemonWith(t *testing.T, paths workspace.Paths, cfg *config.Config, adjust func(*daemon.Options)) *testDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &testDaemon{paths: paths, cancel: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	ready := make(chan int, 1)
	log := slog.New(slog.NewTextHandler(d.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := daemon.Options{Paths: paths, Config: cfg, Log: log, Version: "test",
		Ready: func(pid int) { ready <- pid }}
	if adjust != nil {
		adjust(&o)
	}
	go func() { d.done <- daemon.Run(ctx, o) }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	select {
	case d.pid = <-ready:
	case err := <-d.done:
		d.done <- err
		t.Fatalf("daemon.Run() = %v before it was ready", err)
	case <-time.After(testslack.Scale(20 * time.Second)):
		t.Fatal("daemon not ready after 20s")
	}
	dctx, dcancel := context.WithTimeout(ctx, testslack.Scale(5*time.Second))
	defer dcancel()
	c, err := client.Dial(dctx, paths.Socket())
	if err != nil {
		t.Fatalf("client.Dial() = %v", err)
	}
	d.c = c
	return d
}

// stop cancels the daemon and returns Run's error (once; later calls
// return nil).
func (d *testDaemon) stop(t *testing.T) error {
	t.Helper()
	d.cancel()
	if d.c != nil {
		d.c.Close()
	}
	select {
	case err, ok := <-d.done:
		if ok {
			close(d.done)
		}
		return err
	case <-time.After(testslack.Scale(20 * time.Second)):
		t.Fatal("daemon did not stop within 20s")
		return nil
	}
}

// later is a runnable_at far enough ahead that the loop never starts
// during a test.
func later() time.Time { return time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond) }

// create makes a ralph loop that stays pending (its runnable_at is an hour
// away) unless runNow.
func create(t *testing.T, c *client.Client, title string, runNow bool) loop.Loop {
	t.Helper()
	req := api.CreateRequest{Type: loop.Ralph, Title: title, Task: "do " + title}
	if !runNow {
		req.RunnableAt = later()
	}
	l, err := c.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create(%s) = %v", title, err)
	}
	return l
}

// waitFor reads the stream until a message satisfies ok, or fails the test.
func waitFor(t *testing.T, ch <-chan api.StreamMsg, within time.Duration, what string, ok func(api.StreamMsg) bool) api.StreamMsg {
	t.Helper()
	timeout := time.After(testslack.Scale(within))
	for {
		select {
		case m, open := <-ch:
			if !open {
				t.Fatalf("event stream closed while waiting for %s", what)
			}
			if ok(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s on the event stream within %s", what, within)
		}
	}
}
