package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/mcp"
	"github.com/loopr-dev/loopr/store"
)

// running is what serve started, for stop to end in order.
type running struct {
	srv        *http.Server
	tcp        *tcpServer
	web        *tcpServer   // the dashboard's own listener (api.web without api.listen)
	mcp        *http.Server // <home>/mcp.sock (mcp.go)
	stopMgr    context.CancelFunc
	mgrDone    chan error // the manager's Run returned
	stopWorker context.CancelFunc
	workerDone chan struct{}
	stopAux    context.CancelFunc
	followers  sync.WaitGroup // journal followers: end after the hub closes
	aux        sync.WaitGroup // the cleaner, the config watcher, the reaper: end with stopAux
}

// serve runs the daemon until ctx ends or the manager or the server
// fails: the worker's registration (etcd), the socket and TCP listeners,
// the manager, the journal followers, the cleaner, the configuration
// watch and the HTTP server. Then it stops them in order (see the package
// doc) and returns why it stopped, nil for ctx.
func (d *daemon) serve(ctx context.Context, hup <-chan os.Signal, token []byte) error {
	r := &running{}
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	r.stopWorker, r.workerDone = stopWorker, make(chan struct{})
	if d.worker != nil {
		go func() {
			defer close(r.workerDone)
			_ = d.worker.Run(workerCtx)
		}()
	} else {
		close(r.workerDone)
	}

	sock := d.paths.Socket()
	ln, err := listen(sock)
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	handler := d.routes()
	r.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	// Metrics and webhooks follow the journal from here: what recovery and
	// this run do, and (webhooks) what happened while no daemon ran.
	var startSeq uint64
	if err := d.store.View(func(tx *store.Tx) error { startSeq = tx.LastSeq(); return nil }); err != nil {
		ln.Close()
		return fmt.Errorf("read journal: %w", err)
	}
	if err := d.serveNet(r, token, handler); err != nil { // api.listen, api.web
		ln.Close()
		return err
	}
	if r.mcp, err = d.listenMCP(); err != nil { // mcp.go
		ln.Close()
		r.tcp.shutdown(context.Background(), d.log)
		r.web.shutdown(context.Background(), d.log)
		return err
	}
	defer os.Remove(filepath.Join(d.paths.Home, mcp.SocketName))
	d.event("daemon started")
	d.log.Info("daemon started", "pid", d.pid, "version", d.o.Version, "socket", sock, "home", d.paths.Home, "workspace", d.paths.Workspace)

	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	r.stopMgr, r.mgrDone = stopMgr, make(chan error, 1)
	go func() {
		err := d.mgr.Run(mgrCtx)
		close(d.mgrStopped)
		r.mgrDone <- err
	}()
	auxCtx, stopAux := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAux()
	r.stopAux = stopAux
	d.startAux(auxCtx, r, hup, startSeq)

	srvDone := make(chan error, 1)
	go func() { srvDone <- r.srv.Serve(&peerListener{Listener: ln, uid: os.Getuid(), log: d.log}) }()
	if d.o.Ready != nil {
		d.o.Ready(d.pid)
	}

	var runErr error
	mgrExited := false
	select {
	case <-ctx.Done():
	case err := <-r.mgrDone:
		mgrExited = true
		runErr = fmt.Errorf("loop manager: %w", err)
		if err == nil {
			runErr = errors.New("loop manager stopped unexpectedly")
		}
	case err := <-srvDone:
		runErr = fmt.Errorf("serve %s: %w", sock, err)
	}
	return d.stop(r, runErr, mgrExited)
}

// serveNet opens the TCP listener (api.listen, behind the bearer token:
// tcp.go) and the web dashboard (api.web: on that listener, else on its
// own: web.go).
func (d *daemon) serveNet(r *running, token []byte, handler http.Handler) error {
	cfg := d.config()
	ws, err := d.newWeb(cfg, token)
	if err != nil {
		return err
	}
	var webH http.Handler
	if ws != nil {
		webH = ws.Handler()
	}
	if r.tcp, err = listenTCP(cfg, token, handler, webH, d.log); err != nil {
		return err
	}
	if ws == nil {
		return nil
	}
	addr := net.Addr(nil)
	if r.tcp != nil {
		addr = r.tcp.ln.Addr()
	} else {
		if r.web, err = listenWeb(cfg, webH, d.log); err != nil {
			return err
		}
		addr = r.web.ln.Addr()
	}
	m := &webMount{srv: ws, url: webURL(addr)}
	d.web.Store(m)
	d.log.Info("web dashboard listening", "url", m.url)
	return nil
}

// startAux starts what runs beside the manager: the journal followers
// (metrics; webhooks and notify.command on the scheduler only), the
// retention cleaner (likewise), the reaper of strays and the watch on
// loopr.yml.
func (d *daemon) startAux(ctx context.Context, r *running, hup <-chan os.Signal, startSeq uint64) {
	r.followers.Go(func() { d.metrics.follow(ctx, startSeq) })
	if d.worker == nil {
		r.followers.Go(func() { d.webhooks.run(ctx, startSeq) })
		r.followers.Go(func() { d.notifier.run(ctx, startSeq) })
		r.aux.Go(func() { d.cleaner(ctx) })
	} else {
		// Once per cluster: only the scheduler delivers webhooks, runs
		// notify.command and the retention cleaner.
		r.followers.Go(func() { d.schedulerDuties(ctx, d.worker) })
	}
	r.aux.Go(func() { _ = d.jail.Run(ctx) }) // reaps strays reparented to the daemon
	r.aux.Go(func() { d.watchConfig(ctx, hup) })
}

// stop shuts the daemon down in order: writes refused, the manager
// stopped (its agents stopped, their loops requeued), the worker's
// registration ended, the streams and followers drained, the servers shut
// down. It returns runErr, or the manager's error when there was none.
func (d *daemon) stop(r *running, runErr error, mgrExited bool) error {
	d.log.Info("daemon stopping")
	d.stopAccepting()
	d.event("daemon stopping")
	r.stopMgr()
	if !mgrExited {
		if err := <-r.mgrDone; err != nil && runErr == nil {
			runErr = fmt.Errorf("loop manager: %w", err)
		}
	}
	// After the manager requeued its loops (their lease keys deleted): the
	// registration, the election bid and the session go at once.
	r.stopWorker()
	<-r.workerDone
	d.hub.close() // streams and followers send what the journal holds, then end
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := r.srv.Shutdown(sctx); err != nil {
		d.log.Warn("http shutdown", "err", err)
		r.srv.Close()
	}
	r.tcp.shutdown(sctx, d.log)
	r.web.shutdown(sctx, d.log)
	if err := r.mcp.Shutdown(sctx); err != nil {
		r.mcp.Close()
	}
	d.streams.Wait()
	r.followers.Wait() // webhooks: at most webhookDrain more
	r.stopAux()
	r.aux.Wait()
	d.log.Info("daemon stopped")
	return runErr
}
