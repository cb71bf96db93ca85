package daemon_test

import (
	"context"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
)

// socketHTTP is a plain HTTP client over the daemon's socket, for requests
// the typed client would never send.
func socketHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

// TestBadInputIsA4xxJSONError sends every route malformed, mistyped,
// unknown and oversize input: each answer is a 4xx with an api.Error body,
// never a 500.
func TestBadInputIsA4xxJSONError(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, newPaths(t), testConfig())
	id := create(t, d.c, "target", false).ID
	hc := socketHTTP(d.paths.Socket())
	t.Cleanup(hc.CloseIdleConnections)

	big := `{"type":"ralph","task":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := []struct {
		name         string
		method, path string
		body         string
		status       int
		code         string
		mention      string // the message names this (field, value)
	}{
		{"create malformed", "POST", "/v1/loops", `{"type":`, 400, api.CodeInvalid, "malformed JSON"},
		{"create not json", "POST", "/v1/loops", `type=ralph`, 400, api.CodeInvalid, "malformed JSON"},
		{"create empty body", "POST", "/v1/loops", ``, 400, api.CodeInvalid, "empty"},
		{"create array", "POST", "/v1/loops", `[]`, 400, api.CodeInvalid, "array"},
		{"create wrong type for type", "POST", "/v1/loops", `{"type":5,"task":"x"}`, 400, api.CodeInvalid, "type"},
		{"create wrong type for max_iterations", "POST", "/v1/loops", `{"type":"ralph","task":"x","max_iterations":"ten"}`, 400, api.CodeInvalid, "max_iterations"},
		{"create bad time", "POST", "/v1/loops", `{"type":"ralph","task":"x","deadline":"tomorrow"}`, 400, api.CodeInvalid, "tomorrow"},
		{"create unknown field", "POST", "/v1/loops", `{"type":"ralph","task":"x","colour":"red"}`, 400, api.CodeInvalid, "colour"},
		{"create trailing data", "POST", "/v1/loops", `{"type":"ralph","task":"x"} {"type":"ralph"}`, 400, api.CodeInvalid, "after the JSON object"},
		{"create unknown loop type", "POST", "/v1/loops", `{"type":"dragon","task":"x"}`, 400, api.CodeInvalid, "dragon"},
		{"create no task", "POST", "/v1/loops", `{"type":"ralph"}`, 400, api.CodeInvalid, "task"},
		{"create negative max_iterations", "POST", "/v1/loops", `{"type":"ralph","task":"x","max_iterations":-1}`, 400, api.CodeInvalid, "iterations"},
		{"create unknown parent", "POST", "/v1/loops", `{"type":"ralph","task":"x","parent":"nope"}`, 404, api.CodeNotFound, "nope"},
		{"create oversize", "POST", "/v1/loops", big, 413, api.CodeTooLarge, "too large"},
		{"create query", "POST", "/v1/loops?force=1", `{"type":"ralph","task":"x"}`, 400, api.CodeInvalid, "force"},
		{"batch empty", "POST", "/v1/loops/batch", `{"loops":[]}`, 400, api.CodeInvalid, "loops"},
		{"batch not a list", "POST", "/v1/loops/batch", `{"loops":{}}`, 400, api.CodeInvalid, "loops"},
		{"batch item unknown field", "POST", "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"x","colour":1}]}`, 400, api.CodeInvalid, "colour"},
		{"batch item wrong type", "POST", "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"x","max_iterations":"9"}]}`, 400, api.CodeInvalid, "max_iterations"},
		{"batch too many", "POST", "/v1/loops/batch", `{"loops":[` + strings.Repeat(`{"type":"ralph","task":"x"},`, 1000) + `{"type":"ralph","task":"x"}]}`, 400, api.CodeInvalid, "at most 1000"},
		{"get unknown id", "GET", "/v1/loops/nope", ``, 404, api.CodeNotFound, "nope"},
		{"get invalid id", "GET", "/v1/loops/..%2F..%2Fetc", ``, 400, api.CodeInvalid, "not a loop id"},
		{"list unknown status", "GET", "/v1/loops?status=sleepy", ``, 400, api.CodeInvalid, "sleepy"},
		{"list unknown type", "GET", "/v1/loops?type=dragon", ``, 400, api.CodeInvalid, "dragon"},
		{"list unknown parameter", "GET", "/v1/loops?colour=red", ``, 400, api.CodeInvalid, "colour"},
		{"act unknown id", "POST", "/v1/loops/nope/cancel", ``, 404, api.CodeNotFound, "nope"},
		{"act unknown action", "POST", "/v1/loops/" + id + "/explode", ``, 400, api.CodeInvalid, "explode"},
		{"act malformed", "POST", "/v1/loops/" + id + "/cancel", `{"reason":`, 400, api.CodeInvalid, "malformed"},
		{"act wrong type", "POST", "/v1/loops/" + id + "/cancel", `{"reason":5}`, 400, api.CodeInvalid, "reason"},
		{"act unknown field", "POST", "/v1/loops/" + id + "/cancel", `{"why":"x"}`, 400, api.CodeInvalid, "why"},
		{"act oversize", "POST", "/v1/loops/" + id + "/cancel", `{"reason":"` + strings.Repeat("x", 2<<20) + `"}`, 413, api.CodeTooLarge, "too large"},
		{"act iterate without feedback", "POST", "/v1/loops/" + id + "/iterate", `{}`, 400, api.CodeInvalid, "feedback"},
		{"act illegal transition", "POST", "/v1/loops/" + id + "/approve", `{}`, 409, api.CodeConflict, id},
		{"why unknown id", "GET", "/v1/loops/nope/why", ``, 404, api.CodeNotFound, "nope"},
		{"conflicts unknown id", "GET", "/v1/loops/nope/conflicts", ``, 404, api.CodeNotFound, "nope"},
		{"diff unknown id", "GET", "/v1/loops/nope/diff", ``, 404, api.CodeNotFound, "nope"},
		{"why bad now", "GET", "/v1/loops/" + id + "/why?now=yesterday", ``, 400, api.CodeInvalid, "now"},
		{"scheduler bad now", "GET", "/v1/scheduler?now=12:00", ``, 400, api.CodeInvalid, "now"},
		{"output unknown id", "GET", "/v1/loops/nope/output", ``, 404, api.CodeNotFound, "nope"},
		{"output bad bytes", "GET", "/v1/loops/" + id + "/output?bytes=-1", ``, 400, api.CodeInvalid, "bytes"},
		{"output non-numeric bytes", "GET", "/v1/loops/" + id + "/output?bytes=lots", ``, 400, api.CodeInvalid, "bytes"},
		{"import malformed", "POST", "/v1/import", `{"id":`, 400, api.CodeInvalid, "line 1"},
		{"import unknown field", "POST", "/v1/import", `{"id":"a","type":"ralph","status":"pending","iteration":1,"max_iterations":1,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","depth":0,"colour":"red"}`, 400, api.CodeInvalid, "colour"},
		{"import wrong type", "POST", "/v1/import", `{"id":7}`, 400, api.CodeInvalid, "line 1"},
		{"import orphan", "POST", "/v1/import", `{"id":"a","type":"ralph","status":"pending","parent":"ghost","iteration":1,"max_iterations":1,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","depth":1}`, 400, "", "ghost"},
		{"import existing id", "POST", "/v1/import", `{"id":"` + id + `","type":"ralph","status":"pending","iteration":1,"max_iterations":1,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","depth":0}`, 409, api.CodeConflict, id},
		{"unknown route", "GET", "/v2/loops", ``, 404, api.CodeNotFound, "/v2/loops"},
		{"wrong method", "DELETE", "/v1/loops", ``, 405, api.CodeInvalid, "DELETE"},
		{"wrong method on status", "PUT", "/v1/status", `{}`, 405, api.CodeInvalid, "PUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, "http://loopr"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var e api.Error
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("%s %s: body %q is not an api.Error: %v", tt.method, tt.path, raw, err)
			}
			want := tt.status
			if tt.code == "" && resp.StatusCode >= 400 && resp.StatusCode < 500 {
				want = resp.StatusCode // any 4xx will do
			}
			if resp.StatusCode != want || (tt.code != "" && e.Err.Code != tt.code) {
				t.Errorf("%s %s = %d %s %q; want %d %s", tt.method, tt.path, resp.StatusCode, e.Err.Code, e.Err.Message, tt.status, tt.code)
			}
			t.Logf("%d %s: %s", resp.StatusCode, e.Err.Code, e.Err.Message)
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if !strings.Contains(e.Err.Message, tt.mention) {
				t.Errorf("message %q does not mention %q", e.Err.Message, tt.mention)
			}
		})
	}
	// The loop survived every assault unchanged.
	l, err := d.c.Get(context.Background(), id)
	if err != nil || l.Status != "pending" {
		t.Errorf("target after bad input = %s, %v; want pending", l.Status, err)
	}
}
