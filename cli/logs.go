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
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/transcript"
)

func (e *env) logsCmd() *cobra.Command {
	var (
		follow    bool
		iteration int
		raw       bool
	)
	c := &cobra.Command{
		Use:   "logs ID [-f] [--iteration N] [--raw]",
		Short: "Print an iteration's agent output (default: the latest; -f follows it live)",
		Long: `Print the agent output (agent.log) of one iteration of a loop: by default
the latest iteration that has one, else --iteration N. With -f the output is
followed while the agent writes, until that iteration ends (through the
daemon; a loop that has not run yet is waited for).

The structured output of the presets (claude, codex, gemini, opencode) is
rendered as lines a person reads: the agent's words, each tool call on one
line ("▸ Bash  go test ./..."), a tool's result cut to three lines ("│"; "✗"
when the call failed), errors ("✗") and the final result with its cost,
tokens and duration ("✓ done"). The format is the one of the loop's agent
profile's preset, or the one the first events show (a custom command that
runs one of these CLIs); any other line is printed as it was. Colours are
stripped and other characters a terminal would act on are shown escaped.
--raw prints the output byte for byte, as the agent wrote it.

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
				var rw *renderWriter
				if !raw {
					rw = &renderWriter{w: e.stdout, r: transcript.New(e.presetOf(l))}
					rw.r.Dir = l.Workdir
					out = rw
				}
				cw := &countWriter{w: out}
				n, err := e.printLog(cmd.Context(), b, l, iteration, follow, cw)
				if rw != nil {
					if ferr := rw.Flush(); err == nil {
						err = ferr
					}
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
	c.Flags().BoolVar(&raw, "raw", false, "print the output byte for byte (the agent's JSON events, terminal escapes included)")
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

// presetOf is the preset of loop l's agent profile in the loaded
// configuration, "" when there is none (the renderer then goes by the
// output's first events).
func (e *env) presetOf(l loop.Loop) string {
	if e.cfg == nil {
		return ""
	}
	ag, ok := e.cfg.Profile(e.cfg.ProfileOf(&l))
	if !ok {
		return ""
	}
	return ag.Preset
}

// renderWriter prints an agent's output as transcript renders it, a line
// at a time as it arrives (a partial line waits for its end, or Flush).
type renderWriter struct {
	w   io.Writer
	r   *transcript.Renderer
	buf bytes.Buffer
	err error
}

func (rw *renderWriter) Write(p []byte) (int, error) {
	if rw.err != nil {
		return 0, rw.err
	}
	rw.print(rw.r.Feed(p))
	return len(p), rw.err
}

// Flush prints what the renderer holds: the partial last line.
func (rw *renderWriter) Flush() error {
	if rw.err == nil {
		rw.print(rw.r.Flush())
	}
	return rw.err
}

func (rw *renderWriter) print(lines []transcript.Line) {
	if len(lines) == 0 {
		return
	}
	rw.buf.Reset()
	for _, l := range lines {
		rw.buf.WriteString(l.String())
		rw.buf.WriteByte('\n')
	}
	_, rw.err = rw.w.Write(rw.buf.Bytes())
}
