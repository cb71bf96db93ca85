package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print loopr's version, the commit it was built from and the Go toolchain",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(e.stdout, versionLine())
			return nil
		},
	}
}

// versionLine is `loopr VERSION (commit REV[, modified], GO OS/ARCH)`; the
// commit comes from the build's VCS stamp when the binary has one.
func versionLine() string {
	rev, dirty := "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	build := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if rev == "" {
		return fmt.Sprintf("loopr %s (%s)", Version, build)
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += ", modified"
	}
	return fmt.Sprintf("loopr %s (commit %s, %s)", Version, rev, build)
}
