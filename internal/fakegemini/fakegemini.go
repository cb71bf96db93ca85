// Package fakegemini is a scripted stand-in for the Gemini API
// (generativelanguage.googleapis.com), for tests that drive the real Gemini
// CLI offline: GOOGLE_GEMINI_BASE_URL points at it, with
// security.auth.selectedType "gemini-api-key" in the CLI's settings.json
// and any GEMINI_API_KEY.
//
// POST /v1beta/models/<model>:streamGenerateContent?alt=sse answers with
// the server-sent events the real API streams (a GenerateContentResponse
// with a text or a functionCall part, finishReason STOP and usageMetadata);
// :generateContent answers the same as one JSON object, :countTokens a
// count. The CLI's own structured requests (its model router asks for a
// complexity score with a responseJsonSchema) are answered without the
// script, with an object of the schema's required fields. Errors carry the
// real API's status and body: 429 RESOURCE_EXHAUSTED with a QuotaFailure
// and a RetryInfo (QuotaExceeded, DailyQuota) or bare (Exhausted), 503
// UNAVAILABLE (Unavailable). Other paths answer 404.
package fakegemini

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeapi"
)

// Request is what the CLI sent to a :generateContent or
// :streamGenerateContent call.
type Request struct {
	Model    string    `json:"-"` // from the path
	Stream   bool      `json:"-"` // :streamGenerateContent
	Contents []Content `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseJSONSchema *Schema `json:"responseJsonSchema"`
	} `json:"generationConfig"`

	Received time.Time `json:"-"`
}

// Content is one turn of Request.Contents.
type Content struct {
	Role  string `json:"role"`
	Parts []struct {
		Text             string          `json:"text"`
		FunctionCall     json.RawMessage `json:"functionCall"`
		FunctionResponse json.RawMessage `json:"functionResponse"`
	} `json:"parts"`
}

// Schema is the part of a responseJsonSchema the fake fills in.
type Schema struct {
	Type       string            `json:"type"`
	Properties map[string]Schema `json:"properties"`
	Required   []string          `json:"required"`
	Enum       []string          `json:"enum"`
}

// Prompt is the text of every user turn, joined: the prompt the CLI was
// given, after the session context it adds.
func (r *Request) Prompt() string {
	var b strings.Builder
	for _, c := range r.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != "" {
				b.WriteString(p.Text + "\n")
			}
		}
	}
	return b.String()
}

// Turn counts the model turns already in the conversation: 0 for the first
// request of a run, 1 after the first function response, and so on.
func (r *Request) Turn() int {
	n := 0
	for _, c := range r.Contents {
		if c.Role == "model" {
			n++
		}
	}
	return n
}

// HasTool reports whether the request declares the named function: the
// CLI's main loop does (write_file, run_shell_command, ...); its router
// does not.
func (r *Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		for _, f := range t.FunctionDeclarations {
			if f.Name == name {
				return true
			}
		}
	}
	return false
}

// Usage is what a reply reports consuming.
type Usage struct {
	PromptTokens   int64 // the cached ones included, as the API counts
	CachedTokens   int64
	OutputTokens   int64 // candidatesTokenCount
	ThoughtsTokens int64
}

// Reply is the answer to one request.
type Reply struct {
	Text string // a text part, when Call is ""
	// Call and Args make a functionCall part: the CLI runs the tool
	// (write_file, run_shell_command, ...) and sends its response back.
	Call  string
	Args  map[string]any
	Usage Usage
	// Status, when not 0 or 200, answers with that HTTP error and Body.
	Status int
	Body   string
}

// QuotaExceeded is the 429 of a per-minute quota: a QuotaFailure and a
// RetryInfo of retryDelay. The CLI waits a delay of up to 300 s itself
// (ten tries), and gives up at once on a longer one.
func QuotaExceeded(retryDelay time.Duration) Reply {
	secs := retryDelay.Seconds()
	return Reply{Status: http.StatusTooManyRequests, Body: errorBody(429, "RESOURCE_EXHAUSTED",
		fmt.Sprintf("You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10, model: gemini-2.5-flash\nPlease retry in %.1fs.", secs),
		quotaFailure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
		map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%ds", int(secs))})}
}

// DailyQuota is the 429 of a per-day quota: the CLI gives up at once
// ("You have exhausted your daily quota on this model.").
func DailyQuota() Reply {
	return Reply{Status: http.StatusTooManyRequests, Body: errorBody(429, "RESOURCE_EXHAUSTED",
		"You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: gemini-2.5-flash\nPlease retry in 20.5s.",
		quotaFailure("GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
		map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"})}
}

// Exhausted is a bare 429 without details: the CLI retries it with
// backoff, ten times.
func Exhausted() Reply {
	return Reply{Status: http.StatusTooManyRequests, Body: errorBody(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")}
}

// Unavailable is the 503 of an overloaded model.
func Unavailable() Reply {
	return Reply{Status: http.StatusServiceUnavailable, Body: errorBody(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")}
}

func quotaFailure(id string) map[string]any {
	return map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
		"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": id,
		"quotaDimensions": map[string]any{"location": "global", "model": "gemini-2.5-flash"},
	}}}
}

func errorBody(code int, status, msg string, details ...any) string {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

// Script decides the reply to a request of the CLI's main loop, one
// request at a time.
type Script func(r *Request) Reply

// Server is the fake API; use it as an http.Handler. Requests returns
// every generateContent request received so far, in order, the CLI's own
// structured ones included.
type Server struct {
	Script Script
	fakeapi.Log[Request]
}

// ServeHTTP answers POST /v1beta/models/<model>:<method>.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	rest, ok := strings.CutPrefix(hr.URL.Path, "/v1beta/models/")
	model, method, ok2 := strings.Cut(rest, ":")
	if hr.Method != http.MethodPost || !ok || !ok2 {
		http.NotFound(w, hr)
		return
	}
	req := &Request{}
	if err := fakeapi.ReadJSON(hr, req); err != nil {
		fakeapi.WriteError(w, http.StatusBadRequest, nil, errorBody(400, "INVALID_ARGUMENT", "bad request"))
		return
	}
	switch method {
	case "countTokens":
		w.Header().Set("content-type", "application/json")
		io.WriteString(w, `{"totalTokens":100}`)
		return
	case "generateContent", "streamGenerateContent":
	default:
		http.NotFound(w, hr)
		return
	}
	req.Model, req.Stream, req.Received = model, method == "streamGenerateContent", time.Now()
	var id int
	var rep Reply
	s.Record(req, func(n int) {
		id = n
		switch {
		case req.GenerationConfig.ResponseJSONSchema != nil:
			out, _ := json.Marshal(fill(*req.GenerationConfig.ResponseJSONSchema))
			rep = Reply{Text: string(out), Usage: Usage{PromptTokens: 7, OutputTokens: 3}}
		case s.Script != nil:
			rep = s.Script(req)
		default:
			rep = Reply{Text: "ok", Usage: Usage{PromptTokens: 10, OutputTokens: 1}}
		}
	})
	if rep.Status != 0 && rep.Status != http.StatusOK {
		fakeapi.WriteError(w, rep.Status, nil, rep.Body)
		return
	}
	b, _ := json.Marshal(response(rep, model, id))
	if !req.Stream {
		w.Header().Set("content-type", "application/json")
		w.Write(b)
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	fmt.Fprintf(w, "data: %s\r\n\r\n", b)
}

// response is the GenerateContentResponse of rep.
func response(rep Reply, model string, id int) map[string]any {
	part := map[string]any{"text": rep.Text}
	if rep.Call != "" {
		part = map[string]any{"functionCall": map[string]any{"name": rep.Call, "args": rep.Args}}
	}
	u := rep.Usage
	return map[string]any{
		"candidates": []any{map[string]any{
			"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0,
		}},
		"usageMetadata": map[string]any{
			"promptTokenCount": u.PromptTokens, "candidatesTokenCount": u.OutputTokens,
			"cachedContentTokenCount": u.CachedTokens, "thoughtsTokenCount": u.ThoughtsTokens,
			"totalTokenCount": u.PromptTokens + u.OutputTokens + u.ThoughtsTokens,
		},
		"modelVersion": model,
		"responseId":   fmt.Sprintf("fake%06d", id),
	}
}

// fill makes a value of schema: its required properties, each the first
// of its enum, else "ok", 10 or false by type.
func fill(sc Schema) any {
	if len(sc.Enum) > 0 {
		return sc.Enum[0]
	}
	switch strings.ToUpper(sc.Type) {
	case "OBJECT":
		o := map[string]any{}
		for _, name := range sc.Required {
			o[name] = fill(sc.Properties[name])
		}
		return o
	case "ARRAY":
		return []any{}
	case "INTEGER", "NUMBER":
		return 10
	case "BOOLEAN":
		return false
	}
	return "ok"
}
