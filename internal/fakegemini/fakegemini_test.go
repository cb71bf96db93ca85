package fakegemini

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestServer(t *testing.T) {
	t.Parallel()
	s := &Server{Script: func(r *Request) Reply {
		switch {
		case strings.Contains(r.Prompt(), "limit"):
			return QuotaExceeded(5 * time.Second)
		case r.Turn() == 0 && r.HasTool("write_file"):
			return Reply{Call: "write_file", Args: map[string]any{"file_path": "/a/plan.md", "content": "x"},
				Usage: Usage{PromptTokens: 100, CachedTokens: 40, OutputTokens: 7}}
		}
		return Reply{Text: "done"}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const stream = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	tools := `"tools":[{"functionDeclarations":[{"name":"write_file"},{"name":"run_shell_command"}]}]`
	code, body := post(stream, `{"contents":[{"role":"user","parts":[{"text":"go"}]}],`+tools+`}`)
	for _, want := range []string{"data: {", `"functionCall":{"args":{"content":"x","file_path":"/a/plan.md"},"name":"write_file"}`,
		`"promptTokenCount":100`, `"cachedContentTokenCount":40`, `"candidatesTokenCount":7`, `"finishReason":"STOP"`, "\r\n\r\n"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("reply %d lacks %q:\n%s", code, want, body)
		}
	}
	code, body = post(stream, `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"write_file"}}]},{"role":"user","parts":[{"functionResponse":{"name":"write_file"}}]}],`+tools+`}`)
	if code != 200 || !strings.Contains(body, `"text":"done"`) {
		t.Errorf("second turn: %d %s", code, body)
	}
	code, body = post(stream, `{"contents":[{"role":"user","parts":[{"text":"limit"}]}]}`)
	if code != 429 || !strings.Contains(body, `"RESOURCE_EXHAUSTED"`) || !strings.Contains(body, `"retryDelay":"5s"`) || !strings.Contains(body, "Please retry in 5.0s.") {
		t.Errorf("quota: %d %s", code, body)
	}
	// The router's structured request: answered from its schema.
	code, body = post("/v1beta/models/gemini-2.5-flash-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"route"}]}],
		"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"OBJECT","properties":{"complexity_reasoning":{"type":"STRING"},"complexity_score":{"type":"INTEGER"}},"required":["complexity_reasoning","complexity_score"]}}}`)
	if code != 200 || !strings.Contains(body, `{\"complexity_reasoning\":\"ok\",\"complexity_score\":10}`) || strings.HasPrefix(body, "data:") {
		t.Errorf("router: %d %s", code, body)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("%d requests recorded, want 4", n)
	}
	if r := s.Requests()[0]; r.Model != "gemini-2.5-flash" || !r.Stream {
		t.Errorf("first request: model %q stream %v", r.Model, r.Stream)
	}
	if code, _ := post("/v1beta/models/m:countTokens", `{"contents":[]}`); code != 200 {
		t.Errorf("countTokens = %d", code)
	}
	if code, _ := post("/v1/other", `{}`); code != 404 {
		t.Errorf("other path = %d, want 404", code)
	}
}
