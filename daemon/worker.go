package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/store"
)

// register makes the daemon a worker of its etcd store (worker: in
// loopr.yml): a name taken by a live worker, or a worker on another host
// or repository without git.remote, refuses the start.
func (d *daemon) register(ctx context.Context, git *gitflow.Repo) (*cluster.Worker, error) {
	cfg := d.config()
	host, _ := os.Hostname()
	info := cluster.WorkerInfo{
		Name: cfg.Worker.Name, Host: host, PID: d.pid, Home: d.paths.Home, Workspace: d.paths.Workspace,
		Remote: cfg.Git.Remote, MaxLoops: cfg.Worker.MaxLoops, Labels: cfg.Worker.Labels,
		Version: d.o.Version, StartedAt: d.started,
	}
	if info.Name == "" {
		info.Name = cluster.DefaultName(host, d.paths.Home)
	}
	if info.MaxLoops == 0 {
		info.MaxLoops = cfg.Concurrency.MaxLoops
	}
	if d.o.Standby {
		info.MaxLoops = 0 // runs nothing; may be elected scheduler
	}
	if git != nil {
		info.Repo = git.Root
	}
	w, err := cluster.Register(ctx, cluster.Options{
		Store: d.store, Info: info, Log: d.log,
		TTL: time.Duration(cfg.Worker.LeaseTTLSecs) * time.Second,
		OnLost: func(why string) {
			if d.mgr != nil {
				d.mgr.Fenced(why)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	d.log.Info("worker registered", "worker", info.Name, "max_loops", info.MaxLoops, "labels", info.Labels, "store", d.store.Where())
	return w, nil
}

// schedulerDuties runs, while this worker is the elected scheduler, what
// must happen once per cluster: webhook delivery (from the journal
// position saved by the last scheduler), notify.command and the retention
// cleaner. It returns once the daemon stops (the hub closes).
func (d *daemon) schedulerDuties(ctx context.Context, w *cluster.Worker) {
	var stop context.CancelFunc
	var followers, cleaner sync.WaitGroup
	end := func(drain bool) {
		if stop == nil {
			return
		}
		if drain {
			followers.Wait() // they end by themselves once the hub closed
		}
		stop()
		followers.Wait()
		cleaner.Wait()
		stop = nil
	}
	for {
		changed := w.Changed()
		switch {
		case w.Scheduler() && stop == nil:
			var lctx context.Context
			lctx, stop = term(ctx)
			var from uint64
			if err := d.store.View(func(tx *store.Tx) error { from = tx.LastSeq(); return nil }); err != nil {
				d.log.Warn("scheduler duties: read journal", "err", err)
			}
			d.log.Info("this worker is the scheduler: delivering webhooks and notifications, running retention", "worker", w.Name())
			d.event(fmt.Sprintf("worker %s is the scheduler", w.Name()))
			hooks, note := newWebhooks(d, d.o.WebhookBackoff), newNotifier(d)
			followers.Go(func() { hooks.run(lctx, from) })
			followers.Go(func() { note.run(lctx, from) })
			cleaner.Go(func() { d.cleaner(lctx) })
		case !w.Scheduler() && stop != nil:
			d.log.Info("this worker is no longer the scheduler", "worker", w.Name())
			end(false)
		}
		select {
		case <-ctx.Done():
			end(false)
			return
		case <-d.hub.done:
			// Stopping: the followers deliver what the journal holds and
			// end by themselves; the cleaner ends with its context.
			end(true)
			return
		case <-changed:
		}
	}
}

// term is the context of one term as scheduler; schedulerDuties cancels it
// when the term ends.
func term(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(ctx)
}
