package loopmgr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/mergequeue"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// The merge queue's coordinator (package mergequeue merges).
//
// A loop whose branch is to be merged into its plan's branch is recorded
// merging when its iteration passes (passed): its evidence and the
// commit that passed are durable, its iteration is spent, and it holds no
// lease, so nothing takes it for a lost running loop and its agent never
// runs again. A goroutine of the manager, runMerges, drains every plan
// branch with merging loops through mergequeue.Queue.Run: under the
// branch's merge locks it reads the plan's merging loops (mergingItems),
// checks right before the branch moves that they still are (stillMerging),
// and records each outcome (mergeSink): complete with merge.validate's
// evidence, or back to pending at the next iteration with the conflict or
// merge.validate's output as feedback. Any daemon's queue finishes the
// merges another left: at its start (a crash after the pass was
// recorded), whenever a pass is recorded here or (on etcd) anywhere, and
// every mergeRecheck.

// mergeRecheck is how often the queue looks for merging loops unbidden;
// after a failed drain it tries again sooner, then backs off to
// mergeRetryMax.
const (
	mergeRecheck  = 10 * time.Second
	mergeRetryMax = time.Minute
)

// errNoLongerMerging: a loop of a batch changed (cancelled, say) while the
// queue validated it; nothing moves, and the next drain reads them again.
var errNoLongerMerging = errors.New("no longer merging")

// WakeMerges asks the merge queue to look for merging loops now (a
// reviewed task was approved).
func (m *Manager) WakeMerges() { m.wakeMerges() }

// wakeMerges asks the merge queue to look for merging loops now.
func (m *Manager) wakeMerges() {
	select {
	case m.mergeWake <- struct{}{}:
	default:
	}
}

// runMerges drains the merge queue until ctx ends.
func (m *Manager) runMerges(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.mergeWake:
		case <-timer.C:
		}
		if m.drainMerges(ctx) {
			fails = 0
		} else {
			fails++
		}
		next := mergeRecheck
		if fails > 0 {
			next = min(time.Second<<min(fails, 6), mergeRetryMax)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// drainMerges drains every plan branch with merging loops, one after the
// other; it reports whether every drain went through.
func (m *Manager) drainMerges(ctx context.Context) bool {
	if m.svc.Untrusted() != "" {
		return true // merge.validate and before_merge are the file's: they wait for `loopr trust` (it wakes the queue)
	}
	m.decideMerging(ctx) // best-of-N: only a group's winner merges (fanout.go)
	roots, err := m.mergingPlans()
	if err != nil {
		m.log.Error("merge queue: list merging loops", "err", err)
		return false
	}
	ok := true
	for _, root := range roots {
		if ctx.Err() != nil {
			return ok
		}
		into, err := m.o.Git.Branch(ctx, root.ID, root.Title)
		if err != nil {
			m.log.Error("merge queue: the plan branch", "plan", root.ID, "err", err)
			ok = false
			continue
		}
		c := m.cfg()
		sink := &mergeSink{m: m, ctx: ctx, into: into}
		st, err := m.o.Queue.Run(ctx, mergequeue.Plan{
			Into: into, Batch: c.Merge.Batch, Validate: c.Merge.Validate,
			// The default profile's: a batch merges loops of any profile.
			Env:     procenv.Of(c.Agent, config.DefaultProfile, m.svc.Paths.Workspace).Commands(os.Environ()),
			Sandbox: m.mergeSandbox(c, root),
			Items:   func() ([]mergequeue.Item, error) { return m.mergingItems(root.ID, sink) },
			Fence:   func(_ context.Context, items []mergequeue.Item) error { return m.stillMerging(items) },
			Before:  m.beforeMerge,
			Sink:    sink,
		})
		if st.Trials > 0 {
			m.log.Info("merge queue: drained", "into", into, "landed", st.Landed, "sent back", st.Rejected,
				"validation runs", st.Validations, "tries", st.Trials)
		}
		if err != nil && ctx.Err() == nil {
			m.log.Warn("merge queue: will try again", "into", into, "err", err)
			ok = false
		}
		sink.tidy() // outside the merge locks: the tree's tidy-up takes them
	}
	return ok
}

// mergeSandbox is the sandbox merge.validate runs in: the default
// profile's (a batch merges loops of any profile), with the plan's private
// home; nil when the runner cannot make one (a fake).
func (m *Manager) mergeSandbox(c *config.Config, plan loop.Loop) func(dir string, env []string) (func([]string) ([]string, error), func(), error) {
	sb, ok := m.o.Runner.(sandboxer)
	if !ok {
		return nil
	}
	s := runner.Settings{Sandbox: m.sandboxPolicy(c.Agent), Preset: c.Agent.Preset}
	return func(dir string, env []string) (func([]string) ([]string, error), func(), error) {
		return sb.CheckSandbox(s, plan, dir, env)
	}
}

// mergingPlans returns the root plan of every merging loop, once each, in
// id order.
func (m *Manager) mergingPlans() ([]loop.Loop, error) {
	roots := map[string]loop.Loop{}
	err := m.svc.Store.View(func(tx *store.Tx) error {
		var merging []loop.Loop
		if err := tx.ByStatus(loop.Merging, func(l loop.Loop) bool { merging = append(merging, l); return true }); err != nil {
			return err
		}
		for _, l := range merging {
			root, err := rootIn(tx, l)
			if err == nil && root.Type == loop.Plan && root.ID != l.ID {
				roots[root.ID] = root
			}
		}
		return nil
	})
	out := make([]loop.Loop, 0, len(roots))
	for _, id := range slices.Sorted(mapKeys(roots)) {
		out = append(out, roots[id])
	}
	return out, err
}

// rootIn returns the root ancestor of l, read in tx.
func rootIn(tx *store.Tx, l loop.Loop) (loop.Loop, error) {
	cur := l
	for i := 0; cur.Parent != "" && i < 1000; i++ {
		p, err := tx.Get(cur.Parent)
		if err != nil {
			return cur, err
		}
		cur = p
	}
	return cur, nil
}

// mergingItems lists the merging loops of root's tree in the order their
// passes were recorded. One without a commit to merge (none was recorded)
// is sent back through sink.
func (m *Manager) mergingItems(root string, sink *mergeSink) ([]mergequeue.Item, error) {
	var merging []loop.Loop
	err := m.svc.Store.View(func(tx *store.Tx) error {
		var all []loop.Loop
		if err := tx.ByStatus(loop.Merging, func(l loop.Loop) bool { all = append(all, l); return true }); err != nil {
			return err
		}
		for _, l := range all {
			if !mergeable(l) {
				continue // a best-of-N candidate whose group is not decided (or that lost)
			}
			if r, err := rootIn(tx, l); err == nil && r.ID == root && l.ID != root {
				merging = append(merging, l)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(merging, func(a, b loop.Loop) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	var out []mergequeue.Item
	for _, l := range merging {
		it := mergequeue.Item{ID: l.ID, Branch: l.Branch, Commit: l.Commit, Iteration: l.Iteration}
		if it.Branch == "" {
			it.Branch = gitflow.BranchName(l.ID, l.Title)
		}
		if it.Commit == "" {
			sink.Rejected(it, errors.New("no commit of its branch was recorded with the pass"), nil)
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

// stillMerging is the queue's fence: every item is still merging at the
// iteration and commit it was read with.
func (m *Manager) stillMerging(items []mergequeue.Item) error {
	return m.svc.Store.View(func(tx *store.Tx) error {
		for _, it := range items {
			cur, err := tx.Get(it.ID)
			if err != nil {
				return fmt.Errorf("loop %s: %w", it.ID, err)
			}
			if cur.Status != loop.Merging || cur.Iteration != it.Iteration || cur.Commit != it.Commit {
				return fmt.Errorf("loop %s is %s at iteration %d: %w", it.ID, cur.Status, cur.Iteration, errNoLongerMerging)
			}
		}
		return nil
	})
}

// mergeSink records the queue's outcomes in the store.
type mergeSink struct {
	m     *Manager
	ctx   context.Context
	into  string
	order []loop.Loop // landed, for tidy
}

// Landed completes the items, adding the evidence of the merge.validate
// that admitted them, in one transaction; then their worktrees and
// branches go. Items no longer merging at their iteration are left alone.
func (s *mergeSink) Landed(items []mergequeue.Item, a mergequeue.Attempt) {
	m := s.m
	now := m.now()
	msg := "already on " + s.into + " (merged by an earlier run of the merge queue)"
	if a.Head != "" {
		msg = fmt.Sprintf("merged into %s at %s", s.into, loop.ShortCommit(a.Head))
		if n := len(a.Merged); n > 1 {
			msg += fmt.Sprintf(" in a batch of %d", n)
		}
		if a.Validated {
			msg += "; merge.validate passed"
		}
	}
	var done []loop.Loop
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		done = done[:0]
		for _, it := range items {
			cur, err := tx.Get(it.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if cur.Status != loop.Merging || cur.Iteration != it.Iteration {
				continue
			}
			if err := control.Move(tx, cur, loop.Complete, now, msg, func(n *loop.Loop) {
				n.AddEvidence(a.Evidence...)
				n.FailureFingerprint, n.FailureRepeats = "", 0
			}); err != nil {
				return err
			}
			cur.Status = loop.Complete
			if err := control.Settle(tx, cur.ID, now, m.o.Git != nil); err != nil {
				return err
			}
			done = append(done, cur)
		}
		return nil
	})
	if err != nil {
		// Their commits are on the plan branch: the next drain finds
		// them there and records them.
		m.log.Error("merge queue: record landed loops", "into", s.into, "err", err)
		return
	}
	s.order = append(s.order, done...)
	m.afterMerges()
}

// tidy removes the worktrees and branches of the loops that landed (and,
// once their tree is done, its plan and merge worktrees); it runs after
// the queue let go of the plan branch's merge locks.
func (s *mergeSink) tidy() {
	m := s.m
	for _, l := range s.order {
		if m.o.Git.Remote != "" {
			if err := m.o.Git.DeleteRemoteBranchAt(s.ctx, l.Branch, l.Commit); err != nil {
				m.log.Warn("delete the merged branch on the remote", "loop", l.ID, "branch", l.Branch, "err", err)
			}
		}
		if l.Workdir != "" {
			m.runHook(s.ctx, l, config.AfterMerge, l.Workdir, l.Workdir) // after the fact: a failure is journaled only
		}
		m.cleanup(s.ctx, l, true)
	}
	s.order = nil
}

// Rejected sends the item's loop back to pending at its next iteration
// (or parks it, as any failed iteration) with the conflict or
// merge.validate's output as feedback.
func (s *mergeSink) Rejected(it mergequeue.Item, conflict error, failed *mergequeue.Attempt) {
	m := s.m
	now := m.now()
	res := s.feedback(conflict, failed)
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		cur, err := tx.Get(it.ID)
		if err != nil || cur.Status != loop.Merging || cur.Iteration != it.Iteration {
			return err
		}
		cur.Commit = ""
		if failed != nil {
			cur.AddEvidence(failed.Evidence...)
		}
		if failed != nil && failed.Suspend {
			return m.toNeeds(tx, cur, loop.NeedsHook, failed.Reason+"\nEnd of its output:\n"+failed.Output, res.Feedback, now)
		}
		return m.failIn(tx, cur, res, now)
	})
	if err != nil {
		m.log.Error("merge queue: send a loop back", "loop", it.ID, "err", err)
		return
	}
	m.log.Info("merge queue: sent back", "loop", it.ID, "into", s.into, "reason", res.Reason)
	m.afterMerges()
}

// feedback words a rejection for the journal and the loop's next prompt.
func (s *mergeSink) feedback(conflict error, failed *mergequeue.Attempt) runner.Result {
	res := runner.Result{Outcome: runner.Failed}
	var ce *gitflow.ConflictError
	switch {
	case errors.As(conflict, &ce):
		res.Reason = "merge: " + ce.Error()
		res.Feedback = conflictFeedback(ce, s.m.cfg().Merge.Refresh)
	case conflict != nil:
		res.Reason = "merge: " + conflict.Error()
		res.Feedback = res.Reason
	case hookRefused(failed):
		res.Reason = fmt.Sprintf("the merge into %s: %s", s.into, failed.Reason)
		res.Feedback = fmt.Sprintf("Your branch passed its own validation and merged into the plan branch %s (commit %s), but the before_merge hook refused the result, "+
			"so it was not merged: %s\nEnd of its output:\n%s", s.into, loop.ShortCommit(failed.Head), failed.Reason, failed.Output)
	default:
		with := "alone"
		if n := len(failed.Merged); n > 1 {
			with = fmt.Sprintf("in a batch of %d; the others landed without it", n)
		}
		res.Reason = fmt.Sprintf("merge.validate failed on the merge into %s: %s", s.into, failed.Reason)
		res.Feedback = fmt.Sprintf("Your branch passed its own validation, but merge.validate failed on the result of merging it into the plan branch %s "+
			"(commit %s, merged %s), so it was not merged. The plan branch has moved on since your branch started: make your change work with what is on it now.\n"+
			"End of merge.validate's output:\n%s", s.into, loop.ShortCommit(failed.Head), with, failed.Output)
	}
	return res
}

// afterMerges tells the rest of the daemon that records changed: the
// event stream, and the scheduler (a loop back to pending; a finished
// subtree).
func (m *Manager) afterMerges() {
	m.o.Notify()
	m.Wake()
}
