// Package fakeanthropic is a scripted stand-in for the Anthropic Messages
// API, for tests that drive the real Claude Code CLI offline: point
// ANTHROPIC_BASE_URL at it. POST /v1/messages answers as the real API does,
// streaming server-sent events (message_start with the input usage,
// content blocks of text or tool_use, message_delta with the stop reason
// and output usage, message_stop) or one JSON message when the request does
// not stream; errors carry the real API's status, body and headers (429
// with retry-after and the anthropic-ratelimit-* headers, 529 overloaded,
// 500). HEAD and GET of anything else answer 200 so the CLI's connectivity
// probes pass.
//
// A Script decides each reply from the request; the Server records every
// request, and when each was received, for the test to assert on.
package fakeanthropic

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeapi"
)

// Request is what the CLI sent to POST /v1/messages.
type Request struct {
	Model     string    `json:"model"`
	Stream    bool      `json:"stream"`
	MaxTokens int       `json:"max_tokens"`
	Messages  []Message `json:"messages"`
	System    any       `json:"system"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`

	Header   http.Header `json:"-"`
	Received time.Time   `json:"-"`
}

// Message is one entry of Request.Messages; Content is a string or a list
// of blocks.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text returns every text of the message (text blocks, tool results),
// joined by newlines.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(m.Content, &blocks) != nil {
		return ""
	}
	var b strings.Builder
	for _, bl := range blocks {
		switch {
		case bl.Text != "":
			b.WriteString(bl.Text + "\n")
		case len(bl.Content) > 0:
			b.WriteString(Message{Content: bl.Content}.Text() + "\n")
		}
	}
	return b.String()
}

// Prompt is the text of the first user message: the prompt the CLI was
// given (with whatever context the CLI added).
func (r *Request) Prompt() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text()
		}
	}
	return ""
}

// Turn counts the assistant messages already in the conversation: 0 for
// the first request of a run, 1 after the first tool result, and so on.
func (r *Request) Turn() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// HasTool reports whether the request offers the named tool: the CLI's
// main loop offers its tools; side requests (titles, summaries) do not.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// Usage is what a reply reports consuming.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
}

// Reply is the answer to one request: content blocks, or an error status.
type Reply struct {
	Blocks []Block
	Usage  Usage
	// Status, when not 0 or 200, answers with that HTTP error: Body (else
	// the real API's body for the status) and Header.
	Status int
	Body   string
	Header http.Header
	// Delay holds the reply back (a slow provider).
	Delay time.Duration
}

// Block is one content block of a reply.
type Block struct {
	Text string // a text block, when ToolName is ""
	// ToolName and Input make a tool_use block: the CLI runs the tool
	// (Write, Bash, ...) with that input and sends the result back.
	ToolName string
	Input    any
}

// Text is a reply of one text block.
func Text(s string, u Usage) Reply { return Reply{Blocks: []Block{{Text: s}}, Usage: u} }

// Tool is a reply that asks the CLI to run one tool.
func Tool(name string, input any, u Usage) Reply {
	return Reply{Blocks: []Block{{ToolName: name, Input: input}}, Usage: u}
}

// RateLimited is the real API's 429 for an API key over its rate limit.
func RateLimited(retryAfter time.Duration) Reply {
	h := http.Header{}
	h.Set("retry-after", strconv.Itoa(int(retryAfter.Seconds())))
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-remaining", "0")
	h.Set("anthropic-ratelimit-requests-reset", time.Now().Add(retryAfter).UTC().Format(time.RFC3339))
	h.Set("x-should-retry", "true")
	return Reply{Status: 429, Header: h, Body: errorBody("rate_limit_error",
		"This request would exceed the rate limit for your organization (fake-org) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.")}
}

// SessionLimited is the 429 a subscriber gets when a unified limit is
// spent: claim five_hour ("session"), seven_day ("weekly"), ... and the
// reset instant, in the anthropic-ratelimit-unified-* headers.
func SessionLimited(claim string, reset time.Time) Reply {
	h := http.Header{}
	h.Set("anthropic-ratelimit-unified-status", "rejected")
	h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("anthropic-ratelimit-unified-representative-claim", claim)
	h.Set("anthropic-ratelimit-unified-overage-status", "rejected")
	// No extra usage bought: the CLI names the limit ("session limit").
	h.Set("anthropic-ratelimit-unified-overage-disabled-reason", "out_of_credits")
	return Reply{Status: 429, Header: h, Body: errorBody("rate_limit_error", "Error")}
}

// Overloaded is the real API's 529.
func Overloaded() Reply {
	return Reply{Status: 529, Body: errorBody("overloaded_error", "Overloaded")}
}

// ServerError is the real API's 500.
func ServerError() Reply {
	return Reply{Status: 500, Body: errorBody("api_error", "Internal server error")}
}

func errorBody(typ, msg string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	return string(b)
}

// Script decides the reply to a request. It is called from the server's
// goroutines, one request at a time.
type Script func(r *Request) Reply

// Server is the fake API. Use it as an http.Handler. Requests returns
// every POST /v1/messages received so far, in order.
type Server struct {
	Script Script
	Now    func() time.Time // default time.Now
	fakeapi.Log[Request]

	mu    sync.Mutex
	other []string
}

// Other returns "METHOD path" of every other request received.
func (s *Server) Other() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.other...)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ServeHTTP answers POST /v1/messages from the script and everything else
// with an empty 200 (HEAD /, GET probes) or 404 for other POSTs.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if hr.Method != http.MethodPost || hr.URL.Path != "/v1/messages" {
		s.mu.Lock()
		s.other = append(s.other, hr.Method+" "+hr.URL.Path)
		s.mu.Unlock()
		if hr.Method == http.MethodPost {
			http.Error(w, errorBody("not_found_error", "Not found: "+hr.URL.Path), http.StatusNotFound)
		}
		return
	}
	req := &Request{}
	if err := fakeapi.ReadJSON(hr, req); err != nil {
		fakeapi.WriteError(w, http.StatusBadRequest, nil, errorBody("invalid_request_error", "bad request: "+err.Error()))
		return
	}
	req.Header = hr.Header.Clone()
	req.Received = s.now()

	var id int
	rep := Text("ok", Usage{InputTokens: 10, OutputTokens: 1})
	s.Record(req, func(n int) {
		id = n
		if s.Script != nil {
			rep = s.Script(req)
		}
	})

	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-hr.Context().Done():
			return
		}
	}
	w.Header().Set("request-id", fmt.Sprintf("req_fake%06d", id))
	if rep.Status != 0 && rep.Status != http.StatusOK {
		fakeapi.WriteError(w, rep.Status, rep.Header, rep.Body)
		return
	}
	msgID := fmt.Sprintf("msg_fake%06d", id)
	if !req.Stream {
		writeJSON(w, msgID, req.Model, rep)
		return
	}
	writeSSE(w, msgID, req.Model, rep)
}

func blocksJSON(rep Reply) []map[string]any {
	var out []map[string]any
	for i, b := range rep.Blocks {
		if b.ToolName == "" {
			out = append(out, map[string]any{"type": "text", "text": b.Text})
			continue
		}
		out = append(out, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%02d", i), "name": b.ToolName, "input": b.Input})
	}
	return out
}

func stopReason(rep Reply) string {
	for _, b := range rep.Blocks {
		if b.ToolName != "" {
			return "tool_use"
		}
	}
	return "end_turn"
}

func usageJSON(u Usage, output int64) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationTokens,
		"cache_read_input_tokens":     u.CacheReadTokens,
		"output_tokens":               output,
	}
}

func writeJSON(w http.ResponseWriter, id, model string, rep Reply) {
	w.Header().Set("content-type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": blocksJSON(rep), "stop_reason": stopReason(rep), "stop_sequence": nil,
		"usage": usageJSON(rep.Usage, rep.Usage.OutputTokens),
	})
}

// writeSSE streams rep the way the real API does.
func writeSSE(w http.ResponseWriter, id, model string, rep Reply) {
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("cache-control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageJSON(rep.Usage, 1),
	}})
	event("ping", map[string]any{"type": "ping"})
	for i, b := range blocksJSON(rep) {
		if b["type"] == "text" {
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		} else {
			input, _ := json.Marshal(b["input"])
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(rep), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": rep.Usage.OutputTokens}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
