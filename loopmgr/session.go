package loopmgr

import (
	"path/filepath"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// Sessions (agent.resume). The record's Session is the agent session of
// the loop's latest run: set while the run goes (RecordSession, from the
// runner's OnSession), its Ended set with the run's outcome (ending, in
// ours), or by recover for a run a crashed daemon left. The next run
// continues it when resumeFor says so.

// resumeFor returns the session l's next run continues, or nil for a
// fresh start: only the loop's own session, made on the same agent
// profile in the same working directory (a fallback profile starts
// fresh), and only after an interruption, a rate-limit wait or a
// question (mode interrupted), or a failed iteration too (always).
func resumeFor(l loop.Loop, mode, profile, workdir string) *runner.Resume {
	s := l.Session
	if s == nil || mode == config.ResumeOff || !preset.ValidSession(s.ID) || s.Profile != profile ||
		filepath.Clean(s.Workdir) != filepath.Clean(workdir) {
		return nil
	}
	switch s.Ended {
	case "", loop.SessionInterrupted, loop.SessionRateLimited, loop.SessionAsked:
	case loop.SessionFailed:
		if mode != config.ResumeAlways {
			return nil
		}
	default:
		return nil
	}
	return &runner.Resume{Session: s.ID, Why: s.Ended}
}

// sessionEnded is how a run that ended with res left its session.
func sessionEnded(res runner.Result, stopping bool) string {
	switch {
	case res.Outcome == runner.Passed:
		return loop.SessionPassed
	case res.Outcome == runner.RateLimited:
		return loop.SessionRateLimited
	case res.Outcome == runner.Cancelled || stopping || res.Stalled || res.Transient:
		return loop.SessionInterrupted
	case res.Question != "":
		return loop.SessionAsked
	}
	return loop.SessionFailed
}

// ending is the session of the iteration whose outcome is being recorded
// (finish): ours puts it on the record with the outcome.
type ending struct {
	id        string
	iteration int
	session   *loop.Session // nil: the run reported none; the record's gets ended
	ended     string
}

// endSession sets cur's session as the run being recorded left it.
func (m *Manager) endSession(cur *loop.Loop) {
	e := m.ending
	if e == nil || e.id != cur.ID || e.iteration != cur.Iteration {
		return
	}
	switch {
	case e.session != nil:
		s := *e.session
		s.Ended = e.ended
		cur.Session = &s
	case cur.Session != nil && cur.Session.Ended == "" && cur.Session.Iteration == cur.Iteration:
		s := *cur.Session
		s.Ended = e.ended
		cur.Session = &s
	}
}

// RecordSession puts the session id the runner reports for loop id's run
// on its record (Session, Ended empty: running), so that a daemon
// restarted after a crash resumes it. It is called by the runner while
// the agent runs.
func (m *Manager) RecordSession(id, session string) {
	m.mu.Lock()
	a := m.active[id]
	profile := ""
	if a != nil {
		profile = a.agent
	}
	m.mu.Unlock()
	if a == nil || !preset.ValidSession(session) {
		return
	}
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		cur, err := tx.Get(id)
		if err != nil || cur.Status != loop.Running || cur.Lease == nil || cur.Lease.Owner != m.o.Owner || cur.Iteration != a.iteration {
			return err
		}
		if s := cur.Session; s != nil && s.ID == session && s.Ended == "" && s.Iteration == cur.Iteration {
			return nil
		}
		cur.Session = &loop.Session{ID: session, Profile: profile, Workdir: cur.Workdir, Iteration: cur.Iteration}
		return tx.Put(cur)
	})
	if err != nil {
		m.log.Warn("record the agent's session", "loop", id, "session", session, "err", err)
	}
}

// resumeSettings fills the job's session settings from the profile, and
// the session to resume.
func (m *Manager) resumeSettings(j *runner.Job, ag config.Agent, profile string) {
	j.Settings.ResumeArgs = ag.ResumeArgs
	if re, err := ag.SessionRegexp(); err == nil {
		j.Settings.SessionPattern = re
	}
	if own := filepath.Join(m.svc.Paths.Home, "prompts", "resume.md"); exists(own) {
		j.Settings.ResumePromptFile = own
	}
	j.Resume = resumeFor(j.Loop, ag.ResumeMode(), profile, j.Workdir)
}

// journalSession notes in the loop's journal a run that resumed its
// session, and one whose CLI did not know the session and started fresh.
func (m *Manager) journalSession(id string, iteration int, res runner.Result) {
	msg := res.SessionNote
	if msg == "" && res.Resumed {
		msg = "the agent resumed its session " + res.Session
	}
	if msg == "" {
		return
	}
	err := m.svc.Store.Update(func(tx *store.Tx) error {
		_, err := tx.AppendEvent(loop.Event{Time: m.now(), Loop: id, Kind: loop.EventIteration, Iteration: iteration, Message: msg})
		return err
	})
	if err != nil {
		m.log.Warn("journal the session", "loop", id, "err", err)
	}
}
