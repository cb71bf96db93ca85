package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Commit is the commit loopr was built from, set at build time with
// -ldflags "-X github.com/loopr-dev/loopr/cli.Commit=…" (make build does);
// the build's VCS stamp wins when the binary has one.
var Commit = ""

func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print loopr's version, the commit it was built from and the Go toolchain",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi, _ := debug.ReadBuildInfo()
			fmt.Fprintln(e.stdout, versionLine(bi))
			return nil
		},
	}
}

// versionLine is `loopr VERSION (commit REV[, modified], GO OS/ARCH)`. The
// commit is the build's VCS stamp (go build in a git checkout), else
// Commit (make build), else the one a module pseudo-version names (go
// install …@commit); with none of them the line says why there is none.
func versionLine(bi *debug.BuildInfo) string {
	rev, dirty := "", false
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		rev = Commit
	}
	if rev == "" && bi != nil {
		rev = pseudoCommit(bi.Main.Version)
	}
	build := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if rev == "" {
		return fmt.Sprintf("loopr %s (commit unknown: built without git information, e.g. -buildvcs=false or outside a checkout; make build records it; %s)", Version, build)
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += ", modified"
	}
	return fmt.Sprintf("loopr %s (commit %s, %s)", Version, rev, build)
}

// pseudoCommit returns the commit prefix of a Go module pseudo-version
// (v0.0.0-20260125120000-1a2b3c4d5e6f, with +incompatible or a pre-release
// before the time), "" for a release or "(devel)".
func pseudoCommit(v string) string {
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexByte(v, '-')
	if i < 0 || len(v)-i-1 != 12 {
		return ""
	}
	rev := v[i+1:]
	stamp := v[:i]
	if j := strings.LastIndexAny(stamp, "-."); j < 0 || len(stamp)-j-1 != 14 {
		return ""
	}
	for _, c := range rev {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return rev
}
