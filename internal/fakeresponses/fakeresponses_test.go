package fakeresponses

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
	now := time.Unix(1795400000, 0)
	s := &Server{Script: func(r *Request) Reply {
		switch {
		case strings.Contains(r.Prompt(), "limit"):
			return UsageLimit(now.Add(time.Hour), now)
		case r.Turn() == 0:
			return Reply{Command: "ls", Usage: Usage{InputTokens: 10, CachedTokens: 4, OutputTokens: 2}}
		}
		return Reply{Text: "done"}
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	post := func(body string) (int, string) {
		resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(`{"model":"m","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`)
	for _, want := range []string{"event: response.created\n", `"type":"function_call"`, `"name":"exec_command"`,
		`\"cmd\":\"ls\"`, "event: response.completed\n", `"cached_tokens":4`, `"input_tokens":10`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("reply %d lacks %q:\n%s", code, want, body)
		}
	}
	code, body = post(`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"function_call_output","output":"x"}]}`)
	if code != 200 || !strings.Contains(body, `"text":"done"`) {
		t.Errorf("second turn: %d %s", code, body)
	}
	code, body = post(`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"limit"}]}]}`)
	if code != 429 || !strings.Contains(body, `"usage_limit_reached"`) || !strings.Contains(body, `"resets_at":1795403600`) || !strings.Contains(body, `"resets_in_seconds":3600`) {
		t.Errorf("usage limit: %d %s", code, body)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests recorded, want 3", n)
	}
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /v1/models = %v, %v; want 404", resp, err)
	}
}
