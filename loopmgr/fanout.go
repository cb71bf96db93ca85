package loopmgr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/fanout"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/store"
)

// Best-of-N (package fanout decides; this file applies). A candidate that
// passes goes where any task goes (merging, or complete for a loop with no
// plan branch), but the merge queue takes a candidate only once it is its
// group's winner (mergingItems). decideFanout runs after every candidate's
// outcome and at every drain of the merge queue (what a crash left): it
// reads the group, asks fanout.Pick, runs the judge when asked, and in one
// transaction records the winner on every candidate and cancels the
// others; then it stops the losers' agents and removes their worktrees
// and branches. Their usage stays on their records, in the tree's.

// judgeTimeout bounds a fanout_judge run.
const judgeTimeout = 10 * time.Minute

// maxJudgeDiff bounds each candidate's diff given to the judge (and read
// to measure it), in bytes.
const maxJudgeDiff = 4 << 20

// maxJudgeOutput bounds what is kept of the judge's standard output and
// error, in bytes (its answer is its first line).
const maxJudgeOutput = 64 << 10

// candidates returns the loops of group, read in tx: the siblings of its
// first candidate that name the group (or, for candidates without a
// parent, every root that does).
func candidates(tx *store.Tx, group string) ([]loop.Loop, error) {
	first, err := tx.Get(group)
	if err != nil {
		return nil, err
	}
	var all []loop.Loop
	if first.Parent != "" {
		if all, err = tx.Children(first.Parent); err != nil {
			return nil, err
		}
	} else {
		err = tx.ForEach(func(l loop.Loop) bool {
			if l.Parent == "" {
				all = append(all, l)
			}
			return true
		})
	}
	var out []loop.Loop
	for _, l := range all {
		if l.Fanout != nil && l.Fanout.Group == group {
			out = append(out, l)
		}
	}
	return out, err
}

// stateOf says how far candidate l got, for fanout.Pick.
func stateOf(l loop.Loop) (fanout.State, time.Time) {
	switch l.Status {
	case loop.Merging, loop.AwaitingReview:
		return fanout.Passed, l.UpdatedAt
	case loop.Complete:
		return fanout.Passed, l.FinishedAt
	case loop.Failed, loop.Cancelled, loop.Expired, loop.Invalidated, loop.NeedsHuman:
		return fanout.Ended, time.Time{}
	}
	return fanout.Running, time.Time{}
}

// fanoutOutcome follows the outcome of candidate l's iteration: it may
// decide the group; and a candidate that lost while its iteration ended
// (its result dropped as stale, not cancelled) has its worktree and
// branch removed here.
func (m *Manager) fanoutOutcome(ctx context.Context, l loop.Loop) {
	if m.lostFanout(l.ID) {
		m.cleanup(ctx, l, false)
		return
	}
	m.decideFanout(ctx, l.Fanout.Group, false)
}

// decideFanout decides group when it can be and applies the decision.
// mayJudge: the caller may wait for the judge (the merge queue's
// goroutine, never the manager's); otherwise a group that needs its judge
// wakes the merge queue, whose next drain decides it.
func (m *Manager) decideFanout(ctx context.Context, group string, mayJudge bool) {
	var cands []loop.Loop
	if err := m.svc.Store.View(func(tx *store.Tx) (err error) { cands, err = candidates(tx, group); return err }); err != nil || len(cands) == 0 {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			m.log.Error("best-of-N: read the group", "group", group, "err", err)
		}
		return
	}
	for _, c := range cands {
		if c.Fanout.Winner != "" {
			return // decided already
		}
	}
	ls := m.cfg().Loop(cands[0].Type)
	if ls.FanoutPick == fanout.PickJudge && cands[0].Parent == "" {
		ls.FanoutPick = fanout.PickSmallestDiff // no merge queue to hold standalone candidates while a judge runs
	}
	diffs := map[string]string{}
	in := make([]fanout.Candidate, 0, len(cands))
	for _, c := range cands {
		st, at := stateOf(c)
		fc := fanout.Candidate{ID: c.ID, Index: c.Fanout.Index, State: st, PassedAt: at, Diff: -1}
		if st == fanout.Passed && ls.FanoutPick != "" && ls.FanoutPick != fanout.PickFirst {
			if patch, ok := m.candidateDiff(ctx, c); ok {
				diffs[c.ID], fc.Diff = patch, diffLines(patch)
			}
		}
		in = append(in, fc)
	}
	d := fanout.Pick(ls.FanoutPick, in)
	if d.Judge {
		if !mayJudge || m.svc.Untrusted() != "" {
			m.wakeMerges() // the judge is loopr.yml's command: it waits for trust, as the merge queue does
			return
		}
		d = m.judge(ctx, ls, cands[0], d, diffs)
	}
	if !d.Decided || d.Winner == "" {
		return // still racing, or no candidate passed: each keeps its own outcome
	}
	m.applyFanout(ctx, group, d)
}

// applyFanout records d's winner on every candidate of group and cancels
// the others, in one transaction, then stops their agents and removes
// their worktrees and branches.
func (m *Manager) applyFanout(ctx context.Context, group string, d fanout.Decision) {
	now := m.now()
	var losers []loop.Loop
	var stop []string
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		losers, stop = nil, nil
		cands, err := candidates(tx, group)
		if err != nil {
			return err
		}
		for _, c := range cands {
			if c.Fanout.Winner != "" {
				return errDecided
			}
			if c.ID == d.Winner {
				if st, _ := stateOf(c); st != fanout.Passed {
					return errDecided // changed since it was read: the next outcome decides again
				}
			}
		}
		for _, c := range cands {
			msg := fmt.Sprintf("best-of-%d decided: %s", c.Fanout.Of, d.Why)
			if c.ID != d.Winner {
				msg += fmt.Sprintf("; this candidate lost to %s and is cancelled", loop.ShortID(d.Winner))
			}
			if _, err := tx.AppendEvent(loop.Event{Time: now, Loop: c.ID, Kind: loop.EventFanout, Iteration: c.Iteration, Message: msg}); err != nil {
				return err
			}
			c.Fanout.Winner = d.Winner
			if err := tx.Put(c); err != nil {
				return err
			}
			if c.ID == d.Winner {
				continue
			}
			if c.Status == loop.Running {
				stop = append(stop, c.ID)
			} else {
				losers = append(losers, c)
			}
			if !loop.CanTransition(c.Status, loop.Cancelled) {
				continue // complete (a standalone candidate): only its branch goes
			}
			if _, err := control.CancelTree(tx, c, fmt.Sprintf("lost best-of-%d to %s", c.Fanout.Of, loop.ShortID(d.Winner)), now, m.o.Git != nil); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errDecided) {
		return
	}
	if err != nil {
		m.log.Error("best-of-N: record the winner", "group", group, "err", err)
		return
	}
	m.log.Info("best-of-N decided", "group", group, "winner", d.Winner, "why", d.Why)
	m.stopAgents(stop) // finish removes their worktrees and branches (cleanup)
	for _, l := range losers {
		m.removeLoser(ctx, l)
	}
	m.o.Notify()
	m.wakeMerges()
	m.Wake()
}

// errDecided: another decision, or a change, came first.
var errDecided = errors.New("best-of-N group already decided")

// removeLoser removes a losing candidate's worktree and branch.
func (m *Manager) removeLoser(ctx context.Context, l loop.Loop) {
	if m.o.Git == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	branch := l.Branch
	if branch == "" {
		if b, err := m.o.Git.Branch(ctx, l.ID, l.Title); err == nil {
			branch = b
		}
	}
	if !m.beforeRemove(ctx, l) {
		return
	}
	if err := m.o.Git.RemoveWorktree(ctx, l.ID, branch); err != nil {
		m.log.Warn("best-of-N: remove a losing candidate's worktree", "loop", l.ID, "err", err)
	}
	if l.Parent != "" {
		m.TidyTree(ctx, l.ID)
	}
}

// sweepLosers deletes the branches of losing candidates that a crash left
// (the decision commits before removeLoser runs): one listing of loopr's
// branches at start, and a deletion for each loser's that is there.
func (m *Manager) sweepLosers(ctx context.Context) {
	var lost []loop.Loop
	err := m.svc.Store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Cancelled, func(l loop.Loop) bool {
			if l.Fanout != nil && l.Fanout.Winner != "" && l.Fanout.Winner != l.ID {
				lost = append(lost, l)
			}
			return true
		})
	})
	if err != nil || len(lost) == 0 {
		return
	}
	ours, err := m.o.Git.OurBranches(ctx)
	if err != nil {
		m.log.Warn("best-of-N: list branches to sweep", "err", err)
		return
	}
	n := 0
	for _, l := range lost {
		for _, b := range []string{gitflow.BranchName(l.ID, l.Title), gitflow.LegacyBranch(l.ID)} {
			if !ours[b] {
				continue
			}
			if err := m.o.Git.RemoveWorktree(ctx, l.ID, b); err != nil {
				m.log.Warn("best-of-N: remove a losing candidate's branch", "loop", l.ID, "branch", b, "err", err)
				continue
			}
			n++
		}
	}
	if n > 0 {
		m.log.Info("best-of-N: removed branches of losing candidates a crash left", "count", n)
	}
}

// lostFanout reports whether loop id is a candidate that lost its group
// (its branch goes with its worktree).
func (m *Manager) lostFanout(id string) bool {
	l, err := m.svc.Get(id)
	return err == nil && l.Fanout != nil && l.Fanout.Winner != "" && l.Fanout.Winner != l.ID
}

// mergeable reports whether the merge queue may take l: a loop of its
// own, or its group's winner.
func mergeable(l loop.Loop) bool { return l.Fanout == nil || l.Fanout.Winner == l.ID }

// decideMerging decides the groups of merging candidates not decided yet
// (smallest_diff and judge groups whose last candidate just ended, and
// what a crash left).
func (m *Manager) decideMerging(ctx context.Context) {
	groups := map[string]bool{}
	_ = m.svc.Store.View(func(tx *store.Tx) error {
		return tx.ByStatus(loop.Merging, func(l loop.Loop) bool {
			if l.Fanout != nil && l.Fanout.Winner == "" {
				groups[l.Fanout.Group] = true
			}
			return true
		})
	})
	for g := range groups {
		m.decideFanout(ctx, g, true)
	}
}

// candidateDiff returns candidate l's change: the diff from its base to
// the commit that passed.
func (m *Manager) candidateDiff(ctx context.Context, l loop.Loop) (string, bool) {
	if m.o.Git == nil || l.Base.Commit == "" || l.Commit == "" {
		return "", false
	}
	patch, _, err := m.o.Git.Diff(ctx, l.Base.Commit, l.Commit, 0, maxJudgeDiff)
	if err != nil {
		m.log.Warn("best-of-N: the diff of a candidate", "loop", l.ID, "err", err)
		return "", false
	}
	return patch, true
}

// diffLines counts the lines a patch adds and deletes.
func diffLines(patch string) int {
	n := 0
	for l := range strings.Lines(patch) {
		if (strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-")) && !strings.HasPrefix(l, "+++ ") && !strings.HasPrefix(l, "--- ") {
			n++
		}
	}
	return n
}

// judge runs loops.<type>.fanout_judge on the passing candidates (see
// docs/artifacts.md, Best-of-N, for its contract). A judge that fails or
// names no passing candidate is journaled on the group and the first to
// pass wins, so a group never waits on a broken judge.
func (m *Manager) judge(ctx context.Context, ls config.LoopSettings, first loop.Loop, d fanout.Decision, diffs map[string]string) fanout.Decision {
	out, err := m.runJudge(ctx, ls.FanoutJudge, first, d.Passing, diffs)
	var w fanout.Candidate
	var reason string
	if err == nil {
		w, reason, err = fanout.ParseJudge(out, d.Passing)
	}
	n := first.Fanout.Of
	if err != nil {
		m.log.Warn("best-of-N: the judge failed; the first to pass wins", "group", first.Fanout.Group, "err", err)
		w = d.Passing[0]
		return fanout.Decision{Decided: true, Winner: w.ID, Passing: d.Passing,
			Why: fmt.Sprintf("the judge failed (%v), so candidate %d of %d, the first to pass, won", err, w.Index, n)}
	}
	why := fmt.Sprintf("the judge chose candidate %d of %d among the %d that passed", w.Index, n, len(d.Passing))
	if reason != "" {
		why += ": " + reason
	}
	return fanout.Decision{Decided: true, Winner: w.ID, Passing: d.Passing, Why: why}
}

// runJudge runs argv in the workspace with $LOOPR_FANOUT_DIR, a directory
// holding task.md and one <index>.diff per passing candidate, and returns
// what it printed.
func (m *Manager) runJudge(ctx context.Context, argv []string, first loop.Loop, passing []fanout.Candidate, diffs map[string]string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("loops." + first.Type + ".fanout_judge is empty")
	}
	dir, err := os.MkdirTemp(m.svc.Paths.Home, "fanout-judge-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "task.md"), []byte(first.Task+"\n"), 0o600); err != nil {
		return "", err
	}
	var idx []string
	for _, c := range passing {
		idx = append(idx, strconv.Itoa(c.Index))
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(c.Index)+".diff"), []byte(diffs[c.ID]), 0o600); err != nil {
			return "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), judgeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = m.svc.Paths.Workspace
	env := procenv.Of(m.cfg().Agent, config.DefaultProfile, m.svc.Paths.Workspace).Commands(os.Environ())
	cmd.Env = append(env, "LOOPR_FANOUT_DIR="+dir, "LOOPR_FANOUT_GROUP="+first.Fanout.Group,
		"LOOPR_FANOUT_CANDIDATES="+strings.Join(idx, " "))
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer // bounded: a judge that floods its output must not fill the daemon's memory
	cmd.Stdout, cmd.Stderr = limitWriter{&stdout, maxJudgeOutput}, limitWriter{&stderr, maxJudgeOutput}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w: %s", argv[0], err, strings.TrimSpace(lastLine(stderr.String())))
	}
	return stdout.String(), nil
}

// lastLine returns the last non-blank line of s, clipped.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
