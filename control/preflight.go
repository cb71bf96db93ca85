package control

import (
	"maps"
	"os/exec"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preflight"
)

// PreflightEvery is how long a preflight result is trusted: a binary
// installed meanwhile clears its problem within this time. A configuration
// reload checks again at once.
const PreflightEvery = 15 * time.Second

// gateState caches the preflight result and holds the git state the
// daemon found.
type gateState struct {
	mu       sync.Mutex
	on       bool           // EnableWorkspaceGates was called
	cfg      *config.Config // the configuration checked; nil: none yet
	at       time.Time
	problems []preflight.Problem
	byType   map[string]string
	checking bool // a check runs (outside mu: it runs git and searches PATH)

	gitSet bool   // the daemon said whether loops get git worktrees
	noGit  string // why not, "" when they do

	// placement: on the scheduler of several workers, the types no live
	// worker can take now (SetPlacement), held like preflight problems.
	placement map[string]string

	trust *api.Trust // what waits for `loopr trust`; nil: nothing (trust.go)
}

// SetPlacement records, on the scheduler of an etcd store's workers, the
// loop types no live worker can take now — none has the type's
// worker_labels, or every one that has them is full — with the reason.
// Their loops are held by the preflight gate with that text, so they do
// not take the global slots from loops a worker can run. nil clears it.
func (s *Service) SetPlacement(holds map[string]string) {
	s.gates.mu.Lock()
	s.gates.placement = holds
	s.gates.mu.Unlock()
}

// Preflight returns what would fail every iteration of some loop types in
// this workspace (package preflight), checked at most every PreflightEvery
// and again whenever the configuration changes. The check runs git and
// searches PATH: while another caller runs it, this one gets the previous
// result rather than wait.
func (s *Service) Preflight() []preflight.Problem {
	ps, _ := s.preflight(true)
	return ps
}

// lastPreflight is the result of the last check, whatever its age; it
// checks only when none ran yet (a command with no daemon). Status reads
// it: `loopr status` never waits for git or for the manager's tick, which
// checks again every PreflightEvery.
func (s *Service) lastPreflight() []preflight.Problem {
	ps, _ := s.preflight(false)
	return ps
}

// EnableWorkspaceGates turns on the preflight and no_git gates: the daemon
// and the CLI do, so that what they plan depends on this machine's PATH
// and this workspace; a Service made for a test of something else plans
// without them.
func (s *Service) EnableWorkspaceGates() {
	s.gates.mu.Lock()
	s.gates.on = true
	s.gates.mu.Unlock()
}

// preflight returns the preflight problems and their reason text per type.
// A stale result is checked again when recheck is set; the check runs
// outside gates.mu, so that no caller waits for another's.
func (s *Service) preflight(recheck bool) ([]preflight.Problem, map[string]string) {
	c := s.cfg()
	now := s.now()
	g := &s.gates
	g.mu.Lock()
	stale := g.cfg != c || now.Sub(g.at) >= PreflightEvery || now.Before(g.at)
	if !g.on || !stale || g.checking || (!recheck && g.cfg != nil) {
		defer g.mu.Unlock()
		if !g.on {
			return nil, nil
		}
		return g.problems, g.byType
	}
	g.checking = true
	look := s.look
	g.mu.Unlock()
	problems := preflight.Check(c, preflight.Env{Workspace: s.Paths.Workspace, LookPath: look})
	byType := preflight.ByType(problems)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.checking = false
	g.problems, g.byType = problems, byType
	g.cfg, g.at = c, now
	return problems, byType
}

// SetGit records whether loops get their own git worktrees, as the daemon
// found when it opened the repository: why is "" when they do, else the
// reason they share the workspace directory (reason no_git).
func (s *Service) SetGit(why string) {
	s.gates.mu.Lock()
	s.gates.gitSet, s.gates.noGit = true, why
	s.gates.mu.Unlock()
}

// NoGit returns why loops share the workspace directory, "" when each gets
// a git worktree: what the daemon found, else (no daemon) what it would
// find — git.worktrees off, no git on PATH, or no repository around the
// workspace.
func (s *Service) NoGit() string {
	s.gates.mu.Lock()
	on, set, why, look := s.gates.on, s.gates.gitSet, s.gates.noGit, s.look
	s.gates.mu.Unlock()
	if !on || set {
		return why
	}
	return GitOff(s.cfg(), s.Paths.Workspace, look)
}

// GitOff says why loops in workspace under c would share the workspace
// directory — git.worktrees off, no git on PATH (look; nil: exec.LookPath),
// no repository around the workspace — or "" when each would get a git
// worktree. The daemon knows for sure (it opens the repository); this is
// what the CLI says without one.
func GitOff(c *config.Config, workspace string, look func(string) (string, error)) string {
	if look == nil {
		look = exec.LookPath
	}
	switch {
	case !c.Git.Worktrees:
		return NoGitText("git.worktrees is false")
	case func() bool { _, err := look("git"); return err != nil }():
		return NoGitText("git is not on PATH")
	case !preflight.InRepo(workspace):
		return NoGitText("the workspace is not a git repository")
	}
	return ""
}

// NoGitText is the no_git reason text for a cause.
func NoGitText(cause string) string {
	return cause + ": loops of leaf types (ralph) share the workspace directory, so they run one at a time"
}

// SetLookPath replaces exec.LookPath in the checks (tests); the next
// check runs at once.
func (s *Service) SetLookPath(look func(file string) (string, error)) {
	s.gates.mu.Lock()
	s.look, s.gates.cfg = look, nil
	s.gates.mu.Unlock()
}

// gateInputs returns the scheduler inputs of the preflight and no_git
// gates: the reason text per affected type, and the types sharing the
// workspace directory with the reason text.
func (s *Service) gateInputs() (pre map[string]string, noGit map[string]bool, noGitText string) {
	_, pre = s.preflight(true)
	s.gates.mu.Lock()
	if len(s.gates.placement) > 0 {
		merged := make(map[string]string, len(pre)+len(s.gates.placement))
		maps.Copy(merged, s.gates.placement)
		maps.Copy(merged, pre) // a real preflight problem says more
		pre = merged
	}
	s.gates.mu.Unlock()
	if noGitText = s.NoGit(); noGitText != "" {
		noGit = map[string]bool{}
		for _, t := range s.cfg().Types() {
			if _, spawns := loop.ChildType(t); !spawns {
				noGit[t] = true
			}
		}
	}
	return pre, noGit, noGitText
}

// APIProblems converts preflight problems to their wire form.
func APIProblems(c *config.Config, ps []preflight.Problem) []api.Problem {
	out := make([]api.Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, api.Problem{Types: p.Types, TypesText: p.TypesText(c), Key: p.Key, What: p.What, Fix: p.Fix})
	}
	return out
}
