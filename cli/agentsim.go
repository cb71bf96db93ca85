package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/simagent"
)

// ExitStatus is an error that only carries a process exit code; Main prints
// nothing for it.
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// agentSimCmd is the simulated agent `loopr demo` configures as its agent
// command. Hidden: it is a tool for the demo and for tests, not for users.
func (e *env) agentSimCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "agent-sim",
		Short:  "The simulated agent used by `loopr demo` (reads the prompt on stdin, LOOPR_* env)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code := simagent.Run(simagent.EnvFrom(os.Getenv), e.stdin, e.stdout, time.Sleep)
			if code != 0 {
				return ExitStatus(code)
			}
			return nil
		},
	}
}
