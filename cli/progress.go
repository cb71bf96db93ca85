package cli

import (
	"fmt"
	"io"
	"time"
)

// The wait of a long operation that the daemon runs in one request
// (`loopr land`: merge.validate may take many minutes): without a sign of
// life a person cannot tell a slow test suite from a hung command.

// waitTick is how often a terminal's line is rewritten; waitNote how often
// a line is added where stderr is not a terminal (a CI log).
const (
	waitTick = time.Second
	waitNote = 30 * time.Second
)

// showWaiting writes "what… 12s" to w while the returned stop has not been
// called: rewritten in place every second on a terminal (and erased by
// stop), else a new line every 30 seconds. It never writes to stdout, so
// the operation's result (and --json) stays clean.
func showWaiting(w io.Writer, terminal bool, what string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		every := waitNote
		if terminal {
			every = waitTick
		}
		t := time.NewTicker(every)
		defer t.Stop()
		wrote := false
		for {
			select {
			case <-done:
				if terminal && wrote {
					fmt.Fprint(w, "\r\x1b[K")
				}
				return
			case <-t.C:
			}
			el := time.Since(start).Round(time.Second)
			if terminal {
				fmt.Fprintf(w, "\r\x1b[K%s… %s", what, el)
			} else {
				fmt.Fprintf(w, "%s… still running after %s\n", what, el)
			}
			wrote = true
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
