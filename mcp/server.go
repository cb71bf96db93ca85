package mcp

import (
	"context"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopr-dev/loopr/api"
)

// Caller forwards a tool call to the daemon (client.Client over
// <home>/mcp.sock).
type Caller interface {
	MCP(ctx context.Context, req api.MCPRequest) (api.MCPResult, error)
}

// Identity is whose calls a server forwards: the loop and its token.
type Identity struct {
	Loop  string
	Token string
}

// The tools' arguments.
type (
	askArgs struct {
		Question string `json:"question" jsonschema:"the question for a person: what you need to know and why; your loop waits for the answer, which comes in your next prompt"`
	}
	progressArgs struct {
		Text    string `json:"text" jsonschema:"one line: what is done and what is next"`
		Percent *int   `json:"percent,omitempty" jsonschema:"how far the work is, 0 to 100; leave out when unknown"`
	}
	loopArgs struct {
		Loop string `json:"loop,omitempty" jsonschema:"a loop id in your subtree; default: your own loop"`
	}
	spawnArgs struct {
		Type   string `json:"type" jsonschema:"the new loop's type: the child type of its parent (plan: spec, spec: phase, phase: task) or a user type"`
		Title  string `json:"title" jsonschema:"a short title"`
		Task   string `json:"task" jsonschema:"what the new loop's agent is to do"`
		Parent string `json:"parent,omitempty" jsonschema:"the new loop's parent, a loop in your subtree; default: your own loop"`
	}
)

// NewServer returns the MCP server whose tools forward to c as id.
func NewServer(c Caller, id Identity, version string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: ServerName, Title: "loopr", Version: version}, &sdk.ServerOptions{
		Instructions: "Tools of loopr, the orchestrator running you as the agent of one loop. They act on your loop and the loops below it only.",
	})
	call := func(ctx context.Context, req api.MCPRequest) (*sdk.CallToolResult, any, error) {
		req.Loop, req.Token = id.Loop, id.Token
		res, err := c.MCP(ctx, req)
		if err != nil {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}, nil, nil
		}
		out := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: res.Text}}}
		if len(res.Loops) > 0 {
			if b, err := json.Marshal(res.Loops); err == nil {
				out.Content = append(out.Content, &sdk.TextContent{Text: string(b)})
			}
		}
		return out, nil, nil
	}
	sdk.AddTool(s, &sdk.Tool{Name: api.ToolAskHuman, Description: "Ask a person a question you cannot answer yourself. " +
		"Your loop then waits for the answer (needs_human): end your turn after this call; the answer comes in your next prompt."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a askArgs) (*sdk.CallToolResult, any, error) {
			return call(ctx, api.MCPRequest{Tool: api.ToolAskHuman, Question: a.Question})
		})
	sdk.AddTool(s, &sdk.Tool{Name: api.ToolReportProgress, Description: "Report how far your work is: shown to people watching loopr (TUI, web)."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a progressArgs) (*sdk.CallToolResult, any, error) {
			return call(ctx, api.MCPRequest{Tool: api.ToolReportProgress, Text: a.Text, Percent: a.Percent})
		})
	sdk.AddTool(s, &sdk.Tool{Name: api.ToolGetTask, Description: "Your loop's task (or that of a loop below it): type, title, task, iteration, status."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a loopArgs) (*sdk.CallToolResult, any, error) {
			return call(ctx, api.MCPRequest{Tool: api.ToolGetTask, Target: a.Loop})
		})
	sdk.AddTool(s, &sdk.Tool{Name: api.ToolGetFeedback, Description: "What the last iterations left for your loop (or one below it): validation feedback, a person's answer and line comments."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a loopArgs) (*sdk.CallToolResult, any, error) {
			return call(ctx, api.MCPRequest{Tool: api.ToolGetFeedback, Target: a.Loop})
		})
	sdk.AddTool(s, &sdk.Tool{Name: api.ToolListSiblings, Description: "The loops that share your loop's parent: their ids, types, titles and status."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			return call(ctx, api.MCPRequest{Tool: api.ToolListSiblings})
		})
	sdk.AddTool(s, &sdk.Tool{Name: api.ToolSpawnChild, Description: "Queue a new loop below your own loop (or below a loop in your subtree). " +
		"It is admitted like any new loop: loopr may refuse it when too many loops wait."},
		func(ctx context.Context, _ *sdk.CallToolRequest, a spawnArgs) (*sdk.CallToolResult, any, error) {
			return call(ctx, api.MCPRequest{Tool: api.ToolSpawnChild, Type: a.Type, Title: a.Title, Task: a.Task, Target: a.Parent})
		})
	return s
}

// Serve runs the server on in and out (the agent CLI's pipes) until the
// client goes away or ctx ends.
func Serve(ctx context.Context, c Caller, id Identity, version string, in io.Reader, out io.Writer) error {
	t := &sdk.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
	err := NewServer(c, id, version).Run(ctx, t)
	if err != nil && (ctx.Err() != nil || strings.Contains(err.Error(), "EOF")) {
		return nil
	}
	return err
}

// Args is the argv after the loopr binary that starts the server for loop
// id: its token in tokenFile, the daemon's MCP socket at socket.
func Args(id, tokenFile, socket string) []string {
	return []string{"mcp", "--loop", id, "--token-file", tokenFile, "--socket", socket}
}

// ClientConfig is the JSON of an agent CLI's MCP configuration (claude's
// --mcp-config, and the `mcpServers` object most CLIs read) that starts
// exe with args as the server named loopr.
func ClientConfig(exe string, args []string) ([]byte, error) {
	type server struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	cfg := map[string]map[string]server{"mcpServers": {ServerName: {Type: "stdio", Command: exe, Args: args}}}
	return json.Marshal(cfg, json.Deterministic(true))
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
