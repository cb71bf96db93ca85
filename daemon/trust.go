package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/trust"
)

// Trust (package trust, docs/security.md): a loopr.yml whose commands are
// not trusted on this machine runs nothing of them. At start, such a
// configuration is put in force with every loop held back (reason
// untrusted), and no hook, merge, landing, notify.command or webhook runs
// (control.Service.Untrusted). A reload whose commands are not trusted,
// while those in force are, is held whole: the configuration in force
// stays, the journal and `loopr status` (NEEDS YOU) name the changed
// commands, and SIGHUP after `loopr trust` (the command sends it) applies
// the file.

// startTrust decides, at start, whether the configuration may run its
// commands, and says so in the log and the journal when it may not.
func (d *daemon) startTrust() {
	c := d.config()
	if d.o.Trusted {
		return
	}
	if t, why := control.CheckTrust(c, os.Getenv); t != nil {
		d.untrusted(t, why)
	}
}

// untrusted puts t in force: the configuration's loops wait until `loopr
// trust`.
func (d *daemon) untrusted(t *api.Trust, why string) {
	if cur := d.svc.Trust(); cur != nil && !cur.Held && slices.Equal(cur.Commands, t.Commands) {
		return // said already
	}
	d.svc.SetTrust(t)
	msg := "loopr.yml is not trusted (" + why + "): no agent, validate command, hook, notify.command or webhook of it runs until `loopr trust`; it runs: " + strings.Join(t.Commands, "; ")
	d.log.Warn("loopr.yml is not trusted: nothing of it runs until `loopr trust`", "file", t.File, "why", why)
	d.journal(loop.EventConfig, msg)
}

// hold keeps the configuration in force while next, whose commands are
// not trusted, waits for `loopr trust`.
func (d *daemon) hold(next *config.Config) {
	var lines []string
	for _, cmd := range trust.Changed(d.config(), next) {
		lines = append(lines, cmd.String())
	}
	if len(lines) == 0 {
		lines = []string{"(a command-bearing setting changed)"}
	}
	if t := d.svc.Trust(); t != nil && t.Held && slices.Equal(t.Commands, lines) {
		return
	}
	text := filepath.Base(next.File) + " changes commands not trusted on this machine; the previous configuration stays in force until `loopr trust`"
	d.svc.SetTrust(&api.Trust{File: next.File, Held: true, Commands: lines, Since: time.Now().UTC(), Text: text, Action: "loopr trust"})
	d.metrics.reload("held")
	d.log.Warn("config reload held: its commands are not trusted", "file", next.File, "changed", strings.Join(lines, "; "))
	d.journal(loop.EventConfig, "config reload held: "+text+"; changed: "+strings.Join(lines, "; "))
}

// trusted clears what waited for trust, and wakes what it held back.
func (d *daemon) trusted(c *config.Config) {
	if d.svc.Trust() == nil {
		return
	}
	d.svc.SetTrust(nil)
	d.log.Info("loopr.yml trusted: its commands run", "file", c.File)
	d.journal(loop.EventConfig, "loopr.yml trusted: its commands run")
	if d.mgr != nil {
		d.mgr.Wake()
		d.mgr.WakeMerges()
	}
}

// gateReload decides what a reload of next does: apply (true), after
// clearing or setting the untrusted state, or hold it (false).
func (d *daemon) gateReload(next *config.Config) bool {
	t, why := control.CheckTrust(next, os.Getenv)
	switch {
	case t == nil && why == trust.WhyBuiltin && d.svc.Untrusted() == "" && d.dropsCommands(next):
		d.hold(next) // back to the built-in commands: still a change (a sandbox dropped)
		return false
	case t == nil:
		d.trusted(next)
		return true
	case d.svc.Untrusted() == "" && trust.Fingerprint(next) == trust.Fingerprint(d.config()):
		d.trusted(next) // the commands in force, trusted: only other keys changed (or a held change was undone)
		return true
	case d.svc.Untrusted() != "":
		d.untrusted(t, why) // nothing runs either way: the file's settings apply, its commands wait
		return true
	}
	d.hold(next)
	return false
}

// dropsCommands reports whether next, whose commands are loopr's built-in
// ones, changes the trusted commands in force without `loopr trust` having
// recorded it: a checkout or a landed commit that reverts loopr.yml to the
// defaults would otherwise drop its sandbox, env and hooks unasked.
func (d *daemon) dropsCommands(next *config.Config) bool {
	if trust.Fingerprint(next) == trust.Fingerprint(d.config()) {
		return false
	}
	store, err := trust.DefaultStore(os.Getenv)
	if err != nil {
		return true
	}
	ok, err := store.Recorded(next)
	return err != nil || !ok
}
