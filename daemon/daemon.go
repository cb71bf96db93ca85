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
// change and refuses an invalid one (see API.md).
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
	"net/http"
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
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/loopmgr"
	"github.com/loopr-dev/loopr/mergequeue"
	"github.com/loopr-dev/loopr/runner"
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
	if o.Config == nil {
		o.Config = config.Default()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	log := o.Log
	paths := o.Paths
	token, err := apiToken(o.Config) // refuse early: a TCP listener needs a private token
	if err != nil {
		return err
	}
	if paths.Home == "" {
		return errors.New("daemon: no home directory")
	}
	if err := os.MkdirAll(paths.Home, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	if err := os.Chmod(paths.Home, 0o700); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	sock := paths.Socket()
	if len(sock) > maxSocketPath {
		return fmt.Errorf("socket path %s is too long (%d bytes, max %d): use a shorter --home", sock, len(sock), maxSocketPath)
	}
	// A daemon that answers on the socket is the clearest message; the
	// store lock below is what actually guarantees one daemon per home. A
	// socket that takes connections but answers nothing is no daemon: a
	// child a crashed daemon was starting holds its listener until it
	// execs (milliseconds, under load more), and a restart must not trip.
	if pid, ok := probe(sock); ok && pid > 0 {
		return alreadyRunning(pid)
	}

	st, err := control.OpenStore(o.Config, paths, store.Options{Timeout: time.Second, Log: log})
	if err != nil {
		var le *store.LockedError
		if errors.As(err, &le) {
			return err // "store is in use by pid N; is the daemon running?"
		}
		return fmt.Errorf("open store: %w", err)
	}
	pid := os.Getpid()
	d := &daemon{
		o: o, log: log, paths: paths, pid: pid, store: st,
		started: time.Now().UTC().Truncate(time.Second), accepting: true,
		mgrStopped: make(chan struct{}),
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	if err := writePIDFile(paths.PIDFile(), pid); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	defer removePIDFile(paths.PIDFile(), pid)

	cfg := o.Config
	d.cfg.Store(cfg) // swapped by a hot reload of loopr.yml
	d.svc = control.New(st, paths, d.config, time.Now)
	d.svc.EnableWorkspaceGates()
	// The scheduling index: every record's head, read once here and kept
	// in step with every commit (control/index.go, readyset).
	if err := d.svc.EnableIndex(); err != nil {
		return err
	}
	_, waiting := d.svc.Index().Len()
	d.afterBigAnswer(waiting) // the load's garbage goes back to the OS (memory.go)
	d.hub = newHub()
	d.metrics = newMetrics(d)
	d.webhooks = newWebhooks(d, o.WebhookBackoff)
	d.notifier = newNotifier(d)

	var git *gitflow.Repo
	if cfg.Git.Worktrees {
		git, err = gitflow.Open(paths.Workspace, paths.Home, log)
		switch {
		case errors.Is(err, gitflow.ErrNotRepo), errors.Is(err, gitflow.ErrNoGit):
			log.Warn("git worktrees off: loops run in the workspace directly, leaf loops one at a time", "err", err)
			git = nil
		case err != nil:
			return fmt.Errorf("git: %w", err)
		}
	}
	// Before anything is started (the guard, agents): a git.remote the
	// clone lacks refuses the start.
	if git != nil {
		git.Remote = cfg.Git.Remote
		if err := git.CheckRemote(ctx); err != nil {
			return err
		}
	}
	gitErr := err // gitflow.Open's answer, for the no-git text below

	// Containment of the agents' processes (package contain): chosen once,
	// said once, and what a crashed daemon left is ended before anything
	// starts.
	jail, err := contain.Setup(paths.Home, os.Getenv(contain.EnvMode), log)
	if err != nil {
		return err
	}
	d.jail = jail
	log.Info("process containment", "mode", jail.Mode(), "how", jail.Why())
	if n := jail.Recover(); n > 0 {
		log.Warn("killed processes a previous daemon left running", "count", n)
	}
	defer jail.Close()
	if o.GuardBinary != "" {
		// If this process dies without a clean stop, its guard kills the
		// agents it started (RELIABILITY.md); a clean stop releases it.
		// A worker of an etcd store also beats to it: frozen (SIGSTOP, a
		// paused VM) for half its lease TTL, its agents are killed. Its
		// lease outlives the freeze by at least 2/3 of the TTL (etcd
		// keepalives go every TTL/3), so they die before its loops can
		// be given to another worker.
		var beat time.Duration
		if st.Backend() == store.BackendEtcd {
			beat = time.Duration(cfg.Worker.LeaseTTLSecs) * time.Second / 2
		}
		stopGuard, err := jail.StartGuard(o.GuardBinary, beat)
		if err != nil {
			log.Warn("no guard: a crash of this daemon leaves its agents running until the next daemon starts", "err", err)
		} else {
			defer stopGuard()
		}
	}

	var mgr *loopmgr.Manager
	run := &runner.Runner{
		Jail:         jail,
		Now:          time.Now,
		Log:          log,
		OnAgentStart: func(id string, pid int) { mgr.RecordPID(id, pid) },
		AgentSlots:   make(chan struct{}, max(1, cfg.APICallCap())),
	}
	d.git = git
	// On etcd every daemon is a worker of the store's one queue
	// (package cluster); the one elected scheduler also schedules.
	var worker *cluster.Worker
	if st.Backend() == store.BackendEtcd {
		w, rerr := d.register(ctx, git)
		if rerr != nil {
			return rerr
		}
		worker = w
		if git != nil {
			// Merges into a plan branch on git.remote: under an etcd
			// mutex every worker shares.
			git.Lock = worker.Locker()
		}
	}
	d.worker = worker
	switch {
	case !cfg.Git.Worktrees:
		d.svc.SetGit(control.NoGitText("git.worktrees is false"))
	case git == nil && errors.Is(gitErr, gitflow.ErrNoGit):
		d.svc.SetGit(control.NoGitText("git is not on PATH"))
	case git == nil:
		d.svc.SetGit(control.NoGitText("the workspace is not a git repository"))
	default:
		d.svc.SetGit("")
	}
	for _, p := range d.svc.Preflight() {
		log.Warn("preflight: loops of these types will not start", "types", strings.Join(p.Types, ","), "problem", p.What, "fix", p.Fix)
	}
	var queue *mergequeue.Queue
	if git != nil {
		// Passed tasks' branches land on their plan branch through the
		// merge queue: merge.validate runs in the runner's jail.
		queue = &mergequeue.Queue{Git: git, Runner: run, Log: log}
	}
	mgr = loopmgr.New(loopmgr.Options{
		Service: d.svc, Runner: run, Git: git, Queue: queue, Log: log,
		Owner: "pid " + strconv.Itoa(pid), Notify: d.hub.poke,
		OnTick: d.metrics.onTick, OnDispatch: d.metrics.onDispatch, OnUsage: d.metrics.onUsage,
		Cluster: worker,
	})
	d.mgr = mgr
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	workerDone := make(chan struct{})
	if worker != nil {
		go func() {
			defer close(workerDone)
			_ = worker.Run(workerCtx)
		}()
	} else {
		close(workerDone)
	}

	ln, err := listen(sock)
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	handler := d.routes()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Metrics and webhooks follow the journal from here: what recovery and
	// this run do, and (webhooks) what happened while no daemon ran.
	var startSeq uint64
	if err := st.View(func(tx *store.Tx) error { startSeq = tx.LastSeq(); return nil }); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	tcp, err := listenTCP(cfg, token, handler, log) // api.listen, behind the bearer token (tcp.go)
	if err != nil {
		ln.Close()
		return err
	}
	d.event("daemon started")
	log.Info("daemon started", "pid", pid, "version", o.Version, "socket", sock, "home", paths.Home, "workspace", paths.Workspace)

	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	mgrDone := make(chan error, 1)
	go func() {
		err := mgr.Run(mgrCtx)
		close(d.mgrStopped)
		mgrDone <- err
	}()
	// Followers of the journal end after the hub closes, once they have
	// read what shutdown journals; the cleaner and the config watcher end
	// with auxCtx.
	auxCtx, stopAux := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAux()
	var followers, aux sync.WaitGroup
	followers.Go(func() { d.metrics.follow(auxCtx, startSeq) })
	if worker == nil {
		followers.Go(func() { d.webhooks.run(auxCtx, startSeq) })
		followers.Go(func() { d.notifier.run(auxCtx, startSeq) })
		aux.Go(func() { d.cleaner(auxCtx) })
	} else {
		// Once per cluster: only the scheduler delivers webhooks, runs
		// notify.command and the retention cleaner.
		followers.Go(func() { d.schedulerDuties(auxCtx, worker) })
	}
	aux.Go(func() { _ = jail.Run(auxCtx) }) // reaps strays reparented to the daemon
	aux.Go(func() { d.watchConfig(auxCtx, hup) })

	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(&peerListener{Listener: ln, uid: os.Getuid(), log: log}) }()
	if o.Ready != nil {
		o.Ready(pid)
	}

	var runErr error
	mgrExited := false
	select {
	case <-ctx.Done():
	case err := <-mgrDone:
		mgrExited = true
		runErr = fmt.Errorf("loop manager: %w", err)
		if err == nil {
			runErr = errors.New("loop manager stopped unexpectedly")
		}
	case err := <-srvDone:
		runErr = fmt.Errorf("serve %s: %w", sock, err)
	}

	log.Info("daemon stopping")
	d.stopAccepting()
	d.event("daemon stopping")
	stopMgr()
	if !mgrExited {
		if err := <-mgrDone; err != nil && runErr == nil {
			runErr = fmt.Errorf("loop manager: %w", err)
		}
	}
	// After the manager requeued its loops (their lease keys deleted): the
	// registration, the election bid and the session go at once.
	stopWorker()
	<-workerDone
	d.hub.close() // streams and followers send what the journal holds, then end
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
		srv.Close()
	}
	tcp.shutdown(sctx, log)
	d.streams.Wait()
	followers.Wait() // webhooks: at most webhookDrain more
	stopAux()
	aux.Wait()
	log.Info("daemon stopped")
	return runErr
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
	git     *gitflow.Repo   // nil: no git flow
	worker  *cluster.Worker // this daemon as a worker of an etcd store; nil on bbolt
	jail    *contain.Jail   // how agents' processes are contained

	cfg      atomic.Pointer[config.Config]
	metrics  *metrics
	webhooks *webhooks
	notifier *notifier

	mgrStopped chan struct{} // closed when the manager's Run returns

	mu        sync.RWMutex // guards accepting against writes.Add
	accepting bool
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
	d.mu.Unlock()
	d.writes.Wait()
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
func alreadyRunning(pid int) error {
	return fmt.Errorf("daemon already running (pid %d)", pid)
}

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
