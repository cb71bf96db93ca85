// Package fakechat is a scripted stand-in for an OpenAI-compatible Chat
// Completions API, for tests that drive the real opencode CLI offline: a
// provider of npm package @ai-sdk/openai-compatible in opencode.json whose
// options.baseURL points at it.
//
// POST <base>/chat/completions answers a streaming request with the
// server-sent events the real API streams (chat.completion.chunk deltas
// of the text or of one tool call, a last chunk with finish_reason and the
// usage, then [DONE]), and any other with one chat.completion object.
// Errors carry the status, headers (retry-after) and body the real API
// sends (RateLimited). Other paths answer 404.
package fakechat

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeapi"
)

// Request is what the CLI sent to POST /chat/completions.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`

	Received time.Time `json:"-"`
}

// Message is one entry of Request.Messages; Content is a string or a list
// of parts.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Text is the message's text: its string, or its text parts joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text + "\n")
	}
	return b.String()
}

// Prompt is the text of every user message, joined.
func (r *Request) Prompt() string {
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Role == "user" {
			b.WriteString(m.Text() + "\n")
		}
	}
	return b.String()
}

// Turn counts the tool results already in the conversation: 0 for the
// first request of a run.
func (r *Request) Turn() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

// HasTool reports whether the request offers the named tool: opencode's
// main loop does (bash, write, ...); its title requests do not.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// Usage is what a reply reports consuming.
type Usage struct {
	PromptTokens     int64 // the cached ones included, as the API counts
	CachedTokens     int64
	CompletionTokens int64
}

// Reply is the answer to one request.
type Reply struct {
	Text string // the assistant's text, when Tool is ""
	// Tool and Args make one tool call: the CLI runs the tool and sends
	// its result back.
	Tool  string
	Args  map[string]any
	Usage Usage
	// Status, when not 0 or 200, answers with that HTTP error: Header and
	// Body.
	Status int
	Header http.Header
	Body   string
}

// RateLimited is the 429 of a provider over its rate limit, with a
// retry-after of retryAfter when it is not 0.
func RateLimited(retryAfter time.Duration) Reply {
	h := http.Header{}
	if retryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int(retryAfter.Seconds())))
	}
	return Reply{Status: http.StatusTooManyRequests, Header: h,
		Body: `{"error":{"message":"Rate limit reached for requests per minute (RPM): Limit 50, Used 50, Requested 1.","type":"requests","code":"rate_limit_exceeded"}}`}
}

// Script decides the reply to a request, one request at a time.
type Script func(r *Request) Reply

// Server is the fake API; use it as an http.Handler. Requests returns
// every POST …/chat/completions received so far.
type Server struct {
	Script Script
	fakeapi.Log[Request]
}

// ServeHTTP answers POST …/chat/completions from the script.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if hr.Method != http.MethodPost || !strings.HasSuffix(hr.URL.Path, "/chat/completions") {
		http.NotFound(w, hr)
		return
	}
	req := &Request{}
	if err := fakeapi.ReadJSON(hr, req); err != nil {
		fakeapi.WriteError(w, http.StatusBadRequest, nil, `{"error":{"message":"bad request","type":"invalid_request_error"}}`)
		return
	}
	req.Received = time.Now()
	var id string
	rep := Reply{Text: "ok", Usage: Usage{PromptTokens: 10, CompletionTokens: 1}}
	s.Record(req, func(n int) {
		id = fmt.Sprintf("chatcmpl-fake%06d", n)
		if s.Script != nil {
			rep = s.Script(req)
		}
	})
	if rep.Status != 0 && rep.Status != http.StatusOK {
		fakeapi.WriteError(w, rep.Status, rep.Header, rep.Body)
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Text}
	finish := "stop"
	if rep.Tool != "" {
		args, _ := json.Marshal(rep.Args)
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": "call_" + id, "type": "function",
			"function": map[string]any{"name": rep.Tool, "arguments": string(args)},
		}}}
		finish = "tool_calls"
	}
	usage := map[string]any{
		"prompt_tokens": rep.Usage.PromptTokens, "completion_tokens": rep.Usage.CompletionTokens,
		"total_tokens":          rep.Usage.PromptTokens + rep.Usage.CompletionTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": rep.Usage.CachedTokens},
	}
	if !req.Stream {
		w.Header().Set("content-type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": req.Received.Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": req.Received.Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk(msg, nil, nil)
	chunk(map[string]any{}, finish, usage)
	io.WriteString(w, "data: [DONE]\n\n")
}
