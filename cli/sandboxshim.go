package cli

import (
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/sandbox"
)

// sandboxShimCmd is `loopr sandbox-shim`, which the runner starts inside a
// sandbox with network allow in front of the agent (sandbox.Shim). Hidden:
// loopr runs it; nobody types it.
func (e *env) sandboxShimCmd() *cobra.Command {
	return &cobra.Command{
		Use:                sandbox.ShimCommand + " --proxy SOCKET [--tunnel HOST:PORT]... -- ARGV...",
		Short:              "Bridge a sandboxed agent's network to loopr's proxy (started by loopr)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := sandbox.Shim(args, e.stderr); code != 0 {
				return ExitStatus(code)
			}
			return nil
		},
	}
}
