package daemon

import (
	"os"
	"strings"

	"github.com/loopr-dev/loopr/procenv"
)

// warnWithheld logs, once at start, the proxy variables of the daemon's
// environment that a profile's agents do not get (package procenv): an
// agent behind a proxy would otherwise only time out.
func (d *daemon) warnWithheld() {
	c := d.config()
	for _, name := range c.Profiles() {
		ag, _ := c.Profile(name)
		p := procenv.Of(ag, name, d.paths.Workspace)
		if held := p.Withheld(os.Environ()); len(held) > 0 {
			d.log.Warn("set where the daemon started, but not passed to agents: add them to env_pass if the agents need them (docs/security.md)",
				"profile", p.Key, "variables", strings.Join(held, ","))
		}
	}
}
