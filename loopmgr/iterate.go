package loopmgr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// maxFeedback bounds the feedback carried into the next prompt.
const maxFeedback = 8 << 10

// ownBranch reports whether loops of type t change code on their own
// branch (ralph and user types) rather than only writing an artifact.
func ownBranch(t string) bool {
	_, spawns := loop.ChildType(t)
	return !spawns
}

// root returns the root ancestor of l (l itself when it has no parent).
func (m *Manager) root(l loop.Loop) (loop.Loop, error) {
	cur := l
	err := m.svc.Store.View(func(tx *store.Tx) error {
		for i := 0; cur.Parent != "" && i < 1000; i++ {
			p, err := tx.Get(cur.Parent)
			if err != nil {
				return err
			}
			cur = p
		}
		return nil
	})
	return cur, err
}

// prepare builds the job for one iteration: settings, parent artifact and
// the working directory (a git worktree when enabled).
func (m *Manager) prepare(ctx context.Context, a *active, l loop.Loop, profile string) (runner.Job, error) {
	c := m.cfg()
	ls := c.Loop(l.Type)
	ag, ok := c.Profile(profile)
	name := profile
	if !ok { // gone in a reload since the decision
		name = c.ProfileOf(&l)
		ag, _ = c.Profile(name)
	}
	timeout := ag.TimeoutSecs
	if own := c.Loops[l.Type].TimeoutSecs; own > 0 {
		timeout = own
	} else if u, ok := c.UserTypes[l.Type]; ok && u.TimeoutSecs > 0 {
		timeout = u.TimeoutSecs
	}
	j := runner.Job{
		Loop: l, Home: m.svc.Paths.Home, Workdir: m.svc.Paths.Workspace,
		Settings: runner.Settings{
			Agent: ag.Argv(), Profile: procenv.Of(ag, name, m.svc.Paths.Workspace), Preset: ag.Preset,
			Validate: ls.Validate, PromptFile: m.promptFile(l.Type, ls.Prompt),
			Timeout:           time.Duration(timeout) * time.Second,
			RateLimitExitCode: ag.RateLimitExitCode, RateLimitPattern: ratePattern(ag.RateLimitPattern),
			StallTimeout: time.Duration(ag.StallTimeoutSecs) * time.Second,
			RetryTimeout: time.Duration(ag.RetryTimeoutSecs) * time.Second,
			Sandbox:      m.sandboxPolicy(ag),
			MCP:          ag.MCP,
		},
	}
	worker := ""
	if m.clustered() {
		worker = m.o.Cluster.Name()
	}
	j.Settings.Env = []string{"LOOPR_WORKER=" + worker}
	// The runner reads the parent's artifact (a regular file under the
	// home, bounded), so a replaced file fails the iteration, not the manager.
	j.ParentArtifact = l.TriggeredBy
	if err := m.remoteParentArtifact(&j); err != nil {
		return j, err
	}
	var br branchRec
	if m.o.Git != nil {
		var err error
		if br, err = m.worktree(ctx, l); err != nil {
			return j, fmt.Errorf("worktree: %w", err)
		}
		j.Workdir, a.synced = br.dir, br.synced
		br.refresh.apply(&j)
		if err := m.journalRefresh(l, br.refresh); err != nil {
			m.log.Warn("journal the refresh", "loop", l.ID, "err", err)
		}
	}
	if j.Workdir != l.Workdir || br.branch != "" && (br.branch != l.Branch || br.base != (loop.Base{}) && l.Base == (loop.Base{})) {
		err := m.svc.Store.Update(func(tx *store.Tx) error {
			cur, err := tx.Get(l.ID)
			if err != nil || cur.Status != loop.Running {
				return err
			}
			cur.Workdir = j.Workdir
			br.record(&cur)
			return tx.Put(cur)
		})
		if err != nil {
			return j, err
		}
		j.Loop.Workdir = j.Workdir
		br.record(&j.Loop)
	}
	if br.made {
		// After the record: a failing after_create removes the worktree,
		// and the next attempt, which makes it anew, knows the branch's base.
		if err := m.newWorktree(ctx, j.Loop, j.Workdir); err != nil {
			return j, err
		}
	}
	m.resumeSettings(&j, ag, profile)
	return j, nil
}

// remoteParentArtifact gives the job the parent's artifact when it passed
// on another machine (an etcd store; the file is not here): the store's
// copy, also written under this home's loops/<parent>/accepted/, which
// $LOOPR_PARENT_ARTIFACT then names. With no copy either, the job keeps
// the path and the runner fails the iteration with the file's reason.
func (m *Manager) remoteParentArtifact(j *runner.Job) error {
	path := j.Loop.TriggeredBy
	if path == "" || j.Loop.Parent == "" || m.svc.Store.Backend() != store.BackendEtcd {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	data, err := m.svc.ReadArtifact(path)
	if err != nil {
		return nil
	}
	local := filepath.Join(m.svc.Paths.LoopDir(j.Loop.Parent), "accepted", filepath.Base(path))
	if err := safefile.WriteAtomic(local, data, 0o600); err != nil {
		return fmt.Errorf("parent artifact: keep the store's copy here: %w", err)
	}
	j.ParentArtifact, j.ParentArtifactText = local, string(data)
	return nil
}

// promptFile resolves a type's prompt template: the configured file
// (relative to the workspace), else <home>/prompts/<type>.md when it exists,
// else "" for the built-in template.
func (m *Manager) promptFile(typ, configured string) string {
	if configured != "" {
		if filepath.IsAbs(configured) {
			return configured
		}
		return filepath.Join(m.svc.Paths.Workspace, configured)
	}
	own := filepath.Join(m.svc.Paths.Home, "prompts", typ+".md")
	if exists(own) {
		return own
	}
	return ""
}

// finish applies one iteration's result.
func (m *Manager) finish(ctx context.Context, r result) {
	m.mu.Lock()
	a := m.active[r.id]
	delete(m.active, r.id)
	m.mu.Unlock()
	if a == nil {
		return
	}
	a.cancel()
	if a.fenced {
		// The worker lost its session: another may run the loop already.
		m.log.Warn("result dropped: this worker was fenced while the loop ran", "loop", r.id, "iteration", a.iteration)
		if m.o.OnFinish != nil {
			m.o.OnFinish(r.id, time.Now())
		}
		m.Wake()
		return
	}
	now := m.now()
	l := r.job.Loop
	if l.ID == "" {
		var err error
		if l, err = m.svc.Get(r.id); err != nil {
			m.log.Error("finish: loop vanished", "loop", r.id, "err", err)
			return
		}
	}
	res := r.res
	hook := hookResultOf(r)
	if r.err != nil {
		res = runner.Result{Outcome: runner.Failed, Reason: r.err.Error(), Feedback: r.err.Error()}
		if a.stopping || a.pausing || errors.Is(r.err, context.Canceled) {
			res.Outcome = runner.Cancelled
		} else if hook != nil {
			res.Outcome = hookOutcome // before_run or after_create stopped it
		}
		// git.remote out of reach before the agent ran: no fault of the
		// loop's, so no iteration spent (up to retry.transient_max). Any
		// other preparation failure is this machine's: no iteration
		// spent either, however often (setup.go).
		var re *gitflow.RemoteError
		if res.Transient = errors.As(r.err, &re); res.Transient {
			res.TransientWhat = "git remote out of reach"
		} else {
			res.Setup = true
		}
	}
	// What the agent consumed is recorded with the outcome, in the same
	// transaction (ours adds it): whatever the outcome, and before a git
	// problem or require_changes turns a pass into a failure.
	if u := spentBy(res); u != (loop.Usage{}) {
		m.charge = &charge{id: l.ID, iteration: a.iteration, usage: u, agent: a.agent}
	}
	defer func() { m.charge = nil }()
	m.answering = &answering{id: l.ID, iteration: a.iteration, upTo: l.LastPendingSeq()}
	defer func() { m.answering = nil }()
	if r.err == nil && !res.Setup {
		e := &ending{id: l.ID, iteration: a.iteration, ended: sessionEnded(res, a.stopping || a.pausing)}
		if res.Session != "" {
			e.session = &loop.Session{ID: res.Session, Profile: a.agent, Workdir: r.job.Workdir, Iteration: a.iteration}
		}
		m.ending = e
		defer func() { m.ending = nil }()
		m.journalSession(l.ID, a.iteration, res)
	}
	if r.git.err != nil {
		// The work is not on the loop's branch: the iteration cannot
		// pass, and its worktree is kept (cleanup is skipped below).
		m.log.Error("save the agent's work", "loop", l.ID, "iteration", a.iteration, "err", r.git.err)
		why := "loopr could not save the work on " + gitflow.BranchName(l.ID, l.Title) + ": " + r.git.err.Error()
		switch res.Outcome {
		case runner.Passed:
			res = runner.Result{Outcome: runner.Failed, Reason: why, Feedback: why}
		case runner.Failed:
			res.Reason += "; " + why
			res.Feedback = why + "\n" + res.Feedback
		}
	}
	if r.git.unchanged && res.Outcome == runner.Passed && r.git.err == nil {
		why := "no changes were made"
		res = runner.Result{Outcome: runner.Failed, Reason: why, Feedback: "The agent exited 0 and validation passed, but the task's branch holds no change: " +
			"no commit and nothing left to commit since the branch was made (loops." + l.Type + ".require_changes). Make the change the task asks for; loopr commits what you leave."}
	}
	if r.hook != nil && (res.Outcome == runner.Passed || res.Outcome == runner.Failed) {
		if r.hook.OnError == config.OnErrorSuspend {
			res.Outcome = hookOutcome
		} else {
			res = afterRunFailed(res, *r.hook)
		}
	}
	if res.Transient && res.Outcome == runner.Failed && r.git.err == nil {
		res.Outcome = transientOutcome
	}
	if res.Setup && res.Outcome == runner.Failed && r.git.err == nil {
		res.Outcome = setupOutcome
	} else if res.Outcome != hookOutcome || r.hook != nil {
		delete(m.setupFails, l.ID)
	}
	var err error
	switch res.Outcome {
	case transientOutcome:
		err = m.transient(l.ID, a.iteration, res, now)
	case setupOutcome:
		err = m.setupFailed(l.ID, a.iteration, res, now)
	case hookOutcome:
		err = m.hookStopped(l.ID, a.iteration, *hook, now)
	case runner.Cancelled:
		if a.stopping {
			err = m.requeue(l.ID, a.iteration, now, "daemon stopping: requeued at the same iteration")
		} else if a.pausing {
			err = m.paused(l.ID, a.iteration, now)
		} else if r.git.err == nil {
			m.cleanup(ctx, l, false)
		}
	case runner.RateLimited:
		err = m.rateLimited(l.ID, a.iteration, a.agent, res, now)
	case runner.Passed:
		err = m.passed(ctx, l, a.iteration, a.agent, res, r.git, now)
	default:
		if m.svc.DiskFull() != nil {
			// Not the agent's fault: try again at the same iteration
			// once there is room (no loop starts while the disk is full).
			err = m.requeue(l.ID, a.iteration, now, "the disk is full: requeued at the same iteration ("+res.Reason+")")
		} else if res.Question != "" {
			err = m.asked(l.ID, a.iteration, res.Question, now)
		} else {
			err = m.failResult(l.ID, a.iteration, res, now)
		}
	}
	if err != nil {
		m.applyFailed(l, a.iteration, res, err, now)
	} else {
		m.recorded(l.ID)
	}
	if c := m.charge; c != nil {
		if !c.applied {
			// No outcome was written with it (the loop was cancelled
			// or changed while it ran): the spend is still the loop's.
			m.recordUsage(l.ID, c.usage, now)
		}
		if m.o.OnUsage != nil {
			m.o.OnUsage(l, c.agent, c.usage)
		}
		m.checkBudget(l.ID, now)
	}
	// The tree term's estimates (and fairness, when on) learn the wall
	// time of iterations that ran to a verdict (not those cancelled, rate
	// limited or never started), by the profile they ran on.
	if r.err == nil && (res.Outcome == runner.Passed || res.Outcome == runner.Failed) {
		ran := l
		ran.Agent = cmp.Or(a.agent, l.Agent)
		if err := m.svc.Observe(ran, now.Sub(a.started), now); err != nil {
			m.log.Error("observe iteration time", "loop", l.ID, "err", err)
		}
	}
	if m.clustered() {
		m.release(l.ID)
	}
	if l.Fanout != nil && res.Outcome != runner.Cancelled {
		m.fanoutOutcome(ctx, l)
	}
	if m.o.OnFinish != nil {
		m.o.OnFinish(l.ID, time.Now())
	}
	m.o.Notify()
	m.Wake()
}

// applyFailed handles a result that could not be applied. A transient
// cause (the disk is full, or the store cannot write) costs nothing: the
// loop is requeued at the same iteration once a write succeeds, with a
// backoff. Anything else (children that cannot be created, a record the
// store refuses) would fail the same way on every rerun, so it spends the
// iteration — or parks the loop at max_iterations — with feedback naming
// the problem; requeuing it for free would rerun the agent forever.
func (m *Manager) applyFailed(l loop.Loop, iteration int, res runner.Result, err error, now time.Time) {
	if transientApply(err) || m.svc.DiskFull() != nil {
		m.log.Error("apply result: will requeue at the same iteration", "loop", l.ID, "outcome", res.Outcome, "err", err)
		m.unrecorded(l.ID, iteration)
		return
	}
	reason := "the result could not be applied: " + err.Error()
	m.log.Error("apply result: spending the iteration", "loop", l.ID, "outcome", res.Outcome, "err", err)
	ferr := m.failIteration(l.ID, iteration, reason, reason, now)
	if c := m.charge; ferr != nil && c != nil && !c.applied && !transientApply(ferr) {
		// The charge may be what the store refuses (a record or today's
		// total it cannot encode or read): the same charge would fail
		// the same way on every rerun of the agent. The iteration is
		// spent without it; finish still tries to record it alone.
		m.log.Error("record failed iteration: spending it without its usage", "loop", l.ID, "usage", c.usage, "err", ferr)
		m.charge = nil
		ferr = m.failIteration(l.ID, iteration, reason+"; its usage could not be recorded either", reason, now)
		m.charge = c
	}
	if ferr != nil {
		m.log.Error("record failed iteration", "loop", l.ID, "err", ferr)
		m.unrecorded(l.ID, iteration)
	}
}

// transientApply reports whether err is one a later attempt may not meet:
// the file system is full or out of quota, or an I/O error.
func transientApply(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO)
}

// errStale means the loop is no longer ours to change (cancelled meanwhile,
// or another iteration): the result is dropped.
var errStale = errors.New("stale result")

// ours loads the loop in tx and checks that this manager still runs it at iteration.
func (m *Manager) ours(tx *store.Tx, id string, iteration int) (loop.Loop, error) {
	cur, err := tx.Get(id)
	if err != nil {
		return cur, err
	}
	if cur.Status != loop.Running || cur.Lease == nil || cur.Lease.Owner != m.o.Owner || cur.Iteration != iteration {
		return cur, errStale
	}
	m.endSession(&cur)
	if m.clustered() {
		// The fence: the loop's lease key, read here, is compared at
		// commit; a worker that lost it records nothing.
		if err := m.holds(tx, id, iteration); err != nil {
			return cur, err
		}
	}
	if c := m.charge; c != nil && c.id == id && c.iteration == iteration && !c.applied {
		// The usage of the iteration being recorded: added to the record
		// (and to today's total) by whatever writes its outcome.
		cur.Usage = cur.Usage.Add(c.usage)
		c.inTx = true // applied once the transaction commits (update)
		if err := control.AddUsageToday(tx, c.usage, m.now()); err != nil {
			return cur, err
		}
	}
	return cur, nil
}

func (m *Manager) update(id string, fn func(*store.Tx) error) error {
	if m.clustered() {
		inner := fn
		fn = func(tx *store.Tx) error {
			if err := inner(tx); err != nil {
				return err
			}
			// The loop's lease key goes with the move out of running.
			return dropLeaseKey(tx, id)
		}
	}
	err := m.svc.Store.Update(fn)
	if c := m.charge; c != nil && c.inTx {
		c.inTx, c.applied = false, err == nil // a failed transaction took the charge back
	}
	if errors.Is(err, errStale) {
		m.log.Info("result dropped: loop changed while it ran", "loop", id)
		return nil
	}
	if errors.Is(err, store.ErrFenced) {
		m.log.Warn("result dropped: this worker no longer holds the loop's lease", "loop", id, "err", err)
		return nil
	}
	return err
}

// passed records a loop whose iteration validated, with its evidence:
// merging when its branch is to be merged into its plan's branch (the
// merge queue merges it: merge.go), awaiting_review first when review is
// required (review.go), else complete or awaiting approval, spawning
// children in the same transaction.
func (m *Manager) passed(ctx context.Context, l loop.Loop, iteration int, profile string, res runner.Result, sv saved, now time.Time) error {
	approval := l.Type == loop.Plan && m.cfg().Loop(l.Type).RequireApproval
	// On an etcd store the accepted artifact goes into the store with the
	// pass: children, approve and show may run on another machine. It is
	// read here, before the transaction (no file I/O inside one).
	var artData []byte
	if res.Artifact != "" && m.svc.Store.Backend() == store.BackendEtcd {
		var err error
		if artData, err = safefile.ReadIn(m.svc.Paths.Home, res.Artifact, artifact.MaxSize); err != nil {
			return fmt.Errorf("artifact for the store: %w", err)
		}
	}
	to := loop.Complete
	err := m.update(l.ID, func(tx *store.Tx) error {
		cur, err := m.ours(tx, l.ID, iteration)
		if err != nil {
			return err
		}
		if err := m.success(tx, profile, now); err != nil {
			return err
		}
		cur.RateLimitStreak, cur.TransientRetries = 0, 0
		m.answerComments(&cur, "passed")
		if again, err := m.lateComments(tx, cur, sv.commit, res.Evidence, now); again || err != nil {
			to = loop.Pending
			return err
		}
		review, err := m.reviewRequired(tx, cur)
		if err != nil {
			return err
		}
		to = loop.Complete
		msg := fmt.Sprintf("iteration %d passed", iteration)
		short := loop.ShortID(cur.ID)
		switch {
		case review && (sv.merge || cur.Branch != ""):
			to = loop.AwaitingReview
			msg += fmt.Sprintf("; its branch %s awaits review at %s: loopr diff %s, then loopr approve %s (or reject, iterate)",
				cur.Branch, loop.ShortCommit(sv.commit), short, short)
		case sv.merge:
			to = loop.Merging
			msg += fmt.Sprintf("; its branch %s waits in the merge queue at %s", cur.Branch, loop.ShortCommit(sv.commit))
		case approval:
			to = loop.AwaitingApproval
			msg += "; plan awaits approval: loopr approve " + short
		case cur.Parent == "" && cur.Branch != "" && m.o.Git != nil && ownBranch(cur.Type):
			// A standalone loop's branch is its only result: say where.
			msg += "; its work is on branch " + cur.Branch + " (git merge " + cur.Branch + ")"
		}
		if artData != nil {
			if err := control.PutArtifact(tx, m.svc.Store, res.Artifact, cur.Artifact, artData); err != nil {
				return err
			}
		}
		if err := control.Move(tx, cur, to, now, msg, func(n *loop.Loop) {
			n.Artifact = res.Artifact
			n.Reason, n.Answer = "", ""
			n.Stalls = 0
			if to != loop.Merging {
				// A merge the queue refuses counts as a repeat of the
				// same failure: kept until the branch lands.
				n.FailureFingerprint, n.FailureRepeats = "", 0
			}
			n.Commit, n.Evidence = sv.commit, nil
			n.AddEvidence(res.Evidence...)
		}); err != nil {
			return err
		}
		if to != loop.Complete {
			return nil
		}
		cur.Status, cur.Artifact = to, res.Artifact
		if res.Doc != nil {
			kids, err := m.svc.SpawnChildren(tx, cur, *res.Doc, res.Artifact, now)
			if err != nil || len(kids) > 0 {
				return err
			}
		}
		// Done means done: the subtree this pass finishes, up to the tree.
		return control.Settle(tx, cur.ID, now, m.o.Git != nil)
	})
	if err != nil {
		return err
	}
	switch to {
	case loop.Merging:
		m.wakeMerges()
	case loop.Complete:
		m.cleanup(ctx, l, true)
	}
	return nil
}

// cleanup removes a finished loop's worktree; branches of loops that did
// not complete are kept for inspection.
func (m *Manager) cleanup(ctx context.Context, l loop.Loop, completed bool) {
	if m.o.Git == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	deleteBranch := completed && ownBranch(l.Type)
	if root, err := m.root(l); err == nil && root.ID == l.ID {
		deleteBranch = false // a standalone loop's branch is its only result
	}
	if l.Fanout != nil && m.lostFanout(l.ID) {
		deleteBranch = true // a losing best-of-N candidate's branch goes with it
	}
	branch := ""
	if deleteBranch {
		var err error
		if branch, err = m.o.Git.Branch(ctx, l.ID, l.Title); err != nil {
			m.log.Warn("remove worktree: find the branch", "loop", l.ID, "err", err)
			branch = ""
		}
	}
	if !m.beforeRemove(ctx, l) {
		return
	}
	if err := m.o.Git.RemoveWorktree(ctx, l.ID, branch); err != nil {
		m.log.Warn("remove worktree", "loop", l.ID, "err", err)
	}
	if l.Parent != "" {
		m.TidyTree(ctx, l.ID)
	}
}

// success records, in tx, that an iteration on profile ran without a rate
// limit: the profile's consecutive hits start again from the first.
func (m *Manager) success(tx *store.Tx, profile string, now time.Time) error {
	limits, err := control.LoadLimits(tx)
	if err != nil {
		return err
	}
	st, ok := limits[profile]
	if !ok || st.Hits == 0 {
		return nil
	}
	st.Success(now)
	limits[profile] = st
	return control.SaveLimits(tx, limits)
}

// charge is the usage of the iteration whose outcome is being recorded.
type charge struct {
	id        string
	iteration int
	usage     loop.Usage
	agent     string // the profile the iteration ran on
	applied   bool   // a committed transaction carried it
	inTx      bool   // the transaction under way carries it (ours)
}

// spentBy returns what an iteration consumed: the usage the agent
// reported with its agent time, as the runner wrote them to usage.json;
// for a result that carries no agent time, the time between the agent's
// start and end. Counted once: the runner's agent time is that same span.
func spentBy(res runner.Result) loop.Usage {
	u := res.Usage
	if u.AgentSeconds == 0 && !res.AgentStart.IsZero() && res.AgentEnd.After(res.AgentStart) {
		u.AgentSeconds = res.AgentEnd.Sub(res.AgentStart).Seconds()
	}
	return u
}

// checkBudget holds the loops of id's tree whose budget is spent
// (needs_human, reason budget) once an iteration was recorded.
func (m *Manager) checkBudget(id string, now time.Time) {
	spent := false
	err := m.svc.Store.View(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		spent, err = m.svc.BudgetSpentFor(tx, l)
		return err
	})
	if err != nil || !spent {
		if err != nil {
			m.log.Error("budget check", "loop", id, "err", err)
		}
		return
	}
	var held []string
	err = m.svc.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		held, err = m.svc.HoldForBudget(tx, l, now)
		return err
	})
	if err != nil {
		m.log.Error("budget check", "loop", id, "err", err)
		return
	}
	if len(held) > 0 {
		m.log.Warn("budget spent: loops wait for a person", "loop", id, "held", len(held))
	}
}

// recordUsage adds what an iteration consumed to loop id, whatever its
// status, when no outcome was recorded with it.
func (m *Manager) recordUsage(id string, u loop.Usage, now time.Time) {
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		cur, err := tx.Get(id)
		if err != nil {
			return err
		}
		cur.Usage = cur.Usage.Add(u)
		if err := tx.Put(cur); err != nil {
			return err
		}
		return control.AddUsageToday(tx, u, now)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Error("record usage", "loop", id, "err", err)
	}
}
