package runner

import (
	"fmt"
	"path/filepath"

	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/mcp"
	"github.com/loopr-dev/loopr/preset"
)

// MCP wires loopr's MCP server (package mcp) into the agents of the
// profiles that keep it (agent.mcp, Settings.MCP): the agent CLI starts
// `<Exe> mcp` with the loop's id and token, which reaches the daemon on
// Socket.
type MCP struct {
	Exe    string                   // the loopr binary
	Socket string                   // <home>/mcp.sock
	Token  func(loop string) string // the loop's token
}

// on reports whether this iteration's agent gets the MCP server.
func (it *iteration) mcpOn() bool { return it.r.MCP != nil && it.s.MCP }

// mcpEnv is what the agent is told of the MCP server: its loop's token and
// the socket (LOOPR_LOOP_ID is always set).
func (it *iteration) mcpEnv() []string {
	if !it.mcpOn() {
		return nil
	}
	return []string{mcp.EnvToken + "=" + it.r.MCP.Token(it.j.Loop.ID), mcp.EnvSocket + "=" + it.r.MCP.Socket}
}

// withMCP returns argv with the preset's way to start loopr's MCP server
// (preset.WithMCP), after writing the loop's token (mcp.token, 0600) and
// claude's configuration (mcp.json) to the iteration directory: the
// token never appears in an argv.
func (it *iteration) withMCP(argv []string) ([]string, error) {
	if !it.mcpOn() {
		return argv, nil
	}
	m := it.r.MCP
	tokenFile := filepath.Join(it.res.Dir, mcp.TokenFile)
	if err := safefile.WriteAtomic(tokenFile, []byte(m.Token(it.j.Loop.ID)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("mcp token: %w", err)
	}
	args := mcp.Args(it.j.Loop.ID, tokenFile, m.Socket)
	cfg, err := mcp.ClientConfig(m.Exe, args)
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(it.res.Dir, "mcp.json")
	if err := safefile.WriteAtomic(cfgFile, append(cfg, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("mcp configuration: %w", err)
	}
	return preset.WithMCP(it.s.Preset, argv, cfgFile, m.Exe, args), nil
}

// mcpBinds is what a sandbox binds in for the MCP server: the socket
// (read-write, to connect) and the loopr binary (read-only).
func (it *iteration) mcpBinds() (writable, readable []string) {
	if !it.mcpOn() {
		return nil, nil
	}
	return []string{it.r.MCP.Socket}, []string{it.r.MCP.Exe}
}
