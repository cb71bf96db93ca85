package loopmgr

import (
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/sandbox"
)

// sandboxPolicy is profile ag's sandbox, applied to this workspace.
func (m *Manager) sandboxPolicy(ag config.Agent) sandbox.Policy {
	return sandbox.Policy{Sandbox: ag.Sandbox, Preset: ag.Preset,
		Workspace: m.svc.Paths.Workspace, Config: m.svc.Paths.Config, State: m.svc.Paths.Home}
}
