// Package fakeresponses is a scripted stand-in for the OpenAI Responses
// API, for tests that drive the real Codex CLI offline: a custom model
// provider in Codex's config.toml (base_url, wire_api "responses") points
// at it. POST /v1/responses answers with the server-sent events the real
// API streams (response.created, response.output_item.done with a message
// or a function call, response.completed with the usage); errors carry the
// real API's status and body (429 usage_limit_reached with resets_at, 429
// rate_limit_exceeded, 500). Other paths answer 404, which Codex tolerates
// (its model list refresh).
package fakeresponses

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeapi"
)

// Request is what the CLI sent to POST /v1/responses.
type Request struct {
	Model  string                  `json:"model"`
	Stream bool                    `json:"stream"`
	Input  []Item                  `json:"input"`
	Tools  []struct{ Name string } `json:"tools"`

	Received time.Time `json:"-"`
}

// Item is one entry of Request.Input.
type Item struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Output json.RawMessage `json:"output"`
}

// Prompt is the text of every user message, joined.
func (r *Request) Prompt() string {
	var b strings.Builder
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == "user" {
			for _, c := range it.Content {
				b.WriteString(c.Text + "\n")
			}
		}
	}
	return b.String()
}

// Turn counts the function call outputs already in the input: 0 for the
// first request of a run.
func (r *Request) Turn() int {
	n := 0
	for _, it := range r.Input {
		if it.Type == "function_call_output" {
			n++
		}
	}
	return n
}

// Usage is what a reply reports consuming.
type Usage struct {
	InputTokens  int64 // cached ones included, as the API counts
	CachedTokens int64
	OutputTokens int64
}

// Reply is the answer to one request.
type Reply struct {
	Text    string // a message, when Command is ""
	Command string // an exec_command call running this shell command
	Usage   Usage
	// Status, when not 0 or 200, answers with that HTTP error and Body.
	Status int
	Body   string
	// Delay holds the reply back (a slow provider, or one the test cuts
	// off by killing the CLI).
	Delay time.Duration
}

// UsageLimit is the 429 of a ChatGPT plan whose usage limit is spent.
func UsageLimit(resetsAt time.Time, now time.Time) Reply {
	return Reply{Status: 429, Body: fmt.Sprintf(`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":%d,"resets_in_seconds":%d}}`,
		resetsAt.Unix(), int64(resetsAt.Sub(now).Seconds()))}
}

// RateLimited is the 429 of an API key over its rate limit.
func RateLimited() Reply {
	return Reply{Status: 429, Body: `{"error":{"type":"requests","code":"rate_limit_exceeded","message":"Rate limit reached for requests per min (RPM): Limit 50, Used 50, Requested 1. Please try again in 1.2s."}}`}
}

// Script decides the reply to a request, one request at a time.
type Script func(r *Request) Reply

// Server is the fake API; use it as an http.Handler. Requests returns
// every POST /v1/responses received so far.
type Server struct {
	Script Script
	fakeapi.Log[Request]
}

// ServeHTTP answers POST /v1/responses from the script.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if hr.Method != http.MethodPost || hr.URL.Path != "/v1/responses" {
		http.NotFound(w, hr)
		return
	}
	req := &Request{}
	if err := fakeapi.ReadJSON(hr, req); err != nil {
		fakeapi.WriteError(w, http.StatusBadRequest, nil, `{"error":{"type":"invalid_request_error","message":"bad request"}}`)
		return
	}
	req.Received = time.Now()
	var id int
	rep := Reply{Text: "ok"}
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
	if rep.Status != 0 && rep.Status != http.StatusOK {
		fakeapi.WriteError(w, rep.Status, nil, rep.Body)
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	event := func(data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	respID := fmt.Sprintf("resp_fake%06d", id)
	event(map[string]any{"type": "response.created", "response": map[string]any{"id": respID}})
	var item map[string]any
	if rep.Command != "" {
		args, _ := json.Marshal(map[string]any{"cmd": rep.Command, "tty": false, "yield_time_ms": 10000})
		item = map[string]any{"type": "function_call", "name": "exec_command", "arguments": string(args), "call_id": fmt.Sprintf("call_fake%06d", id)}
	} else {
		item = map[string]any{"type": "message", "role": "assistant", "id": fmt.Sprintf("msg_fake%06d", id),
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text}}}
	}
	event(map[string]any{"type": "response.output_item.done", "item": item})
	event(map[string]any{"type": "response.completed", "response": map[string]any{"id": respID, "usage": map[string]any{
		"input_tokens": rep.Usage.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": rep.Usage.CachedTokens},
		"output_tokens": rep.Usage.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": rep.Usage.InputTokens + rep.Usage.OutputTokens,
	}}})
}
