package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// completionCmd prints cobra's shell completion scripts. Loop ids complete
// live, with their titles as descriptions (completeLoopIDs).
func (e *env) completionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script (subcommands, flags and live loop ids)",
		Long: `Print the completion script for your shell. Loop ids complete with their
titles, asked of the daemon when one runs, else read from the store.

  bash:  source <(loopr completion bash)            # or save it in /etc/bash_completion.d/loopr
  zsh:   loopr completion zsh > "${fpath[1]}/_loopr"  # then start a new shell
  fish:  loopr completion fish > ~/.config/fish/completions/loopr.fish`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(e.stdout, true)
			case "zsh":
				return root.GenZshCompletion(e.stdout)
			case "fish":
				return root.GenFishCompletion(e.stdout, true)
			}
			return &UsageError{fmt.Errorf("completion: unknown shell %q (want bash, zsh or fish)", args[0])}
		},
	}
	return c
}

// completeLoopIDs completes the one ID argument of a command.
func (e *env) completeLoopIDs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.loopIDs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeFlagIDs completes a flag that takes a loop id (--parent).
func (e *env) completeFlagIDs(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return e.loopIDs(cmd.Context(), toComplete), cobra.ShellCompDirectiveNoFileComp
}

// maxCompletions bounds the ids offered at once.
const maxCompletions = 200

// completionStatuses are the statuses of the loops offered: those a person
// still acts on.
var completionStatuses = []loop.Status{loop.Pending, loop.Paused, loop.Running, loop.AwaitingApproval, loop.AwaitingReview, loop.Failed}

// loopIDs returns "id<TAB>title (type, status)" for the live loops whose id
// starts with prefix. It never creates a workspace and never fails aloud: a
// completion prints nothing rather than an error.
func (e *env) loopIDs(ctx context.Context, prefix string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := e.resolve(); err != nil {
		return nil
	}
	_, dbErr := os.Stat(e.paths.DB())
	_, sockErr := os.Stat(e.paths.Socket())
	if errors.Is(dbErr, fs.ErrNotExist) && errors.Is(sockErr, fs.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	b, err := e.backend()
	if err != nil {
		return nil
	}
	defer b.Close()
	loops, err := b.List(ctx, api.ListRequest{Status: completionStatuses})
	if err != nil {
		return nil
	}
	up := strings.ToUpper(prefix)
	var out []string
	for _, l := range loops {
		if !strings.HasPrefix(l.ID, prefix) && !strings.HasPrefix(l.ID, up) {
			continue
		}
		out = append(out, fmt.Sprintf("%s\t%s (%s, %s)", l.ID, oneLine(l.Title, 50), l.Type, l.Status))
		if len(out) == maxCompletions {
			break
		}
	}
	return out
}

// completeTypes completes --type with the loop types loopr.yml knows.
func (e *env) completeTypes(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	if err := e.resolve(); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return e.cfg.Types(), cobra.ShellCompDirectiveNoFileComp
}

// completeStatuses completes --status with the statuses.
func completeStatuses(_ *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	out := make([]string, len(loop.Statuses))
	for i, s := range loop.Statuses {
		out[i] = string(s)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
