package fakechat

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
			return RateLimited(30 * time.Second)
		case r.Turn() == 0 && r.HasTool("write"):
			return Reply{Tool: "write", Args: map[string]any{"filePath": "/a/plan.md", "content": "x"},
				Usage: Usage{PromptTokens: 100, CachedTokens: 40, CompletionTokens: 7}}
		}
		return Reply{Text: "done"}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(body string) (*http.Response, string) {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	tools := `"tools":[{"type":"function","function":{"name":"write"}},{"type":"function","function":{"name":"bash"}}]`
	resp, body := post(`{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}],` + tools + `}`)
	for _, want := range []string{`"object":"chat.completion.chunk"`, `"tool_calls":[{`, `"name":"write"`, `\"filePath\":\"/a/plan.md\"`,
		`"finish_reason":"tool_calls"`, `"prompt_tokens":100`, `"cached_tokens":40`, `"completion_tokens":7`, "data: [DONE]"} {
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("reply %d lacks %q:\n%s", resp.StatusCode, want, body)
		}
	}
	_, body = post(`{"stream":true,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":null},{"role":"tool","content":"ok"}],` + tools + `}`)
	if !strings.Contains(body, `"content":"done"`) || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Errorf("second turn: %s", body)
	}
	resp, body = post(`{"messages":[{"role":"user","content":"limit"}]}`)
	if resp.StatusCode != 429 || resp.Header.Get("retry-after") != "30" || !strings.Contains(body, "rate_limit_exceeded") {
		t.Errorf("rate limited: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	_, body = post(`{"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(body, `"object":"chat.completion"`) || !strings.Contains(body, `"content":"done"`) {
		t.Errorf("non-streaming: %s", body)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("%d requests recorded, want 4", n)
	}
	if r, err := http.Get(srv.URL + "/v1/models"); err != nil || r.StatusCode != 404 {
		t.Errorf("GET /v1/models = %v, %v; want 404", r, err)
	}
}
