// Package mergequeue lands the branches of passed loops on their plan
// branch so that the plan branch is never red: a merge queue.
//
// A loop whose iteration passes is recorded `merging` first (its result,
// its evidence and the commit that passed are durable, its iteration is
// spent), and only then merged, here. The queue works on one plan branch
// at a time under that branch's merge locks (gitflow.Integrate: this
// process's, then the etcd lock every worker shares), so on several
// machines one worker lands a plan's branches at a time, and any worker
// finishes what another left:
//
//	Run(plan): lock → read the merging loops (Plan.Items) → Drain:
//	  take ≤ merge.batch of them, in order
//	  merge each onto the tip at a detached HEAD (gitflow: a conflict
//	  leaves that one out) → run merge.validate there, on the result
//	  → passed: fence (Plan.Fence) and move the branch (Land), one
//	    commit for the batch → Sink.Landed
//	  → failed: split in halves until the breaker is found (bisect.go)
//	    → Sink.Rejected, with merge.validate's output
//
// The batching and bisection (Drain) are pure: they see the git work
// through a Try function, which unit tests fake. The caller (loopmgr)
// reads and writes the store: Items, Fence and the Sink are its.
package mergequeue

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/runner"
)

// Queue merges, validates and lands batches on the plan branches of one
// repository. It holds no state between runs.
type Queue struct {
	Git    *gitflow.Repo
	Runner *runner.Runner // runs merge.validate (in its jail)
	Log    *slog.Logger   // nil: discard
}

// Plan is one run of the queue on one plan branch.
type Plan struct {
	Into     string   // the plan branch
	Batch    int      // merge.batch
	Validate []string // merge.validate
	Timeout  time.Duration
	// Env is the environment merge.validate starts from (the default
	// profile's, procenv.Profile.Commands); nil: the base set alone.
	Env []string
	// Items returns the items waiting now, in the order they should
	// land; it is called with the branch's merge locks held, so what
	// another worker landed meanwhile is not among them.
	Items func() ([]Item, error)
	// Fence, if set, is called under the locks right before the plan
	// branch moves to land items: an error moves nothing and ends the run.
	Fence func(ctx context.Context, items []Item) error
	// Before, if set, runs on the merged result in dir once
	// merge.validate passed (or without it), before the plan branch
	// moves: the before_merge hooks. A Refusal fails the attempt as a
	// failing merge.validate does (a batch is split to find the item).
	Before func(ctx context.Context, dir string, merged []Item) *Refusal
	// Sandbox, if set, prepares the sandbox merge.validate runs in, in
	// dir with env (it runs the merged agents' code): wrap for the Check
	// (nil: none), end once it is done.
	Sandbox func(dir string, env []string) (wrap func([]string) ([]string, error), end func(), err error)
	Sink    Sink
}

// Refusal is Plan.Before's verdict against a batch.
type Refusal struct {
	Reason, Output string
	// Suspend: the caller parks the item's loop for a person instead of
	// sending it back (on_error: suspend).
	Suspend bool
}

// MaxOutput bounds the output of merge.validate kept for a rejected
// loop's feedback (its end).
const MaxOutput = 6 << 10

// Run takes the merge locks of p.Into, reads the items waiting and drains
// them (Drain). An error leaves what was not settled waiting, for the
// next run.
func (q *Queue) Run(ctx context.Context, p Plan) (Stats, error) {
	var st Stats
	err := q.Git.Integrate(ctx, p.Into, func(ig *gitflow.Integration) error {
		items, err := p.Items()
		if err != nil || len(items) == 0 {
			return err
		}
		q.logger().Info("merge queue: landing", "into", p.Into, "waiting", len(items), "batch", max(p.Batch, 1))
		st, err = Drain(items, p.Batch, func(batch []Item) (Attempt, error) {
			return q.try(ctx, ig, p, batch)
		}, p.Sink)
		return err
	})
	return st, err
}

// try is Drain's Try on git: merge, validate, land.
func (q *Queue) try(ctx context.Context, ig *gitflow.Integration, p Plan, batch []Item) (Attempt, error) {
	cands := make([]gitflow.Candidate, len(batch))
	for i, it := range batch {
		cands[i] = gitflow.Candidate{Branch: it.Branch, Commit: it.Commit}
	}
	tr, err := ig.Merge(ctx, cands)
	if err != nil {
		return Attempt{}, err
	}
	a := Attempt{Merged: tr.Merged, Already: tr.Already, Failed: tr.Failed, Head: tr.Head}
	if tr.Head == "" {
		return a, nil
	}
	merged := pick(batch, tr.Merged)
	if len(p.Validate) > 0 {
		var out Tail
		env := q.env(p, tr.Head, merged)
		var wrap func([]string) ([]string, error)
		if p.Sandbox != nil {
			w, end, err := p.Sandbox(ig.Dir(), env)
			if err != nil {
				return a, fmt.Errorf("merge.validate on %s: %w", p.Into, err)
			}
			defer end()
			wrap = w
		}
		ev, f := q.Runner.RunChecks(ctx, runner.Check{
			Commands: p.Validate, Dir: ig.Dir(), Env: env, Timeout: p.Timeout, Log: &out,
			Where: loop.WhereMerge, Commit: tr.Head, Wrap: wrap,
			Name: "merge", Home: q.Git.Home, Worktree: ig.Dir(),
		})
		a.Validated, a.Evidence = true, ev
		switch {
		case f != nil && f.Cancelled:
			return a, fmt.Errorf("merge.validate on %s: %w", p.Into, context.Cause(ctx))
		case f != nil:
			a.Reason, a.Output = f.Reason, out.String()
			q.logger().Info("merge queue: merge.validate failed", "into", p.Into, "branches", len(merged), "reason", f.Reason)
			return a, nil
		}
	}
	if p.Before != nil {
		r := p.Before(ctx, ig.Dir(), merged)
		if ctx.Err() != nil {
			return a, fmt.Errorf("before_merge on %s: %w", p.Into, context.Cause(ctx))
		}
		if r != nil {
			a.Reason, a.Output, a.Suspend = r.Reason, r.Output, r.Suspend
			q.logger().Info("merge queue: before_merge refused", "into", p.Into, "branches", len(merged), "reason", r.Reason)
			return a, nil
		}
	}
	var fence func(context.Context) error
	if p.Fence != nil {
		fence = func(ctx context.Context) error { return p.Fence(ctx, merged) }
	}
	if err := ig.Land(ctx, tr, fence); err != nil {
		return a, err
	}
	a.Passed = true
	return a, nil
}

// env is merge.validate's environment: p.Env (else the allowlisted base
// set of the daemon's), and what it validates.
func (q *Queue) env(p Plan, head string, merged []Item) []string {
	names := make([]string, len(merged))
	for i, it := range merged {
		names[i] = it.Branch
	}
	env := p.Env
	if env == nil {
		env = procenv.Allowed(os.Environ())
	}
	return procenv.Set(env, "LOOPR_MERGE_INTO="+p.Into, "LOOPR_MERGE_COMMIT="+head,
		"LOOPR_MERGE_BRANCHES="+strings.Join(names, " "))
}

func (q *Queue) logger() *slog.Logger {
	if q.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return q.Log
}

// Tail keeps the last MaxOutput bytes written to it.
type Tail struct{ b []byte }

func (t *Tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if n := len(t.b); n > 2*MaxOutput {
		t.b = append(t.b[:0], t.b[n-MaxOutput:]...)
	}
	return len(p), nil
}

func (t *Tail) String() string {
	b := t.b
	if len(b) > MaxOutput {
		b = b[len(b)-MaxOutput:]
	}
	return strings.ToValidUTF8(string(b), "")
}
