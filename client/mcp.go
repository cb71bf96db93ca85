package client

import (
	"context"
	"net/http"

	"github.com/loopr-dev/loopr/api"
)

// NewMCP returns a client of the daemon's MCP socket (<home>/mcp.sock),
// which serves POST /v1/mcp alone: no status is asked for at the start.
func NewMCP(socketPath string) *Client { return newClient(socketPath) }

// MCP forwards one tool call of an agent (POST /v1/mcp).
func (c *Client) MCP(ctx context.Context, req api.MCPRequest) (api.MCPResult, error) {
	var res api.MCPResult
	err := c.call(ctx, http.MethodPost, "/v1/mcp", req, &res)
	return res, err
}
