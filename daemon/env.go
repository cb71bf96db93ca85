package daemon

import (
	"os"
	"strings"

	"github.com/loopr-dev/loopr/procenv"
)

// learnSecrets gives the daemon's Redactor the secrets of every profile
// of the configuration in force that can be read now, at start and after
// each reload: a value is then redacted before any agent of its own
// profile has started (after a restart, text that holds it may come from
// another profile's agent, which found the secret's file in the
// workspace). Each agent start reads its profile's again (runner).
func (d *daemon) learnSecrets() {
	c := d.config()
	for _, name := range c.Profiles() {
		ag, _ := c.Profile(name)
		for _, v := range procenv.Of(ag, name, d.paths.Workspace).Known(os.LookupEnv) {
			d.redact.Add(v.Name, v.Value)
		}
	}
}

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
