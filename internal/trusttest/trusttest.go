// Package trusttest gives a test binary that starts daemons from
// loopr.yml files a trust file of its own: XDG_CONFIG_HOME is a new
// private directory (the machine's ~/.config/loopr is never read or
// written) and LOOPR_TRUST_ALL=1 trusts every file, as CI does. Tests of
// trust itself clear LOOPR_TRUST_ALL for the processes they start (a later
// entry of cmd.Env wins).
package trusttest

import (
	"fmt"
	"os"

	"github.com/loopr-dev/loopr/trust"
)

// Setup sets XDG_CONFIG_HOME and LOOPR_TRUST_ALL for this process and the
// ones it starts; the returned func removes the directory. Call it from
// TestMain, before m.Run.
func Setup() (cleanup func()) {
	dir, err := os.MkdirTemp("", "loopr-test-config-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "trusttest:", err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Setenv(trust.AllEnv, "1")
	return func() { os.RemoveAll(dir) }
}
