package api

import "github.com/loopr-dev/loopr/loop"

// The tools of loopr's MCP server (`loopr mcp`), as MCPRequest.Tool names
// them.
const (
	ToolAskHuman       = "ask_human"
	ToolReportProgress = "report_progress"
	ToolGetTask        = "get_task"
	ToolGetFeedback    = "get_feedback"
	ToolListSiblings   = "list_siblings"
	ToolSpawnChild     = "spawn_child"
)

// MCPTools lists every tool of the MCP server.
var MCPTools = []string{ToolAskHuman, ToolReportProgress, ToolGetTask, ToolGetFeedback, ToolListSiblings, ToolSpawnChild}

// MCPRequest is one tool call of an agent, forwarded by `loopr mcp` (POST
// /v1/mcp). Loop and Token come from the agent's environment
// (LOOPR_LOOP_ID, LOOPR_MCP_TOKEN): the daemon answers 403 unless Token is
// Loop's, and unless the call's target lies in Loop's subtree.
type MCPRequest struct {
	Loop  string `json:"loop"`
	Token string `json:"token"`
	Tool  string `json:"tool"`
	// Target is the loop the call is about (get_task, get_feedback) or
	// the parent of the new loop (spawn_child); "": Loop itself.
	Target string `json:"target,omitzero"`
	// ask_human
	Question string `json:"question,omitzero"`
	// report_progress: Percent 0–100, nil when not given.
	Text    string `json:"text,omitzero"`
	Percent *int   `json:"percent,omitempty"`
	// spawn_child
	Type  string `json:"type,omitzero"`
	Title string `json:"title,omitzero"`
	Task  string `json:"task,omitzero"`
}

// MCPResult answers an MCPRequest: Text for the agent, and the loops the
// tool returns (get_task: the target; list_siblings: the siblings;
// spawn_child: the new loop).
type MCPResult struct {
	Text  string      `json:"text"`
	Loops []loop.Loop `json:"loops,omitempty"`
}
