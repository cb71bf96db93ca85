package fakeanthropic

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/messages?beta=true", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestServerStreamsAsTheAPI(t *testing.T) {
	t.Parallel()
	s := &Server{Script: func(r *Request) Reply {
		if r.Turn() == 0 && r.HasTool("Bash") {
			return Tool("Bash", map[string]any{"command": "ls"}, Usage{InputTokens: 7, OutputTokens: 3, CacheReadTokens: 2})
		}
		return Text("done", Usage{InputTokens: 9, OutputTokens: 1})
	}}
	srv := httptest.NewServer(s)
	defer srv.Close()

	resp, body := post(t, srv.URL, `{"model":"m","stream":true,"max_tokens":10,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":[{"type":"text","text":"hello loop"}]}]}`)
	if ct := resp.Header.Get("content-type"); ct != "text/event-stream" {
		t.Errorf("content-type %q, want text/event-stream", ct)
	}
	for _, want := range []string{
		"event: message_start\n", `"input_tokens":7`, `"cache_read_input_tokens":2`,
		`"type":"tool_use"`, `"name":"Bash"`, `"partial_json":"{\"command\":\"ls\"}"`,
		`"stop_reason":"tool_use"`, `"output_tokens":3`, "event: message_stop\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("stream lacks %q:\n%s", want, body)
		}
	}
	_, body = post(t, srv.URL, `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}`)
	if !strings.Contains(body, `"text":"done"`) || !strings.Contains(body, `"stop_reason":"end_turn"`) {
		t.Errorf("non-streaming reply = %s", body)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Prompt() != "hello loop\n" || reqs[1].Turn() != 1 || reqs[0].Received.IsZero() {
		t.Errorf("recorded requests: %+v", reqs)
	}
}

func TestServerErrors(t *testing.T) {
	t.Parallel()
	reset := time.Unix(1795472573, 0)
	for _, tt := range []struct {
		rep     Reply
		status  int
		header  string
		value   string
		errType string
	}{
		{RateLimited(30 * time.Second), 429, "retry-after", "30", "rate_limit_error"},
		{SessionLimited("five_hour", reset), 429, "anthropic-ratelimit-unified-reset", "1795472573", "rate_limit_error"},
		{Overloaded(), 529, "", "", "overloaded_error"},
		{ServerError(), 500, "", "", "api_error"},
	} {
		s := &Server{Script: func(*Request) Reply { return tt.rep }}
		srv := httptest.NewServer(s)
		resp, body := post(t, srv.URL, `{"model":"m","messages":[]}`)
		srv.Close()
		if resp.StatusCode != tt.status || !strings.Contains(body, `"type":"`+tt.errType+`"`) {
			t.Errorf("status %d body %s; want %d and %s", resp.StatusCode, body, tt.status, tt.errType)
		}
		if tt.header != "" && resp.Header.Get(tt.header) != tt.value {
			t.Errorf("%s = %q, want %q", tt.header, resp.Header.Get(tt.header), tt.value)
		}
	}
}

func TestServerOtherPaths(t *testing.T) {
	t.Parallel()
	s := &Server{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD / = %v, %v; want 200", resp, err)
	}
	resp, _ = post(t, srv.URL+"/v1/other", "{}") // POST /v1/other/v1/messages
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST elsewhere = %d, want 404", resp.StatusCode)
	}
	if got := s.Other(); len(got) != 2 || got[0] != "HEAD /" || got[1] != "POST /v1/other/v1/messages" {
		t.Errorf("Other() = %q, want both requests", got)
	}
	if resp, body := post(t, srv.URL, "not json"); resp.StatusCode != 400 {
		t.Errorf("bad body: %d %s, want 400", resp.StatusCode, body)
	}
}
