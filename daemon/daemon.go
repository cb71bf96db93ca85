// Package daemon is loopr's composition root. Run opens the store, builds
// the control service, the runner, the git flow and the loop manager, and
// serves the HTTP/1.1 + JSON API of SPEC §9 on the unix socket
// <home>/loopr.sock until its context is cancelled.
//
// One daemon runs per home: the store's file lock guarantees it, and a
// second daemon is told which pid holds the home. On an etcd store every
// daemon is a worker of the store's one queue (package cluster, worker.go):
// its worker name, unique per store, does the same, and the daemon whose
// worker is the elected scheduler also runs the webhooks, notify.command
// and the retention cleaner. The socket is created
// mode 0600 inside a 0700 home, and every connection is checked with
// SO_PEERCRED: peers of another uid are dropped before a byte is read.
//
// Around the manager it runs the journal followers — metrics (served from a
// Prometheus registry of its own at /metrics and summarised by /v1/stats)
// and webhook delivery — the retention cleaner (at start and hourly), and a
// watch on loopr.yml that swaps the configuration in force on a valid
// change, refuses an invalid one and holds one whose commands are not
// trusted on this machine (see API.md; trust.go: an untrusted loopr.yml
// runs nothing of its commands).
//
// Shutdown, on context cancellation: writes are refused (503), in-flight
// writes finish, the manager stops its agents and requeues their loops at
// the same iteration, the event streams drain what the journal holds and
// end, the HTTP server shuts down, the store closes, and the socket and pid
// file are removed.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/contain"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/landing"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/loopmgr"
	"github.com/loopr-dev/loopr/mcp"
	"github.com/loopr-dev/loopr/radar"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// Options configure Run.
type Options struct {
	Paths   workspace.Paths
	Config  *config.Config // nil: config.Default()
	Log     *slog.Logger   // nil: discard
	Version string
	// Ready, if set, is called once the socket accepts connections.
	Ready func(pid int)
	// WebhookBackoff is the wait before a webhook delivery's first retry;
	// it doubles before each further one. 0 means 1 s.
	WebhookBackoff time.Duration
	// Standby, on an etcd store, makes the daemon a worker that runs no
	// loops (max_loops 0) but may be elected scheduler.
	Standby bool
	// GuardBinary is the loopr executable to start the guard from
	// (`loopr _guard`: it kills this daemon's agents if the daemon dies
	// without a clean stop); "" starts none.
	GuardBinary string
	// Trusted: the caller wrote the configuration itself (loopr demo), so
	// it needs no `loopr trust` at start (a reload still does).
	Trusted bool
}

// ShutdownTimeout bounds how long Run waits for HTTP requests in flight
// when it stops.
const ShutdownTimeout = 5 * time.Second

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// Run runs the daemon until ctx is cancelled, then shuts down cleanly and
// returns nil. It returns an error when the daemon cannot start (the home is
// in use, the socket cannot be bound) or when the manager or the server fail.
func Run(ctx context.Context, o Options) error {
	// SIGHUP reloads loopr.yml and never ends the daemon: a foreground
	// daemon whose terminal or ssh session closes must go on supervising
	// its agents (the default action would kill it without cleanup).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	o = o.withDefaults()
	if !o.Trusted {
		if err := control.StartTrust(o.Config, os.Getenv); err != nil {
			return err
		}
	}
	token, err := apiToken(o.Config) // refuse early: a TCP listener needs a private token
	if err != nil {
		return err
	}
	if err := claimHome(o.Paths); err != nil {
		return err
	}
	d, err := open(o)
	if err != nil {
		return err
	}
	defer d.closeAll()
	// Git, then containment and the guard before any process is started;
	// then, on etcd, the worker's registration; then the manager.
	if err := d.openGit(ctx); err != nil {
		return err
	}
	if err := d.contain(); err != nil {
		return err
	}
	if err := d.joinCluster(ctx); err != nil {
		return err
	}
	if d.mcpSecret, err = mcp.LoadSecret(o.Paths.Home); err != nil {
		return err
	}
	d.newManager()
	return d.serve(ctx, hup, token)
}

// daemon is the state the HTTP handlers share.
type daemon struct {
	o       Options
	log     *slog.Logger
	paths   workspace.Paths
	pid     int
	started time.Time
	warning string
	store   *store.Store
	svc     *control.Service
	mgr     *loopmgr.Manager
	hub     *hub
	git     *gitflow.Repo    // nil: no git flow
	radar   *radar.Radar     // the conflict radar over git; nil with it
	worker  *cluster.Worker  // this daemon as a worker of an etcd store; nil on bbolt
	jail    *contain.Jail    // how agents' processes are contained
	lander  *landing.Lander  // `loopr land` (landing.go)
	redact  *redact.Redactor // the secrets handed to agents, replaced in all the daemon stores and sends
	// mcpSecret keys the per-loop tokens of the MCP server (mcp.go).
	mcpSecret []byte

	cfg      atomic.Pointer[config.Config]
	web      atomic.Pointer[webMount] // the dashboard, once it listens (web.go)
	metrics  *metrics
	webhooks *webhooks
	notifier *notifier

	mgrStopped chan struct{} // closed when the manager's Run returns
	closers    []func()      // what the start took, given back by closeAll (start.go)

	mu        sync.RWMutex // guards accepting against writes.Add
	accepting bool
	stopping  chan struct{}  // closed when shutdown begins (stoppingCh)
	writes    sync.WaitGroup // API writes in flight
	streams   sync.WaitGroup // /v1/events handlers
}

// errStopping refuses writes once shutdown has begun.
var errStopping = errors.New("daemon is shutting down")

// beginWrite admits one API write, or refuses it once shutdown has begun.
// The caller must call the returned func when done.
func (d *daemon) beginWrite() (func(), error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if !d.accepting {
		return nil, errStopping
	}
	d.writes.Add(1)
	return d.writes.Done, nil
}

// stopAccepting refuses new writes and waits for those in flight, so that
// none calls into the manager after it stops.
func (d *daemon) stopAccepting() {
	d.mu.Lock()
	d.accepting = false
	if d.stopping == nil {
		d.stopping = make(chan struct{})
	}
	select {
	case <-d.stopping:
	default:
		close(d.stopping) // a landing's merge.validate gives up: shutdown does not wait for it
	}
	d.mu.Unlock()
	d.writes.Wait()
}

// stoppingCh is closed once shutdown has begun: a long write (a landing)
// ends then rather than hold the shutdown up.
func (d *daemon) stoppingCh() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping == nil {
		d.stopping = make(chan struct{})
	}
	return d.stopping
}

func (d *daemon) isAccepting() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.accepting
}

// config returns the configuration in force (a hot reload swaps it).
func (d *daemon) config() *config.Config { return d.cfg.Load() }

// event appends a daemon event to the journal and wakes the streams.
func (d *daemon) event(msg string) { d.journal(loop.EventDaemon, msg) }

// journal appends an event of kind about no loop and wakes the streams.
func (d *daemon) journal(kind loop.EventKind, msg string) {
	err := d.store.Update(func(tx *store.Tx) error {
		_, err := tx.AppendEvent(loop.Event{Time: d.svc.Now(), Kind: kind, Message: msg})
		return err
	})
	if err != nil {
		d.log.Warn("journal event", "kind", kind, "msg", msg, "err", err)
	}
	d.hub.poke()
}

// alreadyRunning is the error for a home whose daemon answers.
func alreadyRunning(pid int) error { return &RunningError{PID: pid} }

// RunningError is Run's answer when a daemon already serves this home.
type RunningError struct{ PID int }

func (e *RunningError) Error() string { return fmt.Sprintf("daemon already running (pid %d)", e.PID) }

// listen binds the socket, removing a stale one only when nothing answers
// on it, and makes it mode 0600.
func listen(sock string) (net.Listener, error) {
	ln, err := net.Listen("unix", sock)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) {
		// The caller holds the store's lock: only a daemon that answers
		// with its pid is worth a refusal; anything else is stale.
		if pid, ok := probe(sock); ok && pid > 0 {
			return nil, alreadyRunning(pid)
		}
		if rerr := os.Remove(sock); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale socket: %w", rerr)
		}
		ln, err = net.Listen("unix", sock)
	}
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", sock, err)
	}
	// We remove the file ourselves after the server stops.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(sock, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket mode: %w", err)
	}
	return ln, nil
}

// writePIDFile writes pid to path atomically.
func writePIDFile(path string, pid int) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// removePIDFile removes path if it still names pid.
func removePIDFile(path string, pid int) {
	b, err := safefile.Read(path, 64) // never blocks on a planted FIFO
	if err != nil {
		return
	}
	if strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		os.Remove(path)
	}
}
