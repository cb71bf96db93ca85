package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/artifact"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/tui"
)

func (e *env) tuiCmd() *cobra.Command {
	var noStart bool
	c := &cobra.Command{
		Use:   "tui [--no-start]",
		Short: "The live dashboard (starts a daemon in the background if none runs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.runTUI(cmd.Context(), noStart)
		},
	}
	c.Flags().BoolVar(&noStart, "no-start", false, "do not start a daemon when none runs")
	return c
}

// runTUI connects to the daemon (starting one unless noStart) and runs the
// dashboard until the user quits.
func (e *env) runTUI(ctx context.Context, noStart bool) error {
	if !isTerminal(e.stdout) || !isTerminal(e.stdin) {
		// Without one the dashboard failed only after it had switched the
		// screen (and left it so), with an epoll error.
		return &UsageError{errors.New("the dashboard needs a terminal on stdin and stdout; without one: loopr status, loopr list, loopr events -f")}
	}
	if err := e.resolve(); err != nil {
		return err
	}
	sock := e.paths.Socket()
	c, err := client.Dial(ctx, sock)
	if errors.Is(err, client.ErrNoDaemon) && !e.noStart(noStart) {
		// Said on stderr before the dashboard takes the screen.
		if _, err := e.autoStart(ctx); err != nil {
			return fmt.Errorf("start daemon: %w", err)
		}
		c, err = client.Dial(ctx, sock)
	}
	if err != nil {
		if errors.Is(err, client.ErrNoDaemon) {
			return fmt.Errorf("no daemon running in %s (start one with `loopr daemon --detach`)", e.paths.Home)
		}
		return err
	}
	defer c.Close()
	return tui.Run(ctx, e.tuiOptions(c), e.stdin, e.stdout)
}

// tuiOptions builds the dashboard's options for a connected client.
func (e *env) tuiOptions(c *client.Client) tui.Options {
	sock := c.Socket()
	return tui.Options{
		Client: c,
		Dial: func(ctx context.Context) (tui.Client, error) {
			nc, err := client.Dial(ctx, sock)
			if err != nil {
				return nil, err
			}
			return nc, nil
		},
		Workspace: e.paths.Workspace,
		NoColor:   e.getenv("NO_COLOR") != "",
		Version:   Version,
		Policy:    control.Policy(e.cfg),
		Preset:    e.presetOf,
		// A line comment from the diff view (c), on a connection of its
		// own: it runs in a command beside the dashboard's stream.
		Comment: func(ctx context.Context, id, path string, line int, text string) error {
			cc, err := client.Dial(ctx, sock)
			if err != nil {
				return err
			}
			defer cc.Close()
			_, err = cc.Comment(ctx, id, api.CommentRequest{Path: path, Line: line, Text: text})
			return err
		},
		Attach: e.attachCommand,
		ReadArtifact: func(_ context.Context, l loop.Loop) (string, error) {
			return e.readAccepted(nil, l)
		},
	}
}

// readAccepted reads loop l's accepted artifact, the copy loopr validated
// under the home: a regular file reached without a symlink below the home,
// at most artifact.MaxSize bytes; on an etcd store, the store's copy when
// the loop passed on another machine.
func (e *env) readAccepted(b Backend, l loop.Loop) (string, error) {
	if l.Artifact == "" {
		return "", fmt.Errorf("%s %s has no accepted artifact", l.Type, l.ID)
	}
	data, err := safefile.ReadIn(e.paths.Home, l.Artifact, artifact.MaxSize)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || e.cfg == nil || e.cfg.Store.Backend != store.BackendEtcd {
		return string(data), err
	}
	// Not here: it passed on another machine. The local backend has the
	// store open; through a daemon, open it for this read.
	if lb, ok := b.(*local); ok {
		data, err = lb.svc.ReadArtifact(l.Artifact)
		return string(data), err
	}
	st, oerr := control.OpenStore(e.cfg, e.paths, store.Options{ReadOnly: true})
	if oerr != nil {
		return "", fmt.Errorf("%w; and the store's copy: %v", err, oerr)
	}
	defer st.Close()
	data, err = control.ReadArtifact(st, e.paths.Home, l.Artifact)
	return string(data), err
}
