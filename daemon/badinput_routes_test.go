package daemon_test

import (
	"context"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/daemon"
	"github.com/loopr-dev/loopr/internal/testslack"
)

// TestEveryRouteRefusesBadInput covers what TestBadInputIsA4xxJSONError
// leaves out: every route with an unknown query parameter, every action on
// an unknown id and on ids that cannot be ids, and the bodies of batch and
// gc malformed, mistyped and oversize. Each answer is a 4xx api.Error,
// never a 500. A batch whose items are refused one by one answers 200 with
// each item's error (partial success), and empty filters match everything:
// those must not be a 500 either.
func TestEveryRouteRefusesBadInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, newPaths(t), testConfig())
	hc := socketHTTP(d.paths.Socket())
	t.Cleanup(hc.CloseIdleConnections)
	big := strings.Repeat("x", 2<<20)

	type req struct{ method, path, body string }
	var reqs []req
	// Every route: an unknown query parameter.
	for _, r := range []req{
		{"GET", "/v1/status", ""}, {"GET", "/v1/loops", ""}, {"POST", "/v1/loops", `{"type":"ralph","task":"x"}`},
		{"POST", "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"x"}]}`}, {"GET", "/v1/loops/nope", ""},
		{"POST", "/v1/loops/nope/cancel", ""}, {"GET", "/v1/loops/nope/why", ""}, {"GET", "/v1/loops/nope/output", ""},
		{"GET", "/v1/scheduler", ""}, {"GET", "/v1/export", ""}, {"POST", "/v1/import", ""}, {"GET", "/v1/events", ""},
		{"GET", "/v1/stats", ""}, {"POST", "/v1/gc", `{"dry_run":true}`}, {"GET", "/metrics", ""},
		{"GET", "/v1/loops/nope/usage", ""}, {"POST", "/v1/loops/nope/budget", `{"usd":1}`},
		{"GET", "/v1/loops/nope/conflicts", ""}, {"GET", "/v1/loops/nope/diff", ""},
		{"GET", "/v1/limits", ""}, {"POST", "/v1/limits/default/clear", ""},
	} {
		sep := "?"
		if strings.Contains(r.path, "?") {
			sep = "&"
		}
		reqs = append(reqs, req{r.method, r.path + sep + "colour=red", r.body})
	}
	// Every action: an unknown id, an id too long, one with a slash or a
	// NUL or a non-ASCII letter, and an unknown action.
	for _, a := range api.Actions {
		for _, id := range []string{"nope", strings.Repeat("a", 65), "..%2Fetc", "a%00b", "caf%C3%A9", "-dash"} {
			reqs = append(reqs, req{"POST", "/v1/loops/" + id + "/" + a, `{"reason":"r","feedback":"f"}`})
		}
	}
	for _, path := range []string{"/v1/loops/%s", "/v1/loops/%s/why", "/v1/loops/%s/output", "/v1/loops/%s/usage", "/v1/loops/%s/conflicts", "/v1/loops/%s/diff"} {
		for _, id := range []string{strings.Repeat("a", 65), "a%00b", "caf%C3%A9"} {
			reqs = append(reqs, req{"GET", strings.Replace(path, "%s", id, 1), ""})
		}
	}
	// Bodies.
	for _, r := range []req{
		{"POST", "/v1/loops/batch", `{"loops":`},
		{"POST", "/v1/loops/batch", `[{"type":"ralph"}]`},
		{"POST", "/v1/loops/batch", ``},
		{"POST", "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"` + strings.Repeat("x", daemon.MaxBatchBytes) + `"}]}`},
		{"POST", "/v1/loops/batch", `{"loops":[{"type":["ralph"]}]}`},
		{"POST", "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"x","deadline":"soon"}]}`},
		{"POST", "/v1/loops", `{"type":"ralph","task":"x","cost_hint":"cheap"}`},
		{"POST", "/v1/loops", `{"type":"ralph","task":"x","max_iterations":1.5}`},
		{"POST", "/v1/loops", `{"type":"ralph","task":"x","max_iterations":99999999999999999999}`},
		{"POST", "/v1/loops", `{"type":"ralph","task":"x","runnable_at":12}`},
		{"POST", "/v1/loops", `"ralph"`},
		{"POST", "/v1/loops", "\xff\xfe"},
		{"POST", "/v1/loops/nope/budget", `{"usd":1}`},
		{"POST", "/v1/loops/nope/budget", `{"usd":"lots"}`},
		{"POST", "/v1/loops/nope/budget", `{"usd":-1}`},
		{"POST", "/v1/loops/nope/budget", `{}`},
		{"POST", "/v1/loops/nope/budget", ``},
		{"POST", "/v1/loops", `{"type":"ralph","task":"x","agent":"nope"}`},
		{"POST", "/v1/loops", `{"type":"ralph","task":"x","budget":{"usd":-3}}`},
		{"POST", "/v1/gc", `{"dry_run":"yes"}`},
		{"POST", "/v1/gc", `{"days":-1}`},
		{"POST", "/v1/gc", `{"days":`},
		{"POST", "/v1/gc", `{"dry_run":true,"force":true}`},
		{"POST", "/v1/gc", `{"days":"` + big + `"}`},
		{"POST", "/v1/limits/nope/clear", ""},
		{"POST", "/v1/limits/Default/clear", ""},
		{"POST", "/v1/limits/" + strings.Repeat("a", 40) + "/clear", ""},
		{"POST", "/v1/limits/a%00b/clear", ""},
		{"GET", "/v1/limits/default/clear", ""},
		{"POST", "/v1/import", "{\"id\":\"a\"}\n\x00\n"},
		{"POST", "/v1/import", `{"id":"../../etc","type":"ralph","status":"pending","iteration":1,"max_iterations":1,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"}`},
	} {
		reqs = append(reqs, r)
	}
	// Answered, not refused: never a 500, always JSON.
	soft := []req{
		{"POST", "/v1/loops/batch", `{"loops":[{"type":"ralph","task":"` + big[:1<<19] + `"}]}`},
		{"POST", "/v1/loops/batch", `{"loops":[null]}`},
		{"POST", "/v1/loops/batch", `{"loops":[{"type":"dragon","task":"x"},{"type":"ralph","parent":"nope","task":"y"}]}`},
		{"GET", "/v1/loops?status=", ""},
		{"GET", "/v1/loops?parent=..%2F..", ""},
		{"GET", "/v1/scheduler?now=", ""},
	}
	for _, r := range soft {
		resp, err := hc.Post("http://loopr"+r.path, "application/json", strings.NewReader(r.body))
		if r.method == "GET" {
			resp, err = hc.Get("http://loopr" + r.path)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 || !json.Valid(raw) {
			t.Errorf("%s %s = %d %q; want a JSON answer, not a 5xx", r.method, r.path, resp.StatusCode, clip(string(raw), 200))
		}
		if strings.HasSuffix(r.path, "/batch") {
			var res api.BatchResult
			if json.Unmarshal(raw, &res) != nil || res.Created != 0 || res.Failed == 0 || res.Results[0].Error == nil {
				t.Errorf("batch of bad items = %d %q; want every item refused with its error", resp.StatusCode, clip(string(raw), 200))
			}
		}
		t.Logf("%d: %s", resp.StatusCode, clip(string(raw), 160))
	}

	for _, r := range reqs {
		name := r.method + " " + r.path
		if len(r.body) < 80 {
			name += " " + r.body
		}
		ctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(10*time.Second))
		hr, err := http.NewRequestWithContext(ctx, r.method, "http://loopr"+r.path, strings.NewReader(r.body))
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", name, err)
		}
		resp, err := hc.Do(hr)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", name, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		var e api.Error
		jerr := json.Unmarshal(raw, &e)
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || jerr != nil || e.Err.Code == "" || e.Err.Message == "" {
			t.Errorf("%s = %d %q; want a 4xx api.Error", name, resp.StatusCode, clip(string(raw), 200))
			continue
		}
		t.Logf("%d %s: %s", resp.StatusCode, e.Err.Code, clip(e.Err.Message, 120))
	}
	if st, err := d.c.Status(context.Background()); err != nil || st.PID != d.pid {
		t.Errorf("the daemon after bad input: %+v, %v", st, err)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
