package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

func (e *env) logsCmd() *cobra.Command {
	var (
		follow    bool
		iteration int
		raw       bool
	)
	c := &cobra.Command{
		Use:   "logs ID [-f] [--iteration N]",
		Short: "Print an iteration's agent output (default: the latest; -f follows it live)",
		Long: `Print the agent output (agent.log) of one iteration of a loop: by default
the latest iteration that has one, else --iteration N. With -f the output is
followed while the agent writes, until that iteration ends (through the
daemon; a loop that has not run yet is waited for). Characters a terminal
would act on are shown escaped unless --raw.

ID is a loop id, a unique prefix of one (at least 4 characters), or its short id (the end of the id, as list and branch names show it).`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: e.completeLoopIDs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if iteration < 0 {
				return &UsageError{fmt.Errorf("--iteration: want a positive number, got %d", iteration)}
			}
			return e.withReader(func(b Backend) error {
				l, err := lookup(cmd.Context(), b, args[0])
				if err != nil {
					return err
				}
				var out io.Writer = e.stdout
				var sw *safeWriter
				if !raw {
					sw = &safeWriter{w: e.stdout}
					out = sw
				}
				cw := &countWriter{w: out}
				n, err := e.printLog(cmd.Context(), b, l, iteration, follow, cw)
				if sw != nil {
					sw.Flush()
				}
				if err != nil {
					return err
				}
				switch {
				case n == 0:
					fmt.Fprintf(e.stderr, "loopr: %s has no agent output yet (%s)\n", l.ID, l.Status)
				case cw.n == 0:
					// An empty log printed as nothing at all looked like a hang or a bug.
					fmt.Fprintf(e.stderr, "loopr: iteration %d of %s: the agent wrote no output\n", n, l.ID)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVarP(&follow, "follow", "f", false, "follow the output until the iteration ends")
	c.Flags().IntVar(&iteration, "iteration", 0, "this iteration (default: the latest that has output)")
	c.Flags().BoolVar(&raw, "raw", false, "print the output byte for byte, terminal escapes included")
	return c
}

// printLog writes loop l's agent log to w, through the daemon when one
// runs, else straight from the file (nothing writes it then, so -f has
// nothing to wait for). It returns the iteration printed, 0 for none.
func (e *env) printLog(ctx context.Context, b Backend, l loop.Loop, iteration int, follow bool, w io.Writer) (int, error) {
	if c, ok := b.(*client.Client); ok {
		return c.Log(ctx, l.ID, iteration, follow, w)
	}
	if iteration > l.Iteration {
		return 0, &UsageError{fmt.Errorf("--iteration: loop %s has had %d iteration(s); there is no iteration %d", l.ID, l.Iteration, iteration)}
	}
	path, n := daemon.IterationLog(e.paths.Home, l.ID, iteration)
	if path == "" {
		return 0, nil
	}
	f, err := safefile.Open(path) // a regular file only: nothing planted there blocks or leaks
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("agent log: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return n, fmt.Errorf("agent log: %w", err)
	}
	if follow {
		fmt.Fprintf(e.stderr, "loopr: no daemon running here: nothing writes this log (start one with loopr daemon --detach)\n")
	}
	return n, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// safeWriter writes whole lines with what a terminal would act on escaped
// (termsafe.Text): agents write their logs. A partial line waits for its
// end, or for Flush.
type safeWriter struct {
	w   io.Writer
	buf []byte
}

func (s *safeWriter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	if i := bytes.LastIndexByte(s.buf, '\n'); i >= 0 {
		if _, err := io.WriteString(s.w, termsafe.Text(string(s.buf[:i+1]))); err != nil {
			return 0, err
		}
		s.buf = append(s.buf[:0], s.buf[i+1:]...)
	}
	if len(s.buf) > 64<<10 { // a long line without end: show it anyway
		s.Flush()
	}
	return len(p), nil
}

// Flush writes what is buffered.
func (s *safeWriter) Flush() {
	if len(s.buf) > 0 {
		io.WriteString(s.w, termsafe.Text(string(s.buf)))
		s.buf = s.buf[:0]
	}
}
