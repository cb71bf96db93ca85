package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/contain"
	"github.com/loopr-dev/loopr/landing"
	"github.com/loopr-dev/loopr/loopmgr"
	"github.com/loopr-dev/loopr/mergequeue"
	"github.com/loopr-dev/loopr/radar"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// The steps of Run before it serves, in order. Each that holds something
// the daemon must give back schedules it with onClose; Run gives it all
// back, in reverse, when it returns.

// withDefaults fills in what o leaves out.
func (o Options) withDefaults() Options {
	if o.Config == nil {
		o.Config = config.Default()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// claimHome makes the home (mode 0700) and refuses a home whose socket
// path is too long or whose daemon answers on it.
func claimHome(paths workspace.Paths) error {
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
	// store lock (open) is what actually guarantees one daemon per home. A
	// socket that takes connections but answers nothing is no daemon: a
	// child a crashed daemon was starting holds its listener until it
	// execs (milliseconds, under load more), and a restart must not trip.
	if pid, ok := probe(sock); ok && pid > 0 {
		return alreadyRunning(pid)
	}
	return nil
}

// open opens the store (a *store.LockedError when another process holds
// it), writes the pid file, and builds the state the handlers share: the
// control service with its scheduling index, the event hub, the metrics,
// webhooks and notify.command.
func open(o Options) (*daemon, error) {
	// The store's errors say "open store" and name the file.
	st, err := control.OpenStore(o.Config, o.Paths, store.Options{Timeout: time.Second, Log: o.Log})
	if err != nil {
		return nil, err
	}
	d := &daemon{
		o: o, log: redactingLog(o.Log), paths: o.Paths, pid: os.Getpid(), store: st,
		started: time.Now().UTC().Truncate(time.Second), accepting: true,
		mgrStopped: make(chan struct{}),
	}
	d.onClose(func() {
		if err := st.Close(); err != nil {
			d.log.Error("close store", "err", err)
		}
	})
	if err := writePIDFile(d.paths.PIDFile(), d.pid); err != nil {
		d.closeAll()
		return nil, fmt.Errorf("pid file: %w", err)
	}
	d.onClose(func() { removePIDFile(d.paths.PIDFile(), d.pid) })

	d.cfg.Store(o.Config) // swapped by a hot reload of loopr.yml
	d.svc = control.New(st, d.paths, d.config, time.Now)
	d.svc.EnableWorkspaceGates()
	// The scheduling index: every record's head, read once here and kept
	// in step with every commit (control/index.go, readyset).
	if err := d.svc.EnableIndex(); err != nil {
		d.closeAll()
		return nil, err
	}
	_, waiting := d.svc.Index().Len()
	d.afterBigAnswer(waiting) // the load's garbage goes back to the OS (memory.go)
	d.hub = newHub()
	d.metrics = newMetrics(d)
	d.webhooks = newWebhooks(d, o.WebhookBackoff)
	d.notifier = newNotifier(d)
	d.startTrust() // before anything runs: the gate holds from the first tick
	return d, nil
}

// onClose schedules fn for closeAll.
func (d *daemon) onClose(fn func()) { d.closers = append(d.closers, fn) }

// closeAll gives back what the steps took, the last taken first.
func (d *daemon) closeAll() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// openGit opens the workspace's repository when git.worktrees is on (nil
// when there is none, or no git: loops then share the workspace), checks
// that git.remote is one the clone has, and tells the service whether
// loops get worktrees.
func (d *daemon) openGit(ctx context.Context) error {
	cfg := d.config()
	var git *gitflow.Repo
	var err error
	if cfg.Git.Worktrees {
		git, err = gitflow.Open(d.paths.Workspace, d.paths.Home, d.log)
		switch {
		case errors.Is(err, gitflow.ErrNotRepo), errors.Is(err, gitflow.ErrNoGit):
			d.log.Warn("git worktrees off: loops run in the workspace directly, leaf loops one at a time", "err", err)
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
	switch {
	case !cfg.Git.Worktrees:
		d.svc.SetGit(control.NoGitText("git.worktrees is false"))
	case git == nil && errors.Is(err, gitflow.ErrNoGit):
		d.svc.SetGit(control.NoGitText("git is not on PATH"))
	case git == nil:
		d.svc.SetGit(control.NoGitText("the workspace is not a git repository"))
	default:
		d.svc.SetGit("")
	}
	d.git = git
	if git != nil {
		d.radar = radar.New(git)
	}
	return nil
}

// contain chooses the containment of the agents' processes (package
// contain), says it once, ends what a crashed daemon left, and starts the
// guard.
func (d *daemon) contain() error {
	jail, err := contain.Setup(d.paths.Home, os.Getenv(contain.EnvMode), d.log)
	if err != nil {
		return err
	}
	d.jail = jail
	d.log.Info("process containment", "mode", jail.Mode(), "how", jail.Why())
	if n := jail.Recover(); n > 0 {
		d.log.Warn("killed processes a previous daemon left running", "count", n)
	}
	d.onClose(jail.Close)
	if d.o.GuardBinary == "" {
		return nil
	}
	// If this process dies without a clean stop, its guard kills the
	// agents it started (RELIABILITY.md); a clean stop releases it. A
	// worker of an etcd store also beats to it: frozen (SIGSTOP, a paused
	// VM) for half its lease TTL, its agents are killed. Its lease
	// outlives the freeze by at least 2/3 of the TTL (etcd keepalives go
	// every TTL/3), so they die before its loops can be given to another
	// worker.
	var beat time.Duration
	if d.store.Backend() == store.BackendEtcd {
		beat = time.Duration(d.config().Worker.LeaseTTLSecs) * time.Second / 2
	}
	stopGuard, err := jail.StartGuard(d.o.GuardBinary, beat)
	if err != nil {
		d.log.Warn("no guard: a crash of this daemon leaves its agents running until the next daemon starts", "err", err)
		return nil
	}
	d.onClose(stopGuard)
	return nil
}

// joinCluster, on an etcd store, registers the daemon as a worker of the
// store's one queue (package cluster; the one elected scheduler also
// schedules). On bbolt it does nothing.
func (d *daemon) joinCluster(ctx context.Context) error {
	if d.store.Backend() != store.BackendEtcd {
		return nil
	}
	w, err := d.register(ctx, d.git)
	if err != nil {
		return err
	}
	d.worker = w
	if d.git != nil {
		// Merges into a plan branch on git.remote: under an etcd mutex
		// every worker shares.
		d.git.Lock = w.Locker()
	}
	return nil
}

// newManager logs the preflight problems found, then builds the runner
// and the loop manager.
func (d *daemon) newManager() {
	for _, p := range d.svc.Preflight() {
		d.log.Warn("preflight: loops of these types will not start", "types", strings.Join(p.Types, ","), "problem", p.What, "fix", p.Fix)
	}
	d.warnWithheld()
	var mgr *loopmgr.Manager
	d.redact = redact.New()
	d.useRedactor()
	d.learnSecrets()
	run := &runner.Runner{
		Redact:       d.redact,
		Jail:         d.jail,
		Now:          time.Now,
		Log:          d.log,
		OnAgentStart: func(id string, pid int) { mgr.RecordPID(id, pid) },
		OnSession:    func(id, session string) { mgr.RecordSession(id, session) },
		OnRefused:    func(id string, it int, target string) { mgr.SandboxRefused(id, it, target) },
		AgentSlots:   make(chan struct{}, max(1, d.config().APICallCap())),
		MCP:          d.mcpWiring(),
	}
	var queue *mergequeue.Queue
	if d.git != nil {
		// Passed tasks' branches land on their plan branch through the
		// merge queue: merge.validate runs in the runner's jail.
		queue = &mergequeue.Queue{Git: d.git, Runner: run, Log: d.log}
	}
	mgr = loopmgr.New(loopmgr.Options{
		Service: d.svc, Runner: run, Git: d.git, Queue: queue, Log: d.log,
		Owner: "pid " + strconv.Itoa(d.pid), Notify: d.hub.poke,
		OnTick: d.metrics.onTick, OnDispatch: d.metrics.onDispatch, OnUsage: d.metrics.onUsage,
		Cluster: d.worker, Redact: d.redact,
	})
	d.mgr = mgr
	d.lander = &landing.Lander{Svc: d.svc, Git: d.git, Runner: run, Log: d.log}
}
