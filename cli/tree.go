package cli

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// CommandTree returns loopr's command tree, unexecuted: for tests that walk
// it (the docs test checks every command is documented) and for tools.
func CommandTree() *cobra.Command {
	e := &env{stdout: io.Discard, stderr: io.Discard, stdin: os.Stdin, getenv: os.Getenv, now: time.Now}
	return e.rootCmd()
}
