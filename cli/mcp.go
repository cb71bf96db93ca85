package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/spf13/cobra"

	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/mcp"
)

// mcpCmd is `loopr mcp`: the MCP server an agent's CLI starts over stdio
// (package mcp), and `loopr mcp --print-config`, the snippet that wires it
// into a CLI loopr has no preset wiring for.
func (e *env) mcpCmd() *cobra.Command {
	var loopID, tokenFile, socket string
	var printConfig bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve loopr's MCP tools to a loop's agent over stdio (its CLI starts it); --print-config shows the snippet",
		Long: `loopr mcp speaks the Model Context Protocol on stdin and stdout to the agent CLI that
started it, and forwards each tool call (ask_human, report_progress, get_task,
get_feedback, list_siblings, spawn_child) to the daemon with the loop's token.
The claude and codex presets start it themselves (agent.mcp: false turns that
off); for another CLI, add the snippet of --print-config to its MCP settings.
The loop and token come from $LOOPR_LOOP_ID and $LOOPR_MCP_TOKEN (or --loop and
--token-file), the daemon's socket from $LOOPR_MCP_SOCKET (or --socket, else
<home>/mcp.sock). See docs/mcp.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printConfig {
				return e.printMCPConfig()
			}
			id, err := e.mcpIdentity(loopID, tokenFile)
			if err != nil {
				return err
			}
			if socket == "" {
				socket = e.getenv(mcp.EnvSocket)
			}
			if socket == "" {
				if err := e.resolve(); err != nil {
					return err
				}
				socket = filepath.Join(e.paths.Home, mcp.SocketName)
			}
			c := client.NewMCP(socket)
			defer c.Close()
			return mcp.Serve(cmd.Context(), c, id, Version, e.stdin, e.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&loopID, "loop", "", "the loop whose agent this serves (default $"+mcp.EnvLoop+")")
	f.StringVar(&tokenFile, "token-file", "", "a file holding the loop's token (default $"+mcp.EnvToken+")")
	f.StringVar(&socket, "socket", "", "the daemon's MCP socket (default $"+mcp.EnvSocket+", else <home>/"+mcp.SocketName+")")
	f.BoolVar(&printConfig, "print-config", false, "print the JSON that makes an agent CLI start loopr mcp, and exit")
	return cmd
}

// mcpIdentity is the loop and token of the flags, else the environment.
func (e *env) mcpIdentity(loopID, tokenFile string) (mcp.Identity, error) {
	id := mcp.Identity{Loop: loopID, Token: e.getenv(mcp.EnvToken)}
	if id.Loop == "" {
		id.Loop = e.getenv(mcp.EnvLoop)
	}
	if tokenFile != "" {
		b, err := safefile.Read(tokenFile, 1024)
		if err != nil {
			return id, &UsageError{fmt.Errorf("--token-file: %w", err)}
		}
		id.Token = string(bytes.TrimSpace(b))
	}
	switch {
	case id.Loop == "":
		return id, &UsageError{errors.New("no loop: loopr mcp serves a loop's agent, and loopr sets $" + mcp.EnvLoop + " for it (or give --loop)")}
	case id.Token == "":
		return id, &UsageError{errors.New("no token: loopr sets $" + mcp.EnvToken + " for a loop's agent (or give --token-file)")}
	}
	return id, nil
}

// printMCPConfig prints the mcpServers JSON for an agent CLI loopr runs:
// the loop and token come from the agent's environment.
func (e *env) printMCPConfig() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("the loopr binary: %w", err)
	}
	b, err := mcp.ClientConfig(exe, []string{"mcp"})
	if err != nil {
		return err
	}
	v := jsontext.Value(b)
	if err := v.Indent(jsontext.WithIndent("  ")); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, strings.TrimSpace(string(v)))
	return nil
}
