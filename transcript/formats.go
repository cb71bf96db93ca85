package transcript

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Each method renders one event of its format and reports whether the line
// was an event of it that it knows: a JSON object without a "type", or of
// a type a later release added, is shown by the caller as it was. Events
// that say nothing to a person (a rate limit check that passed, a step
// starting) are known and skipped.

// Claude Code: claude -p --output-format stream-json --verbose.
type claudeEvent struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	// system/init
	Cwd   string `json:"cwd"`
	Model string `json:"model"`
	// system/api_retry
	Attempt     int            `json:"attempt"`
	ErrorStatus jsontext.Value `json:"error_status"`
	// assistant, user
	Message *struct {
		Content jsontext.Value `json:"content"` // a string or blocks
	} `json:"message"`
	// rate_limit_event
	RateLimitInfo *struct {
		Status        string `json:"status"`
		RateLimitType string `json:"rateLimitType"`
	} `json:"rate_limit_info"`
	// result
	IsError      bool     `json:"is_error"`
	Result       string   `json:"result"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
	DurationMS   int64    `json:"duration_ms"`
	NumTurns     int      `json:"num_turns"`
	Usage        *struct {
		InputTokens         int64 `json:"input_tokens"`
		OutputTokens        int64 `json:"output_tokens"`
		CacheReadTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

type claudeBlock struct {
	Type     string         `json:"type"`
	Text     string         `json:"text"`
	Thinking string         `json:"thinking"`
	Name     string         `json:"name"`
	Input    jsontext.Value `json:"input"`
	Content  jsontext.Value `json:"content"` // tool_result: a string or blocks
	IsError  bool           `json:"is_error"`
}

func (r *Renderer) claude(b []byte) bool {
	var e claudeEvent
	if decode(b, &e) != nil || e.Type == "" {
		return false
	}
	switch e.Type {
	case "system":
		switch e.Subtype {
		case "init":
			if e.Cwd != "" && r.Dir == "" {
				r.Dir = e.Cwd
			}
			r.info("claude", e.Model, e.Cwd)
		case "api_retry":
			r.emit(Line{Kind: Error, Text: clean(fmt.Sprintf("API error %s: retrying (attempt %d)", strings.Trim(string(e.ErrorStatus), `"`), e.Attempt))})
		}
	case "assistant", "user":
		if e.Message != nil {
			r.claudeContent(e.Type, e.Message.Content)
		}
	case "rate_limit_event":
		if i := e.RateLimitInfo; i != nil && i.Status == "rejected" {
			msg := "rate limit reached"
			if i.RateLimitType != "" {
				msg += " (" + i.RateLimitType + ")"
			}
			r.emit(Line{Kind: Error, Text: clean(msg)})
		}
	case "result":
		u := usage{cost: -1, duration: time.Duration(e.DurationMS) * time.Millisecond, turns: e.NumTurns}
		if e.TotalCostUSD != nil {
			u.cost = *e.TotalCostUSD
		}
		if x := e.Usage; x != nil {
			u.tokens = x.InputTokens + x.OutputTokens + x.CacheReadTokens + x.CacheCreationTokens
		}
		if e.IsError && strings.TrimSpace(e.Result) != r.said {
			r.text(Error, e.Result)
		}
		r.done(e.IsError, u)
	case "stream_event": // partial messages (--include-partial-messages): the whole ones follow
	default:
		return false
	}
	return true
}

func (r *Renderer) claudeContent(role string, content jsontext.Value) {
	var blocks []claudeBlock
	if decode(content, &blocks) != nil {
		var s string
		if role == "assistant" && decode(content, &s) == nil {
			r.text(Text, s)
		}
		return
	}
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			if role == "assistant" {
				r.text(Text, bl.Text)
			}
		case "thinking":
			r.text(Thinking, bl.Thinking)
		case "tool_use", "server_tool_use":
			r.emit(Line{Kind: Tool, Tool: clean(bl.Name), Text: r.args(bl.Input)})
		case "tool_result":
			r.result(claudeResultText(bl.Content), bl.IsError)
		}
	}
}

// claudeResultText is a tool result's text: a string, or its text blocks.
func claudeResultText(v jsontext.Value) string {
	var s string
	if decode(v, &s) == nil {
		return s
	}
	var blocks []claudeBlock
	if decode(v, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, bl := range blocks {
		switch bl.Type {
		case "text":
			parts = append(parts, bl.Text)
		case "image":
			parts = append(parts, "(an image)")
		}
	}
	return strings.Join(parts, "\n")
}

// info emits the session's first line: "claude · model claude-sonnet-5-5 · /repo".
func (r *Renderer) info(cli, model, dir string) {
	parts := []string{cli}
	if model != "" {
		parts = append(parts, "model "+model)
	}
	if dir != "" {
		parts = append(parts, dir)
	}
	r.emit(Line{Kind: Info, Text: clean(strings.Join(parts, " · "))})
}

// Codex: codex exec --json.
type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Item  *codexItem `json:"item"`
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

type codexItem struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Text     string `json:"text"`
	Message  string `json:"message"`
	Command  string `json:"command"`
	Output   string `json:"aggregated_output"`
	ExitCode *int   `json:"exit_code"`
	Status   string `json:"status"`
	Changes  []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Query  string `json:"query"`
}

func (r *Renderer) codex(b []byte) bool {
	var e codexEvent
	if decode(b, &e) != nil || e.Type == "" {
		return false
	}
	switch e.Type {
	case "item.started":
		if it := e.Item; it != nil && it.Type == "command_execution" {
			if len(r.started) >= maxOpen {
				clear(r.started) // calls that never completed: forget them
			}
			r.started[it.ID] = true
			r.codexCall(it)
		}
	case "item.completed":
		if e.Item != nil {
			r.codexItem(e.Item)
		}
	case "error":
		r.text(Error, e.Message)
	case "turn.failed":
		if e.Error != nil {
			r.text(Error, e.Error.Message)
		}
		r.done(true, usage{cost: -1})
	case "turn.completed":
		u := usage{cost: -1}
		if e.Usage != nil {
			u.tokens = e.Usage.InputTokens + e.Usage.OutputTokens
		}
		r.done(false, u)
	case "thread.started", "turn.started", "item.updated":
	default:
		return false
	}
	return true
}

func (r *Renderer) codexCall(it *codexItem) {
	r.emit(Line{Kind: Tool, Tool: "shell", Text: firstLine(unwrapShell(it.Command))})
}

func (r *Renderer) codexItem(it *codexItem) {
	switch it.Type {
	case "agent_message":
		r.text(Text, it.Text)
	case "reasoning":
		r.text(Thinking, it.Text)
	case "error":
		r.text(Error, it.Message)
	case "command_execution":
		if r.started[it.ID] {
			delete(r.started, it.ID)
		} else {
			r.codexCall(it)
		}
		failed := it.Status == "failed" || it.ExitCode != nil && *it.ExitCode != 0
		r.result(it.Output, failed)
		if it.ExitCode != nil && *it.ExitCode != 0 {
			r.emit(Line{Kind: Output, Err: true, Text: fmt.Sprintf("exit code %d", *it.ExitCode)})
		}
	case "file_change":
		var paths []string
		for _, c := range it.Changes {
			paths = append(paths, r.rel(c.Path))
		}
		r.emit(Line{Kind: Tool, Tool: "patch", Text: clean(strings.Join(paths, ", "))})
		if it.Status == "failed" {
			r.emit(Line{Kind: Output, Err: true, Text: "the patch failed"})
		}
	case "mcp_tool_call":
		r.emit(Line{Kind: Tool, Tool: clean(it.Server + "." + it.Tool)})
	case "web_search":
		r.emit(Line{Kind: Tool, Tool: "search", Text: firstLine(it.Query)})
	}
}

// Gemini CLI: gemini --output-format stream-json.
type geminiEvent struct {
	Type       string         `json:"type"`
	Model      string         `json:"model"`
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Delta      bool           `json:"delta"`
	ToolName   string         `json:"tool_name"`
	ToolID     string         `json:"tool_id"`
	Parameters jsontext.Value `json:"parameters"`
	Status     string         `json:"status"`
	Output     string         `json:"output"`
	Message    string         `json:"message"`
	Error      *struct {
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		TotalTokens int64 `json:"total_tokens"`
		DurationMS  int64 `json:"duration_ms"`
		ToolCalls   int   `json:"tool_calls"`
	} `json:"stats"`
}

func (r *Renderer) gemini(b []byte) bool {
	var e geminiEvent
	if decode(b, &e) != nil || e.Type == "" {
		return false
	}
	if e.Type != "message" || !e.Delta || e.Role != "assistant" {
		r.flushText()
	}
	switch e.Type {
	case "init":
		r.info("gemini", e.Model, "")
	case "message":
		switch {
		case e.Role != "assistant":
		case e.Delta:
			r.stream(e.Content)
		default:
			r.text(Text, e.Content)
		}
	case "tool_use":
		r.emit(Line{Kind: Tool, Tool: clean(e.ToolName), Text: r.args(e.Parameters)})
	case "tool_result":
		if e.Status == "error" && e.Error != nil {
			r.result(e.Error.Message, true)
			break
		}
		r.result(e.Output, e.Status == "error")
	case "error":
		r.text(Error, e.Message)
	case "result":
		failed := e.Status == "error"
		if failed && e.Error != nil {
			r.text(Error, e.Error.Message)
		}
		u := usage{cost: -1}
		if s := e.Stats; s != nil {
			u.tokens, u.duration, u.tools = s.TotalTokens, time.Duration(s.DurationMS)*time.Millisecond, s.ToolCalls
		}
		r.done(failed, u)
	default:
		return false
	}
	return true
}

// OpenCode: opencode run --format json.
type opencodeEvent struct {
	Type string `json:"type"`
	Part *struct {
		Text   string `json:"text"`
		Tool   string `json:"tool"`
		Reason string `json:"reason"`
		State  *struct {
			Status string         `json:"status"`
			Input  jsontext.Value `json:"input"`
			Output string         `json:"output"`
			Error  string         `json:"error"`
		} `json:"state"`
		Tokens *struct {
			Total int64 `json:"total"`
		} `json:"tokens"`
		Cost float64 `json:"cost"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data *struct {
			Message string `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

// stepSum adds up what opencode's steps report: each step_finish carries
// its own tokens and cost.
type stepSum struct {
	tokens int64
	cost   float64
	steps  int
}

func (r *Renderer) opencode(b []byte) bool {
	var e opencodeEvent
	if decode(b, &e) != nil || e.Type == "" {
		return false
	}
	p := e.Part
	switch {
	case e.Type == "text" && p != nil:
		r.text(Text, p.Text)
	case e.Type == "reasoning" && p != nil:
		r.text(Thinking, p.Text)
	case e.Type == "tool_use" && p != nil:
		r.emit(Line{Kind: Tool, Tool: clean(p.Tool)})
		if st := p.State; st != nil {
			r.out[len(r.out)-1].Text = r.args(st.Input)
			if st.Status == "error" {
				r.result(st.Error, true)
			} else {
				r.result(st.Output, false)
			}
		}
	case e.Type == "step_finish" && p != nil:
		if p.Tokens != nil {
			r.steps.tokens += p.Tokens.Total
		}
		r.steps.cost += p.Cost
		r.steps.steps++
		if p.Reason != "tool-calls" {
			u := usage{cost: -1, tokens: r.steps.tokens, turns: r.steps.steps}
			if r.steps.cost > 0 {
				u.cost = r.steps.cost
			}
			r.done(false, u)
			r.steps = stepSum{}
		}
	case e.Type == "error" && e.Error != nil:
		msg := e.Error.Name
		if e.Error.Data != nil && e.Error.Data.Message != "" {
			msg = e.Error.Data.Message
		}
		r.text(Error, msg)
	case e.Type == "step_start":
	default:
		return false
	}
	return true
}
