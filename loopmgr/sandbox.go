package loopmgr

import (
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/sandbox"
)

// sandboxPolicy is profile ag's sandbox, applied to this workspace.
func (m *Manager) sandboxPolicy(ag config.Agent) sandbox.Policy {
	return sandbox.PolicyOf(ag, m.svc.Paths.Workspace, m.svc.Paths.Config, m.svc.Paths.Home)
}

// SandboxRefused journals that the sandbox's proxy refused target to the
// agent of iteration of loop id (the runner's OnRefused: once a host and
// process run).
func (m *Manager) SandboxRefused(id string, iteration int, target string) {
	m.journal(loop.Loop{ID: id, Iteration: iteration}, "sandbox: the proxy refused "+target+": not in sandbox.allow_hosts")
}
