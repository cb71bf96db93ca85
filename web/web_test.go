package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
)

var _ Backend = (*client.Client)(nil)

const testToken = "0123456789abcdef0123456789abcdef"

// fakeBackend is a daemon in memory: its loops and status, and the
// actions it was asked for.
type fakeBackend struct {
	mu     sync.Mutex
	loops  []loop.Loop
	status api.Status
	acts   []string // "id action answer|feedback|reason"
	events chan api.StreamMsg
	diff   *api.Diff // nil: a small one with markup in it
}

func (f *fakeBackend) Status(context.Context) (api.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, nil
}
func (f *fakeBackend) List(_ context.Context, req api.ListRequest) ([]loop.Loop, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []loop.Loop
	for _, l := range f.loops {
		if req.Parent == "" || l.Parent == req.Parent {
			out = append(out, l)
		}
	}
	return out, nil
}
func (f *fakeBackend) Get(_ context.Context, id string) (loop.Loop, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.loops {
		if l.ID == id {
			return l, nil
		}
	}
	return loop.Loop{}, &client.APIError{Status: 404, Code: api.CodeNotFound, Message: "no loop " + id}
}
func (f *fakeBackend) Why(_ context.Context, id string, now time.Time) (api.Why, error) {
	l, err := f.Get(context.Background(), id)
	return api.Why{Loop: l, Now: now, Formula: "priority 100"}, err
}
func (f *fakeBackend) Diff(context.Context, string) (api.Diff, error) {
	if f.diff != nil {
		return *f.diff, nil
	}
	return api.Diff{Command: "git diff a...b", Files: []api.DiffFile{{Path: "<b>x.go</b>", Status: "modified", Added: 1,
		Hunks: []api.DiffHunk{{Header: "@@ -1 +1 @@", Lines: []api.DiffLine{{Kind: api.DiffAdd, Text: "<script>alert(2)</script>"}}}}}}}, nil
}
func (f *fakeBackend) Output(context.Context, string, int) (string, error) {
	return "plain <script>alert(3)</script>\n", nil
}
func (f *fakeBackend) Act(_ context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, id+" "+action+" "+req.Answer+req.Feedback+req.Reason)
	return api.ActionResult{}, nil
}
func (f *fakeBackend) SetBudget(_ context.Context, id string, req api.BudgetRequest) (api.BudgetResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, id+" budget "+strconv.FormatFloat(*req.USD, 'f', -1, 64))
	return api.BudgetResult{}, nil
}
func (f *fakeBackend) Scheduler(context.Context, time.Time) (api.SchedulerView, error) {
	return api.SchedulerView{Rows: []api.SchedRow{{ID: "01JQUESTION", Priority: 142}}}, nil
}
func (f *fakeBackend) Events(ctx context.Context) (<-chan api.StreamMsg, error) {
	return f.events, nil
}

const evil = "<script>alert(1)</script>"

func newFake() *fakeBackend {
	now := time.Now()
	q := loop.Loop{ID: "01JQUESTION", Type: loop.Ralph, Status: loop.NeedsHuman, Title: evil, MaxIterations: 5, Iteration: 1,
		CreatedAt: now, Needs: &loop.Needs{Reason: loop.NeedsQuestion, Detail: "Blue " + evil + " or green?", Since: now}}
	p := loop.Loop{ID: "01JPLAN", Type: loop.Plan, Status: loop.AwaitingApproval, Title: "the plan", MaxIterations: 3, CreatedAt: now}
	return &fakeBackend{
		loops: []loop.Loop{p, q},
		status: api.Status{
			Counts:           map[loop.Status]int{loop.NeedsHuman: 1, loop.AwaitingApproval: 1},
			NeedsYou:         []api.NeedsYou{{ID: q.ID, Type: q.Type, Title: q.Title, Reason: loop.NeedsQuestion, Detail: q.Needs.Detail, Since: now}},
			AwaitingApproval: []api.Approval{{ID: p.ID, Type: p.Type, Title: p.Title, Since: now}},
		},
		events: make(chan api.StreamMsg, 16),
	}
}

func newTestServer(t *testing.T, be Backend) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(Options{Token: []byte(testToken), Dial: func(context.Context) (Backend, error) { return be, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts
}

// noRedirect is a client that shows redirects instead of following them.
func noRedirect(jar http.CookieJar) *http.Client {
	// A timeout: a stream served to a request that should have been
	// refused must fail the test, not hang it.
	return &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// session signs in with the token and returns the session cookie.
func session(t *testing.T, ts *httptest.Server) *http.Cookie {
	t.Helper()
	resp, err := noRedirect(nil).PostForm(ts.URL+"/login", url.Values{"token": {testToken}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	t.Fatalf("login with the token: %s, no session cookie", resp.Status)
	return nil
}

func do(t *testing.T, method, u string, c *http.Cookie, form url.Values, hdr ...string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := noRedirect(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestNoTokenIs401: every page, the stream and every action answer 401
// (with the login form) without the session cookie, or with a wrong one.
func TestNoTokenIs401(t *testing.T) {
	t.Parallel()
	be := newFake()
	_, ts := newTestServer(t, be)
	wrong := &http.Cookie{Name: sessionCookie, Value: strings.Repeat("0", 64)}
	for _, c := range []*http.Cookie{nil, wrong} {
		for _, tc := range []struct{ method, path string }{
			{"GET", "/"}, {"GET", "/loop/01JQUESTION"}, {"GET", "/events"},
			{"POST", "/loop/01JQUESTION/answer"}, {"POST", "/loop/01JPLAN/approve"}, {"POST", "/loop/01JQUESTION/budget"},
		} {
			resp, body := do(t, tc.method, ts.URL+tc.path, c, url.Values{"answer": {"x"}, "csrf": {"guess"}})
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) {
				t.Errorf("%s %s (cookie %v): %s; want 401 and the login form", tc.method, tc.path, c != nil, resp.Status)
			}
			if strings.Contains(body, "row-01J") || strings.Contains(body, "Blue") || strings.Contains(body, "the plan") {
				t.Errorf("%s %s: the 401 page shows the loops", tc.method, tc.path)
			}
		}
	}
	resp, _ := do(t, "POST", ts.URL+"/login", nil, url.Values{"token": {"not the token at all"}})
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("login with a wrong token: %s, cookies %v; want 401 and none", resp.Status, resp.Cookies())
	}
	if len(be.acts) != 0 {
		t.Errorf("actions reached the daemon without a session: %q", be.acts)
	}
}

// TestPostWithoutCSRFIs403: a signed-in POST without the CSRF token, with
// a wrong one or from another origin is refused 403 before the daemon
// hears of it; with it, the action reaches the daemon.
func TestPostWithoutCSRFIs403(t *testing.T) {
	t.Parallel()
	be := newFake()
	s, ts := newTestServer(t, be)
	c := session(t, ts)
	for name, tc := range map[string]struct {
		form url.Values
		hdr  []string
	}{
		"no token":     {url.Values{"answer": {"blue"}}, nil},
		"wrong token":  {url.Values{"answer": {"blue"}, "csrf": {strings.Repeat("a", 64)}}, nil},
		"other origin": {url.Values{"answer": {"blue"}, "csrf": {s.csrf}}, []string{"Origin", "https://evil.example"}},
	} {
		for _, path := range []string{"/loop/01JQUESTION/answer", "/loop/01JQUESTION/budget", "/logout"} {
			resp, _ := do(t, "POST", ts.URL+path, c, tc.form, tc.hdr...)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: POST %s = %s; want 403", name, path, resp.Status)
			}
		}
	}
	if len(be.acts) != 0 {
		t.Fatalf("refused POSTs reached the daemon: %q", be.acts)
	}
	resp, _ := do(t, "POST", ts.URL+"/loop/01JQUESTION/answer", c, url.Values{"answer": {"blue"}, "csrf": {s.csrf}, "back": {"//evil.example/"}},
		"Origin", ts.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("answer with the CSRF token: %s to %q; want 303 to / (never off-site)", resp.Status, resp.Header.Get("Location"))
	}
	resp, _ = do(t, "POST", ts.URL+"/loop/01JQUESTION/budget", c, url.Values{"usd": {"25"}, "csrf": {s.csrf}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("budget with the CSRF token: %s; want 303", resp.Status)
	}
	if want := []string{"01JQUESTION answer blue", "01JQUESTION budget 25"}; strings.Join(be.acts, "|") != strings.Join(want, "|") {
		t.Errorf("actions = %q; want %q", be.acts, want)
	}
	// GET never acts.
	if resp, _ := do(t, "GET", ts.URL+"/loop/01JPLAN/approve", c, nil); resp.StatusCode == http.StatusSeeOther || len(be.acts) != 2 {
		t.Errorf("GET of an action: %s, acts %q; want no action", resp.Status, be.acts)
	}
}

// TestScriptTitleEscaped: a title, question, output and diff holding
// <script> show escaped on every page and in the stream.
func TestScriptTitleEscaped(t *testing.T) {
	t.Parallel()
	be := newFake()
	_, ts := newTestServer(t, be)
	c := session(t, ts)
	check := func(where, body string) {
		t.Helper()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>x.go") {
			t.Errorf("%s: unescaped markup from the loop:\n%s", where, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the title is not shown escaped:\n%s", where, body)
		}
	}
	_, body := do(t, "GET", ts.URL+"/", c, nil)
	check("index", body)
	_, body = do(t, "GET", ts.URL+"/loop/01JQUESTION", c, nil)
	check("loop page", body)
	for _, s := range []string{"&lt;script&gt;alert(2)", "&lt;script&gt;alert(3)", "&lt;b&gt;x.go"} {
		if !strings.Contains(body, s) {
			t.Errorf("loop page lacks %q (the diff and output, escaped)", s)
		}
	}
	ev := streamOf(t, ts, c, be, 3)
	check("event stream", ev)
}

// streamOf reads the first n events of /events after the fake daemon
// sends a snapshot and a status.
func streamOf(t *testing.T, ts *httptest.Server, c *http.Cookie, be *fakeBackend, n int) string {
	t.Helper()
	st := be.status
	be.events <- api.StreamMsg{Type: "snapshot", Loops: be.loops, Status: &st}
	req, _ := http.NewRequest("GET", ts.URL+"/events", nil)
	req.AddCookie(c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events: %s, Content-Type %q", resp.Status, ct)
	}
	var out strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for got := 0; got < n && sc.Scan(); {
		out.WriteString(sc.Text() + "\n")
		if sc.Text() == "" {
			got++
		}
	}
	return out.String()
}

// TestStreamSendsRows: the stream sends the tree, the counts and the
// inbox for the snapshot, a row for a loop that changed and the tree again
// for a loop that appeared.
func TestStreamSendsRows(t *testing.T) {
	t.Parallel()
	be := newFake()
	_, ts := newTestServer(t, be)
	c := session(t, ts)
	changed := be.loops[1]
	changed.Status, changed.Needs = loop.Pending, nil
	born := loop.Loop{ID: "01JZNEW", Type: loop.Ralph, Status: loop.Pending, Title: "newborn", Parent: "01JPLAN", Depth: 1}
	be.events <- api.StreamMsg{Type: "snapshot", Loops: be.loops, Status: &be.status}
	be.events <- api.StreamMsg{Type: "event", Loop: &changed}
	be.events <- api.StreamMsg{Type: "event", Loop: &born}
	be.loops = nil // streamOf sends its own snapshot last: keep it empty
	ev := streamOf(t, ts, c, be, 6)
	for _, want := range []string{
		"event: tree\ndata: <ul class=\"tree\">",
		"event: counts\n",
		"event: inbox\ndata: <h2>Needs you",
		"event: row\ndata: <li id=\"row-01JQUESTION\" class=\"row d0 st-pending\"",
		"row-01JZNEW\" class=\"row d1 st-pending\"",
	} {
		if !strings.Contains(ev, want) {
			t.Errorf("stream lacks %q:\n%s", want, ev)
		}
	}
}

// TestLoginLinkOnce: a login link signs in once, with an HttpOnly,
// SameSite=Strict cookie; used again, or expired, it is refused.
func TestLoginLinkOnce(t *testing.T) {
	t.Parallel()
	be := newFake()
	now := time.Now()
	var mu sync.Mutex
	s, err := New(Options{Token: []byte(testToken), Dial: func(context.Context) (Backend, error) { return be, nil },
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	link, exp := s.LoginLink(ts.URL + "/")
	if !strings.HasPrefix(link, ts.URL+"/login?code=") || exp.Sub(now) != LoginLinkTTL {
		t.Fatalf("LoginLink = %q, %v", link, exp)
	}
	resp, _ := do(t, "GET", link, nil, nil)
	var got *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			got = c
		}
	}
	if resp.StatusCode != http.StatusOK || got == nil || !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || strings.Contains(got.Value, testToken) {
		t.Fatalf("login link: %s cookie %+v; want 200 and an HttpOnly SameSite=Strict session cookie that is not the token", resp.Status, got)
	}
	if resp, _ := do(t, "GET", ts.URL+"/", got, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("index with the link's cookie: %s", resp.Status)
	}
	if resp, _ := do(t, "GET", link, nil, nil); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("login link used twice: %s; want 401 and no cookie", resp.Status)
	}
	late, _ := s.LoginLink(ts.URL)
	mu.Lock()
	now = now.Add(LoginLinkTTL + time.Second)
	mu.Unlock()
	if resp, _ := do(t, "GET", late, nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("expired login link: %s; want 401", resp.Status)
	}
}

// TestPageWeight: the dashboard with 200 loops, its script and its
// style weigh at most 300 KB together.
func TestPageWeight(t *testing.T) {
	t.Parallel()
	be := newFake()
	for i := range 200 {
		be.loops = append(be.loops, loop.Loop{ID: "01JLOOP" + strings.Repeat("X", 3) + string(rune('A'+i%26)) + string(rune('A'+i/26)),
			Type: loop.Ralph, Status: loop.Running, Title: "a task with a fairly long title to weigh like a real one", Parent: "01JPLAN", Depth: 1,
			Progress: &loop.Progress{Text: "running the tests", Percent: 40}})
	}
	_, ts := newTestServer(t, be)
	c := session(t, ts)
	_, page := do(t, "GET", ts.URL+"/", c, nil)
	total := len(page)
	static, _ := fs.Sub(assets, "assets/static")
	n := 0
	_ = fs.WalkDir(static, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		resp, body := do(t, "GET", ts.URL+"/static/"+p, c, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/static/%s: %s", p, resp.Status)
		}
		total += len(body)
		n++
		return nil
	})
	t.Logf("page %d bytes + %d assets = %d bytes", len(page), n, total)
	if n < 2 || total > 300<<10 {
		t.Errorf("page weight %d bytes over %d assets; want ≤ 300 KB and the script and style counted", total, n)
	}
}

// TestStreamKeepsCarriageReturnsInData: EventSource ends a line at a CR
// as at a LF, so a CR in a title (an agent's spawn_child, a planner's
// section) must not reach the stream as one: it would cut the fragment
// and turn the rest of its line into a field of its own.
func TestStreamKeepsCarriageReturnsInData(t *testing.T) {
	t.Parallel()
	be := newFake()
	be.loops[0].Title = "first half\rretry: 1\revent: inbox\rsecond half"
	be.status.NeedsYou[0].Detail = "Blue\ror green?"
	_, ts := newTestServer(t, be)
	c := session(t, ts)
	ev := streamOf(t, ts, c, be, 3)
	if strings.Contains(ev, "\r") {
		t.Errorf("the stream carries a CR inside an event's data:\n%q", ev)
	}
	for _, want := range []string{"data: retry: 1\n", "data: second half"} {
		if !strings.Contains(ev, want) {
			t.Errorf("stream lacks %q (the title's lines, each a data: line):\n%q", want, ev)
		}
	}
}

// TestLoginNextStaysOnSite: after signing in, the browser goes back only
// to a path of this site. Browsers drop tabs and line breaks from a
// Location and read a backslash as a slash, so "/\t/evil.example" is
// "//evil.example", another site.
func TestLoginNextStaysOnSite(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, newFake())
	for _, next := range []string{"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "/\t\\evil.example", "//evil.example", "/\\evil.example", "https://evil.example/"} {
		req, _ := http.NewRequest("POST", ts.URL+"/login", strings.NewReader(url.Values{"token": {testToken}, "next": {next}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultTransport.RoundTrip(req) // Go's client refuses to parse such a Location; a browser follows it
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		seen := strings.Map(func(r rune) rune { // what a browser makes of it
			switch r {
			case '\t', '\n', '\r':
				return -1
			case '\\':
				return '/'
			}
			return r
		}, loc)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(seen, "/") || strings.HasPrefix(seen, "//") {
			t.Errorf("login with next %q: %s to %q; want a redirect to a path of this site", next, resp.Status, loc)
		}
	}
	for next, want := range map[string]string{"/loop/01JQUESTION": "/loop/01JQUESTION", "/?a=b": "/?a=b"} {
		if resp, _ := do(t, "POST", ts.URL+"/login", nil, url.Values{"token": {testToken}, "next": {next}}); resp.Header.Get("Location") != want {
			t.Errorf("login with next %q: to %q, want %q", next, resp.Header.Get("Location"), want)
		}
	}
}

// TestWrongLoginsLogOncePerSecond: a flood of wrong tokens (anyone who
// reaches the port may send them) logs at most a line a second, as the
// API's bearer check does, not a line each.
func TestWrongLoginsLogOncePerSecond(t *testing.T) {
	t.Parallel()
	var logs syncBuf
	s, err := New(Options{Token: []byte(testToken), Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Now:  func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }, // one instant: all in one second
		Dial: func(context.Context) (Backend, error) { return newFake(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for range 50 {
		if resp, _ := do(t, "POST", ts.URL+"/login", nil, url.Values{"token": {"wrong"}}); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("login with a wrong token: %s, want 401", resp.Status)
		}
	}
	if n := strings.Count(logs.String(), "refused a login"); n != 1 {
		t.Errorf("50 wrong logins within a second logged %d lines, want 1:\n%s", n, logs.String())
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLoopPageWeightBounded: a loop's page stays light whatever the loop
// holds: a diff of a minified file (one line of megabytes) and thousands
// of lines, and thousands of children, are cut and counted.
func TestLoopPageWeightBounded(t *testing.T) {
	t.Parallel()
	be := newFake()
	for i := range 5000 {
		be.loops = append(be.loops, loop.Loop{ID: fmt.Sprintf("01JKID%05d", i), Type: loop.Spec, Status: loop.Pending,
			Title: "a child with a fairly long title to weigh like a real one", Parent: "01JPLAN", Depth: 1})
	}
	h := api.DiffHunk{Header: "@@ -0,0 +1,5000 @@", Lines: []api.DiffLine{{Kind: api.DiffAdd, Text: strings.Repeat("m", 4<<20)}}}
	for range 2000 {
		h.Lines = append(h.Lines, api.DiffLine{Kind: api.DiffAdd, Text: strings.Repeat("x", 1000)})
	}
	be.diff = &api.Diff{Files: []api.DiffFile{{Path: "app.min.js", Status: "added", Added: 2001, Hunks: []api.DiffHunk{h}}}}
	_, ts := newTestServer(t, be)
	c := session(t, ts)
	resp, page := do(t, "GET", ts.URL+"/loop/01JPLAN", c, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("loop page: %s", resp.Status)
	}
	t.Logf("loop page: %d bytes", len(page))
	if len(page) > 600<<10 {
		t.Errorf("loop page of %d bytes; want at most 600 KiB", len(page))
	}
	for _, want := range []string{"4500 more children not shown", "more lines"} {
		if !strings.Contains(page, want) {
			t.Errorf("loop page lacks %q", want)
		}
	}
}

// TestSignOutRevokes: each sign-in is a session of its own, and signing
// out ends it at once — a copy of the cookie (another service on
// 127.0.0.1 receives it: cookies are not scoped by port) no longer opens
// the dashboard — while another browser's session goes on.
func TestSignOutRevokes(t *testing.T) {
	s, ts := newTestServer(t, newFake())
	a, b := session(t, ts), session(t, ts)
	if a.Value == b.Value {
		t.Fatalf("two sign-ins got the same session %q", a.Value)
	}
	if strings.Contains(a.Value, testToken) {
		t.Fatalf("the session cookie holds the token: %q", a.Value)
	}
	if resp, _ := do(t, "GET", ts.URL+"/", a, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed in: GET / = %s", resp.Status)
	}
	if resp, _ := do(t, "POST", ts.URL+"/logout", a, url.Values{"csrf": {s.csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out = %s", resp.Status)
	}
	if resp, _ := do(t, "GET", ts.URL+"/", a, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the signed-out cookie replayed: GET / = %s, want 401", resp.Status)
	}
	if resp, _ := do(t, "GET", ts.URL+"/", b, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the other browser's session: GET / = %s, want 200", resp.Status)
	}
}
