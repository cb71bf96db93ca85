package control

import (
	"maps"
	"os"
	"slices"
	"sort"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/sandbox"
)

// SandboxStatus says, per agent profile of c (the default first), where
// its agents run. A profile's allow list by default includes its preset's
// base URL as the daemon's environment and the profile's env: set it.
func SandboxStatus(c *config.Config) []api.ProfileSandbox {
	names := []string{config.DefaultProfile}
	var others []string
	for n := range c.Agents {
		if n != config.DefaultProfile {
			others = append(others, n)
		}
	}
	sort.Strings(others)
	out := make([]api.ProfileSandbox, 0, len(others)+1)
	for _, n := range append(names, others...) {
		a, ok := c.Profile(n)
		if !ok {
			continue
		}
		p := sandbox.Policy{Sandbox: a.Sandbox, Preset: a.Preset}
		ps := api.ProfileSandbox{Profile: n, Runner: a.Sandbox.RunnerOrDefault()}
		env := os.Environ()
		for _, k := range slices.Sorted(maps.Keys(a.Env)) {
			env = append(env, k+"="+a.Env[k])
		}
		ps.Text = p.Describe(env)
		if p.On() {
			ps.Network = a.Sandbox.NetworkOrDefault()
			if ps.Network == config.NetworkAllow {
				ps.AllowHosts = p.AllowList(env)
			}
		}
		out = append(out, ps)
	}
	return out
}
