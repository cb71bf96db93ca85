// Package client is the typed client of loopr's daemon API (SPEC §9): HTTP/1.1
// and JSON over the unix socket <home>/loopr.sock. The CLI uses it as its
// backend when a daemon runs, and the TUI through a small interface of its
// own (Events, Output and the actions).
//
// Dial checks that the daemon speaks this loopr's protocol version. Errors
// the daemon reports come back as *APIError; a daemon that is not there at
// all is ErrNoDaemon, so a caller can fall back to opening the store.
//
// The package imports only the wire types (api, loop): the TUI depends on
// it and must never pull in the store.
package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// DefaultTimeout bounds each request that has no deadline of its own,
// except the streams (Events, Export, Import), whose length depends on the
// data.
const DefaultTimeout = 30 * time.Second

// maxSocketPath is the longest unix socket path Linux accepts.
const maxSocketPath = 107

// ErrNoDaemon means nothing listens on the socket: it does not exist, or
// it is stale (connection refused).
var ErrNoDaemon = errors.New("no daemon running")

// VersionError reports a daemon that speaks another protocol version.
type VersionError struct {
	Daemon, Client int
	DaemonVersion  string // the daemon's loopr version, if it said
}

func (e *VersionError) Error() string {
	v := ""
	if e.DaemonVersion != "" {
		v = " (loopr " + e.DaemonVersion + ")"
	}
	return fmt.Sprintf("daemon speaks API protocol %d%s but this loopr speaks protocol %d: restart the daemon with this loopr, or use the loopr that started it",
		e.Daemon, v, e.Client)
}

// APIError is an error the daemon reported: its HTTP status and the
// api.Error body.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("daemon: %d %s", e.Status, http.StatusText(e.Status))
}

// Usage reports whether the error is the caller's (a 4xx: bad input, an
// unknown id, an illegal transition) rather than the daemon's.
func (e *APIError) Usage() bool { return e.Status >= 400 && e.Status < 500 }

// Client talks to one daemon. Its methods are safe for concurrent use.
type Client struct {
	socket  string
	tr      *http.Transport
	hc      *http.Client
	timeout time.Duration
	status  api.Status // as of Dial
}

// Dial connects to the daemon listening on socketPath and checks its
// protocol version. It returns an error wrapping ErrNoDaemon when no daemon
// listens there, and a *VersionError when one speaks another protocol.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	if len(socketPath) > maxSocketPath {
		// No daemon can listen there (it refuses to start on such a home).
		return nil, fmt.Errorf("%w: socket path %s is too long for a unix socket (%d bytes, max %d)",
			ErrNoDaemon, socketPath, len(socketPath), maxSocketPath)
	}
	// No socket file, no daemon: say so at once rather than racing the
	// caller's deadline on a loaded machine.
	if _, err := os.Stat(socketPath); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s: %w", ErrNoDaemon, socketPath, err)
	}
	c := newClient(socketPath)
	tr := c.tr
	resp, err := c.do(ctx, http.MethodGet, "/v1/status", nil, "")
	if err != nil {
		tr.CloseIdleConnections()
		if noDaemon(err) {
			return nil, fmt.Errorf("%w at %s: %w", ErrNoDaemon, socketPath, err)
		}
		return nil, fmt.Errorf("daemon at %s: %w", socketPath, err)
	}
	var st api.Status
	err = decodeResponse(resp, &st)
	if err == nil && st.Protocol != api.ProtocolVersion {
		err = &VersionError{Daemon: st.Protocol, Client: api.ProtocolVersion, DaemonVersion: st.Version}
	}
	if err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	c.status = st
	return c, nil
}

// newClient returns a client of the socket at socketPath, unchecked.
func newClient(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &Client{socket: socketPath, tr: tr, hc: &http.Client{Transport: tr}, timeout: DefaultTimeout}
}

// noDaemon reports whether a dial error means nothing listens.
func noDaemon(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOTSOCK)
}

// Socket returns the socket path the client talks to.
func (c *Client) Socket() string { return c.socket }

// DaemonPID returns the daemon's pid as it reported it at Dial.
func (c *Client) DaemonPID() int { return c.status.PID }

// Close releases idle connections. Streams opened by Events end with their
// contexts.
func (c *Client) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// do sends one request. body, when not nil, is sent with contentType.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://loopr"+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	return c.hc.Do(req)
}

// call sends a JSON request (in may be nil) and decodes a JSON response
// into out, within the default timeout unless ctx has a deadline.
func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.do(ctx, method, path, body, "application/json")
	if err != nil {
		return c.transportError(err)
	}
	return decodeResponse(resp, out)
}

// transportError explains a request that never got an answer.
func (c *Client) transportError(err error) error {
	if noDaemon(err) {
		return fmt.Errorf("daemon at %s went away: %w", c.socket, err)
	}
	return fmt.Errorf("daemon at %s: %w", c.socket, err)
}

// decodeResponse closes resp's body after decoding it into out, or returns
// the *APIError it carries.
func decodeResponse(resp *http.Response, out any) error {
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return readAPIError(resp)
	}
	if out == nil {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s response: %w", resp.Request.URL.Path, err)
	}
	return nil
}

// readAPIError builds an *APIError from a non-2xx response.
func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Status: resp.StatusCode}
	var body api.Error
	if json.Unmarshal(b, &body) == nil && body.Err.Message != "" {
		e.Code, e.Message = body.Err.Code, body.Err.Message
	} else {
		e.Message = fmt.Sprintf("daemon: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return e
}

// loopPath is /v1/loops/{id}[/rest].
func loopPath(id string, rest ...string) string {
	p := "/v1/loops/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// Create asks for a new loop.
func (c *Client) Create(ctx context.Context, req api.CreateRequest) (loop.Loop, error) {
	var l loop.Loop
	err := c.call(ctx, http.MethodPost, "/v1/loops", req, &l)
	return l, err
}

// CreateBatch creates several loops at once and returns a result per item,
// in request order: each item is created or refused on its own (partial
// success). An error means the batch as a whole was refused (malformed,
// empty, too many items) or failed, and then no loop was created.
func (c *Client) CreateBatch(ctx context.Context, reqs []api.CreateRequest) (api.BatchResult, error) {
	var res api.BatchResult
	err := c.call(ctx, http.MethodPost, "/v1/loops/batch", api.BatchRequest{Loops: reqs}, &res)
	return res, err
}

// GC runs a retention pass now (POST /v1/gc) and reports what it removed,
// or with req.DryRun what it would remove.
func (c *Client) GC(ctx context.Context, req api.GCRequest) (api.GCResult, error) {
	var res api.GCResult
	err := c.call(ctx, http.MethodPost, "/v1/gc", req, &res)
	return res, err
}

// Stats returns the daemon's summary: the store's counts and rates, and
// the counters and latencies it measured since it started.
func (c *Client) Stats(ctx context.Context) (api.Stats, error) {
	var st api.Stats
	err := c.call(ctx, http.MethodGet, "/v1/stats", nil, &st)
	return st, err
}

// List returns loops matching req in creation order.
func (c *Client) List(ctx context.Context, req api.ListRequest) ([]loop.Loop, error) {
	var loops []loop.Loop
	err := c.call(ctx, http.MethodGet, listPath(req), nil, &loops)
	return loops, err
}

// listPath is GET /v1/loops with req's filters.
func listPath(req api.ListRequest) string {
	q := url.Values{}
	if len(req.Status) > 0 {
		parts := make([]string, len(req.Status))
		for i, s := range req.Status {
			parts[i] = string(s)
		}
		q.Set("status", strings.Join(parts, ","))
	}
	if req.Type != "" {
		q.Set("type", req.Type)
	}
	if req.Parent != "" {
		q.Set("parent", req.Parent)
	}
	if req.Prefix != "" {
		q.Set("prefix", req.Prefix)
	}
	if req.Suffix != "" {
		q.Set("suffix", req.Suffix)
	}
	path := "/v1/loops"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// Get returns one loop.
func (c *Client) Get(ctx context.Context, id string) (loop.Loop, error) {
	var l loop.Loop
	err := c.call(ctx, http.MethodGet, loopPath(id), nil, &l)
	return l, err
}

// TreeUsage returns what a loop and all its descendants consumed.
func (c *Client) TreeUsage(ctx context.Context, id string) (api.TreeUsage, error) {
	var u api.TreeUsage
	err := c.call(ctx, http.MethodGet, loopPath(id, "usage"), nil, &u)
	return u, err
}

// Conflicts runs the conflict radar over the tree that holds loop id
// (`loopr conflicts`).
func (c *Client) Conflicts(ctx context.Context, id string) (api.Conflicts, error) {
	var out api.Conflicts
	err := c.call(ctx, http.MethodGet, loopPath(id, "conflicts"), nil, &out)
	return out, err
}

// SetBudget changes a loop's budget (`loopr budget`).
func (c *Client) SetBudget(ctx context.Context, id string, req api.BudgetRequest) (api.BudgetResult, error) {
	var res api.BudgetResult
	err := c.call(ctx, http.MethodPost, loopPath(id, "budget"), req, &res)
	return res, err
}

// Comment attaches a line comment to the loop that wrote the line, from
// loop id (`loopr comment`); the loop it reached is re-opened.
func (c *Client) Comment(ctx context.Context, id string, req api.CommentRequest) (api.Comment, error) {
	var res api.Comment
	err := c.call(ctx, http.MethodPost, loopPath(id, "comments"), req, &res)
	return res, err
}

// RecordManual journals the work a person did by hand on paused loop id
// (`loopr attach`).
func (c *Client) RecordManual(ctx context.Context, id string, req api.ManualRequest) error {
	return c.call(ctx, http.MethodPost, loopPath(id, "manual"), req, nil)
}

// Comments lists the comments of loop id and of the loops below it
// (`loopr comments`).
func (c *Client) Comments(ctx context.Context, id string) ([]api.Comment, error) {
	var out []api.Comment
	err := c.call(ctx, http.MethodGet, loopPath(id, "comments"), nil, &out)
	return out, err
}

// Limits returns the rate-limit state of every agent profile (`loopr limits`).
func (c *Client) Limits(ctx context.Context) ([]api.AgentLimit, error) {
	var out []api.AgentLimit
	err := c.call(ctx, http.MethodGet, "/v1/limits", nil, &out)
	return out, err
}

// ClearLimit forgets an agent profile's rate limit (`loopr limits clear`).
func (c *Client) ClearLimit(ctx context.Context, agent string) (api.ClearLimitResult, error) {
	var res api.ClearLimitResult
	err := c.call(ctx, http.MethodPost, "/v1/limits/"+url.PathEscape(agent)+"/clear", nil, &res)
	return res, err
}

// Act applies a user action (api.ActionCancel …) to a loop.
func (c *Client) Act(ctx context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error) {
	var res api.ActionResult
	err := c.call(ctx, http.MethodPost, loopPath(id, action), req, &res)
	return res, err
}

// nowQuery is "?now=…" for a non-zero now.
func nowQuery(now time.Time) string {
	if now.IsZero() {
		return ""
	}
	return "?now=" + url.QueryEscape(now.UTC().Format(time.RFC3339Nano))
}

// Why explains a loop's priority and gates at now (zero: the daemon's now).
func (c *Client) Why(ctx context.Context, id string, now time.Time) (api.Why, error) {
	var w api.Why
	err := c.call(ctx, http.MethodGet, loopPath(id, "why")+nowQuery(now), nil, &w)
	return w, err
}

// Scheduler returns the debug plan at now (zero: the daemon's now), its
// rows decoded as they arrive into a slice sized from the view's waiting
// count (SchedulerRows, stream.go).
func (c *Client) Scheduler(ctx context.Context, now time.Time) (api.SchedulerView, error) {
	var rows []api.SchedRow
	v, err := c.SchedulerRows(ctx, now, func(v *api.SchedulerView, r *api.SchedRow) error {
		if rows == nil {
			rows = make([]api.SchedRow, 0, max(1, min(v.Waiting, 1<<20))) // a hint: more rows may come
		}
		rows = append(rows, *r)
		return nil
	})
	if err != nil {
		return api.SchedulerView{}, err
	}
	if rows != nil {
		v.Rows = rows
	}
	return v, nil
}

// Status returns the daemon's status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := c.call(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// Export writes every loop record to w as JSON Lines and returns how many.
func (c *Client) Export(ctx context.Context, w io.Writer) (int, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/export", nil, "")
	if err != nil {
		return 0, c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, readAPIError(resp)
	}
	lc := &lineCounter{w: w}
	if _, err := io.Copy(lc, resp.Body); err != nil {
		return lc.lines, fmt.Errorf("export: %w", err)
	}
	return lc.lines, nil
}

// lineCounter counts the newlines written through it.
type lineCounter struct {
	w     io.Writer
	lines int
}

func (l *lineCounter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.lines += bytes.Count(p[:n], []byte{'\n'})
	return n, err
}

// Import stores loops (keeping ids and times), all or nothing, and returns
// how many it stored.
func (c *Client) Import(ctx context.Context, loops []loop.Loop) (int, error) {
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 64<<10)
		enc := json.NewEncoder(bw)
		for i := range loops {
			if err := enc.Encode(&loops[i]); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(bw.Flush())
	}()
	resp, err := c.do(ctx, http.MethodPost, "/v1/import", pr, "application/jsonl")
	pr.Close()
	if err != nil {
		return 0, c.transportError(err)
	}
	var res api.ImportResult
	if err := decodeResponse(resp, &res); err != nil {
		return 0, err
	}
	return res.Imported, nil
}

// Output returns the tail of the agent output of a loop's current (or
// latest) iteration: at most maxBytes (<= 0: the daemon's default).
func (c *Client) Output(ctx context.Context, id string, maxBytes int) (string, error) {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	path := loopPath(id, "output")
	if maxBytes > 0 {
		path += "?bytes=" + strconv.Itoa(maxBytes)
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return "", c.transportError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", readAPIError(resp)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("output: %w", err)
	}
	return string(b), nil
}

// Events opens the daemon's event stream: first an api.StreamSnapshot, then
// events, status updates and heartbeats as they come. The channel closes
// when ctx is cancelled or the connection drops (the daemon stopped).
func (c *Client) Events(ctx context.Context) (<-chan api.StreamMsg, error) {
	ctx, cancel := context.WithCancel(ctx)
	resp, err := c.do(ctx, http.MethodGet, "/v1/events", nil, "")
	if err != nil {
		cancel()
		return nil, c.transportError(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	ch := make(chan api.StreamMsg, 64)
	go func() {
		defer close(ch)
		defer cancel()
		defer resp.Body.Close()
		dec := json.NewDecoder(bufio.NewReaderSize(resp.Body, 64<<10))
		for {
			var m api.StreamMsg
			if err := dec.Decode(&m); err != nil {
				return
			}
			select {
			case ch <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// Land lands a plan's branch on its base branch (`loopr land`): it takes
// as long as merge.validate does, so ctx should carry its own deadline.
func (c *Client) Land(ctx context.Context, id string, req api.LandRequest) (api.LandResult, error) {
	var res api.LandResult
	err := c.call(ctx, http.MethodPost, loopPath(id, "land"), req, &res)
	return res, err
}

// WebLogin asks the daemon for the web dashboard's address and a one-time
// login link (`loopr web`); a 409 when the dashboard is off.
func (c *Client) WebLogin(ctx context.Context) (api.WebLogin, error) {
	var res api.WebLogin
	err := c.call(ctx, http.MethodPost, "/v1/web/login", nil, &res)
	return res, err
}
