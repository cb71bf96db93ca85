package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/mcp"
	"github.com/loopr-dev/loopr/runner"
)

// POST /v1/mcp: the tool calls of agents, forwarded by `loopr mcp` (package
// mcp). Served on the main socket and on <home>/mcp.sock, the one socket a
// sandbox binds in (its only route, so a sandboxed agent reaches nothing
// else of the API). The token must be the loop's (HMAC of its id under
// <home>/mcp.secret), the loop's agent must be running, and the target
// must lie in the loop's subtree: 403 otherwise. Every call, refused or
// not, is journalled on the loop (kind mcp).

// mcpRoutes is the handler of <home>/mcp.sock.
func (d *daemon) mcpRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/mcp", d.wrap(d.mcpCall))
	return jsonFallback(mux)
}

// listenMCP binds <home>/mcp.sock and serves the MCP route on it until
// the returned server is shut down.
func (d *daemon) listenMCP() (*http.Server, error) {
	sock := filepath.Join(d.paths.Home, mcp.SocketName)
	ln, err := listen(sock)
	if err != nil {
		return nil, fmt.Errorf("mcp socket: %w", err)
	}
	srv := &http.Server{
		Handler:           d.mcpRoutes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := srv.Serve(&peerListener{Listener: ln, uid: os.Getuid(), log: d.log}); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("serve mcp socket", "socket", sock, "err", err)
		}
	}()
	return srv, nil
}

// mcpToken is loop id's token: what the runner hands its agent.
func (d *daemon) mcpToken(id string) string { return mcp.Token(d.mcpSecret, id) }

func (d *daemon) mcpCall(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	var req api.MCPRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if !loop.ValidID(req.Loop) {
		return control.Invalid("loop", "%q is not a loop id: `loopr mcp` reads it from $%s", req.Loop, mcp.EnvLoop)
	}
	done, err := d.beginWrite()
	if err != nil {
		return err
	}
	defer done()
	res, err := d.mcpDo(req)
	// What the caller sent is cut short: a hostile agent on mcp.sock may
	// name a tool, a target or a type of a megabyte.
	outcome := "ok"
	if err != nil {
		outcome = "refused: " + firstLine(err.Error())
	} else if res.Text != "" {
		outcome = "ok: " + firstLine(res.Text)
	}
	target := req.Target
	if target == "" {
		target = req.Loop
	}
	if jerr := d.svc.JournalMCP(req.Loop, fmt.Sprintf("mcp %s (target %s): %s", cut(req.Tool, 64), cut(target, 64), outcome)); jerr != nil {
		d.log.Warn("journal an mcp call", "loop", req.Loop, "tool", req.Tool, "err", jerr)
	}
	d.hub.poke()
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, res)
}

// firstLine is s up to its first newline, at most 200 bytes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return cut(s, 200)
}

// cut is s, or its first n bytes (whole runes) and "…" when longer.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// mcpDo checks the caller and runs one tool.
func (d *daemon) mcpDo(req api.MCPRequest) (api.MCPResult, error) {
	if !mcp.Verify(d.mcpSecret, req.Loop, req.Token) {
		return api.MCPResult{}, &control.ForbiddenError{Msg: fmt.Sprintf("token: not loop %s's: an agent's `loopr mcp` acts with the token loopr gave it ($%s)", req.Loop, mcp.EnvToken)}
	}
	self, err := d.svc.Get(req.Loop)
	if err != nil {
		return api.MCPResult{}, err
	}
	if self.Status != loop.Running {
		return api.MCPResult{}, &control.ForbiddenError{Msg: fmt.Sprintf("loop %s is %s: its token acts only while its agent runs", self.ID, self.Status)}
	}
	switch req.Tool {
	case api.ToolAskHuman:
		return d.mcpAsk(self, req.Question)
	case api.ToolReportProgress:
		pct := -1
		if req.Percent != nil {
			pct = *req.Percent
		}
		l, err := d.svc.SetProgress(self.ID, req.Text, pct)
		if err != nil {
			return api.MCPResult{}, err
		}
		return api.MCPResult{Text: "progress recorded: " + l.Progress.Text}, nil
	case api.ToolGetTask:
		l, err := d.svc.MCPTarget(self.ID, req.Target)
		if err != nil {
			return api.MCPResult{}, err
		}
		return api.MCPResult{Text: taskText(l), Loops: []loop.Loop{l}}, nil
	case api.ToolGetFeedback:
		l, err := d.svc.MCPTarget(self.ID, req.Target)
		if err != nil {
			return api.MCPResult{}, err
		}
		return api.MCPResult{Text: feedbackText(l)}, nil
	case api.ToolListSiblings:
		sib, err := d.svc.Siblings(self.ID)
		if err != nil {
			return api.MCPResult{}, err
		}
		return api.MCPResult{Text: siblingsText(sib), Loops: sib}, nil
	case api.ToolSpawnChild:
		l, err := d.svc.SpawnChild(self.ID, api.CreateRequest{Type: req.Type, Parent: req.Target, Title: req.Title, Task: req.Task})
		if err != nil {
			return api.MCPResult{}, err
		}
		d.mgr.Wake()
		return api.MCPResult{Text: fmt.Sprintf("created %s loop %s below %s: %s", l.Type, l.ID, l.Parent, l.Status), Loops: []loop.Loop{l}}, nil
	}
	return api.MCPResult{}, control.Invalid("tool", "%q is not a tool of loopr's MCP server: %s", req.Tool, strings.Join(api.MCPTools, ", "))
}

// mcpAsk writes the question to the running iteration's question file
// ($LOOPR_QUESTION_FILE): when the agent exits, the runner reads it and
// the loop goes to needs_human exactly as when the agent wrote it.
func (d *daemon) mcpAsk(l loop.Loop, q string) (api.MCPResult, error) {
	q = strings.TrimSpace(q)
	switch {
	case q == "":
		return api.MCPResult{}, control.Invalid("question", "empty: ask what you need a person to decide")
	case len(q) > runner.MaxQuestion:
		return api.MCPResult{}, control.Invalid("question", "%d bytes, at most %d", len(q), runner.MaxQuestion)
	}
	dir := runner.IterationDir(d.paths.Home, l.ID, l.Iteration)
	if err := safefile.WriteAtomic(filepath.Join(dir, runner.QuestionFile), []byte(q+"\n"), 0o644); err != nil {
		return api.MCPResult{}, fmt.Errorf("write the question: %w", err)
	}
	return api.MCPResult{Text: "Question recorded. End your turn now without further work: loopr stops this run, " +
		"waits for a person's answer and gives it to you in your next prompt."}, nil
}

func taskText(l loop.Loop) string {
	var b strings.Builder
	fmt.Fprintf(&b, "loop %s: %s %q, %s, iteration %d of %d\n", l.ID, l.Type, l.Title, l.Status, l.Iteration, l.MaxIterations)
	if l.Parent != "" {
		fmt.Fprintf(&b, "parent: %s\n", l.Parent)
	}
	if l.Task != "" {
		fmt.Fprintf(&b, "task:\n%s\n", l.Task)
	}
	return b.String()
}

func feedbackText(l loop.Loop) string {
	var b strings.Builder
	if l.Feedback != "" {
		fmt.Fprintf(&b, "feedback of the last failed iteration:\n%s\n", l.Feedback)
	}
	if l.Answer != "" {
		fmt.Fprintf(&b, "a person's answer:\n%s\n", l.Answer)
	}
	for _, c := range l.Comments {
		fmt.Fprintf(&b, "comment on %s:%d: %s\n", c.Path, c.Line, c.Text)
	}
	if b.Len() == 0 {
		return "no feedback for loop " + l.ID
	}
	return b.String()
}

func siblingsText(sib []loop.Loop) string {
	if len(sib) == 0 {
		return "no siblings"
	}
	var b strings.Builder
	for _, s := range sib {
		fmt.Fprintf(&b, "%s %s %s %q\n", s.ID, s.Type, s.Status, s.Title)
	}
	return b.String()
}

// mcpWiring is how the runner starts the MCP server beside an agent: this
// binary as `loopr mcp`; nil (no server) when the binary is unknown.
func (d *daemon) mcpWiring() *runner.MCP {
	exe, err := os.Executable()
	if err != nil {
		d.log.Warn("agents get no MCP server: the daemon's binary is unknown", "err", err)
		return nil
	}
	return &runner.MCP{Exe: exe, Socket: filepath.Join(d.paths.Home, mcp.SocketName), Token: d.mcpToken}
}
