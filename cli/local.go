package cli

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/cluster"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/landing"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/radar"
	"github.com/loopr-dev/loopr/review"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// local is the Backend over the store opened directly (no daemon running).
type local struct{ svc *control.Service }

func (b *local) Create(_ context.Context, req api.CreateRequest) (loop.Loop, error) {
	return b.svc.Create(req)
}
func (b *local) List(_ context.Context, req api.ListRequest) ([]loop.Loop, error) {
	return b.svc.List(req)
}
func (b *local) Get(_ context.Context, id string) (loop.Loop, error) { return b.svc.Get(id) }
func (b *local) Act(_ context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error) {
	return b.svc.Act(id, action, req)
}
func (b *local) Why(ctx context.Context, id string, now time.Time) (api.Why, error) {
	w, err := b.svc.Why(id, now)
	if err != nil {
		return w, err
	}
	rad, err := b.radar()
	if err == nil {
		w.Conflicts, err = b.svc.ConflictsOf(ctx, rad, id)
	}
	if err != nil {
		w.ConflictCheck = err.Error()
	}
	return w, nil
}

// Conflicts runs the conflict radar without a daemon: nothing is cached
// between runs.
func (b *local) Conflicts(ctx context.Context, id string) (api.Conflicts, error) {
	rad, err := b.radar()
	if err != nil {
		return api.Conflicts{}, err
	}
	return b.svc.Conflicts(ctx, rad, id)
}

// Diff computes a loop's diff without a daemon, in the workspace's
// repository.
func (b *local) Diff(ctx context.Context, id string) (api.Diff, error) {
	g, err := b.git()
	if err != nil {
		return api.Diff{}, err
	}
	if g != nil {
		g.Remote = b.svc.Config().Git.Remote // its branches may be only there
	}
	return b.svc.Diff(ctx, g, id)
}

// radar is a conflict radar over the workspace's repository; nil (and
// then control.ErrNoRadar) without git flow.
func (b *local) radar() (*radar.Radar, error) {
	g, err := b.git()
	if g == nil || err != nil {
		return nil, err
	}
	return radar.New(g), nil
}

// git opens the workspace's repository for git flow; nil, and no error,
// without it (git.worktrees off, no repository, no git).
func (b *local) git() (*gitflow.Repo, error) {
	if !b.svc.Config().Git.Worktrees {
		return nil, nil
	}
	g, err := gitflow.Open(b.svc.Paths.Workspace, b.svc.Paths.Home, nil)
	switch {
	case errors.Is(err, gitflow.ErrNotRepo), errors.Is(err, gitflow.ErrNoGit):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return g, nil
}
func (b *local) Scheduler(_ context.Context, now time.Time) (api.SchedulerView, error) {
	return b.svc.Scheduler(now)
}
func (b *local) SchedulerRows(_ context.Context, now time.Time, row func(*api.SchedulerView, *api.SchedRow) error) (api.SchedulerView, error) {
	return b.svc.SchedulerRows(now, row)
}
func (b *local) Status(ctx context.Context) (api.Status, error) {
	st, err := b.svc.Status(b.svc.Now())
	st.Version = Version
	st.Warning = "daemon not running: no loops are being run"
	if err == nil && b.svc.Store.Backend() == store.BackendEtcd {
		// Workers on other machines run loops: say which.
		if c, cerr := cluster.Status(ctx, b.svc.Store, "", time.Duration(b.svc.Config().Worker.LeaseTTLSecs)*time.Second); cerr == nil && c != nil {
			st.Cluster = c
			if len(c.Workers) > 0 {
				st.Warning = "no daemon on this machine; the workers below run the loops"
			}
		}
	}
	return st, err
}
func (b *local) Export(_ context.Context, w io.Writer) (int, error) { return b.svc.Store.Export(w) }
func (b *local) Import(_ context.Context, loops []loop.Loop) (int, error) {
	return b.svc.Import(loops)
}
func (b *local) CreateBatch(_ context.Context, reqs []api.CreateRequest) (api.BatchResult, error) {
	return b.svc.CreateBatch(reqs)
}

// GC runs the retention pass on the store, after deleting the branches of
// cancelled and invalidated loops when asked. Worktrees of removed loops,
// if any, are swept by the next daemon at start.
func (b *local) GC(ctx context.Context, req api.GCRequest) (api.GCResult, error) {
	var branches []api.GCBranch
	if req.Branches {
		g, err := b.git()
		if err != nil {
			return api.GCResult{}, err
		}
		if g != nil {
			if branches, err = b.svc.GCBranches(ctx, g, req.DryRun); err != nil {
				return api.GCResult{}, err
			}
		}
	}
	res, err := b.svc.GC(req)
	if branches != nil {
		res.Branches = branches
	}
	return res, err
}

// Stats is the store's part of the summary: counters and latencies need
// the daemon.
func (b *local) Stats(_ context.Context) (api.Stats, error) { return b.svc.Stats(b.svc.Now()) }
func (b *local) Limits(_ context.Context) ([]api.AgentLimit, error) {
	return b.svc.Limits(b.svc.Now())
}
func (b *local) ClearLimit(_ context.Context, agent string) (api.ClearLimitResult, error) {
	return b.svc.ClearLimit(agent)
}

func (b *local) TreeUsage(_ context.Context, id string) (api.TreeUsage, error) {
	return b.svc.TreeUsageOf(id)
}
func (b *local) SetBudget(_ context.Context, id string, req api.BudgetRequest) (api.BudgetResult, error) {
	return b.svc.SetBudget(id, req)
}

// Comment routes a line comment without a daemon: the repository is
// opened for the call.
func (b *local) Comment(ctx context.Context, id string, req api.CommentRequest) (api.Comment, error) {
	var g review.Git
	if b.svc.Config().Git.Worktrees {
		r, err := gitflow.Open(b.svc.Paths.Workspace, b.svc.Paths.Home, nil)
		switch {
		case errors.Is(err, gitflow.ErrNotRepo), errors.Is(err, gitflow.ErrNoGit):
		case err != nil:
			return api.Comment{}, err
		default:
			g = r
		}
	}
	return review.Add(ctx, b.svc, g, id, req)
}
func (b *local) Comments(_ context.Context, id string) ([]api.Comment, error) {
	return review.List(b.svc, id)
}

func (b *local) RecordManual(_ context.Context, id string, req api.ManualRequest) error {
	return b.svc.RecordManual(id, req)
}

func (b *local) Close() error { return b.svc.Store.Close() }

// Land lands a plan without a daemon: no merge queue runs, so nothing
// else moves the plan branch meanwhile; merge.validate runs in this
// process's children.
func (b *local) Land(ctx context.Context, id string, req api.LandRequest) (api.LandResult, error) {
	g, err := b.git()
	if err != nil {
		return api.LandResult{}, err
	}
	if g != nil {
		g.Remote = b.svc.Config().Git.Remote // the plan branch is the remote's
	}
	ld := &landing.Lander{Svc: b.svc, Git: g, Runner: &runner.Runner{Now: time.Now}}
	return ld.Land(ctx, id, req)
}
