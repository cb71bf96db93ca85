package runner

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Check is a list of validation commands to run in one directory: a
// loop's validate (in its worktree, or in a clean checkout of its commit)
// or merge.validate (in the integration worktree, on the merge's result).
type Check struct {
	Commands []string      // each run as `sh -c`, in order, until one fails
	Dir      string        // where they run
	Env      []string      // their whole environment
	Timeout  time.Duration // per command; 0: DefaultValidateTimeout
	Grace    time.Duration // SIGTERM to SIGKILL; 0: DefaultGrace
	Log      io.Writer     // each command line and its output; nil: discarded
	// Where and Commit go into each command's loop.Evidence.
	Where, Commit string
	// Started, if set, is called with each command's process group.
	Started func(pid int)
	// Name is part of each command's cgroup name; Loop and Home name the
	// loop whose processes they are ("" for none), and Worktree the
	// directory strays are looked for in (package contain).
	Name, Loop, Home, Worktree string
	// Wrap, when set, turns each command's argv into the one to run (the
	// loop's sandbox); nil: as it is.
	Wrap func(argv []string) ([]string, error)
}

// CheckFailure says how a Check did not pass.
type CheckFailure struct {
	Reason    string // one line: the command and how it ended
	Cancelled bool   // ctx ended: nobody's fault
}

// RunChecks runs c's commands one after the other, each in its own
// process group (and the runner's jail), until one fails. It returns the
// evidence of every command that ran — the failing one included — and
// nil when all exited 0.
func (r *Runner) RunChecks(ctx context.Context, c Check) ([]loop.Evidence, *CheckFailure) {
	if c.Timeout <= 0 {
		c.Timeout = DefaultValidateTimeout
	}
	if c.Grace <= 0 {
		c.Grace = DefaultGrace
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var out []loop.Evidence
	for _, cmd := range c.Commands {
		fmt.Fprintf(c.Log, "$ %s\n", cmd)
		start := time.Now()
		argv, err := c.wrap([]string{"sh", "-c", cmd})
		if err != nil {
			fmt.Fprintf(c.Log, "[loopr: could not start: %v]\n", err)
			return out, &CheckFailure{Reason: fmt.Sprintf("validate `%s`: could not start: %v", clip(cmd, 80), err)}
		}
		w := r.Redact.Writer(c.Log) // validation.log, validation-clean.log, merge.validate's log
		p := runProcess(ctx, procSpec{
			argv:    argv,
			dir:     c.Dir,
			env:     c.Env,
			out:     w,
			timeout: c.Timeout,
			grace:   c.Grace,
			started: c.Started,
			jail:    r.Jail, name: c.Name,
			loop: c.Loop, home: c.Home, worktree: c.Worktree,
		})
		w.Close() // the end of an unfinished last line
		took := time.Since(start).Round(time.Millisecond)
		out = append(out, loop.Evidence{Command: cmd, ExitCode: p.exitCode, DurationMS: took.Milliseconds(), Commit: c.Commit, Where: c.Where})
		name := "validate `" + clip(cmd, 80) + "`"
		switch {
		case p.cancelled:
			fmt.Fprintf(c.Log, "[loopr: cancelled after %s]\n", took)
			return out, &CheckFailure{Reason: "cancelled during validation", Cancelled: true}
		case p.startErr != nil:
			fmt.Fprintf(c.Log, "[loopr: could not start: %v]\n", p.startErr)
			return out, &CheckFailure{Reason: fmt.Sprintf("%s: could not start: %v", name, p.startErr)}
		case p.timedOut:
			fmt.Fprintf(c.Log, "\n[loopr: timed out after %s]\n", c.Timeout)
			return out, &CheckFailure{Reason: fmt.Sprintf("%s timed out after %s", name, c.Timeout)}
		case p.exitCode != 0:
			fmt.Fprintf(c.Log, "\n[loopr: exit %d after %s]\n", p.exitCode, took)
			reason := fmt.Sprintf("%s exited %d", name, p.exitCode)
			if p.signal != 0 {
				reason = fmt.Sprintf("%s killed by signal %d (%v)", name, int(p.signal), p.signal)
			}
			return out, &CheckFailure{Reason: reason}
		}
		fmt.Fprintf(c.Log, "[loopr: ok after %s]\n", took)
	}
	return out, nil
}

func (c Check) wrap(argv []string) ([]string, error) {
	if c.Wrap == nil {
		return argv, nil
	}
	return c.Wrap(argv)
}
