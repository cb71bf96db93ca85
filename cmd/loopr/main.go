// Command loopr runs hierarchical loops of autonomous coding agents on a
// repository. See the README for the quick start.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/loopr-dev/loopr/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
