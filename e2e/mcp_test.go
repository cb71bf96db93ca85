package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/fakeanthropic"
	"github.com/loopr-dev/loopr/loop"
)

// mcpAgentConfig runs each loop's agent as a script that writes its
// LOOPR_* environment to <dir>/<loop>.env and waits until <dir>/release
// exists: the test talks to `loopr mcp` as that agent while it runs.
func mcpAgentConfig(dir, extra string) string {
	script := fmt.Sprintf(`env | grep '^LOOPR_' > %[1]s/$LOOPR_LOOP_ID.env; while [ ! -e %[1]s/release ]; do sleep 0.2; done`, dir)
	return fastRetries + fmt.Sprintf(`concurrency:
  max_loops: 6
agent:
  preset: command
  command: ["sh", "-c", %q]
  timeout_secs: 600
loops:
  plan: {require_approval: false, max_iterations: 1}
  spec: {max_iterations: 1}
storage:
  disk_quota_min_gb: 0
`, script) + extra
}

// agentEnv waits for the environment the agent of loop id wrote and
// returns its LOOPR_* entries.
func agentEnv(t *testing.T, dir, id string) []string {
	t.Helper()
	path := filepath.Join(dir, id+".env")
	var env []string
	waitEvery(t, 90*time.Second, slowPoll, "the agent of "+id+" to start", func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), "LOOPR_MCP_TOKEN=") {
			return false
		}
		env = strings.Split(strings.TrimSpace(string(b)), "\n")
		return true
	})
	return env
}

// mcpSession starts `loopr mcp` with env (the agent's LOOPR_* variables)
// as the SDK's client does an agent CLI, in the workspace.
func mcpSession(t *testing.T, r repo, env []string) *sdk.ClientSession {
	t.Helper()
	cmd := exec.Command(bin, "mcp")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to loopr mcp: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callTool calls a tool and returns its text and whether it was an error.
func callTool(t *testing.T, s *sdk.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// TestMCPScriptedClient: the SDK's client talks to `loopr mcp` with the
// environment loopr gave a running agent. spawn_child below its own loop
// is admitted; below another tree's loop, or with another loop's id and
// its own token, it is refused (403, named); report_progress lands on the
// loop; ask_human sends the loop to needs_human with the question once
// the agent exits; every call is in the journal.
func TestMCPScriptedClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRepo(t, mcpAgentConfig(dir, ""))
	d := startDaemon(t, r)
	var a, b loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Tree A", "--json"), &a)
	mustJSON(t, ok(t, r.dir, "plan", "Tree B", "--json"), &b)
	envA := agentEnv(t, dir, string(a.ID))
	envB := agentEnv(t, dir, string(b.ID))

	s := mcpSession(t, r, envA)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range api.MCPTools {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	calls := 0
	call := func(s *sdk.ClientSession, name string, args map[string]any) (string, bool) {
		calls++
		return callTool(t, s, name, args)
	}

	text, isErr := call(s, "spawn_child", map[string]any{"type": "spec", "title": "Child of A", "task": "Write the child."})
	if isErr || !strings.Contains(text, "below "+string(a.ID)) {
		t.Fatalf("spawn_child below its own loop: %q (error %v), want it created below %s", text, isErr, a.ID)
	}
	var child loop.Loop
	for _, l := range list(t, r) {
		if l.Title == "Child of A" {
			child = l
		}
	}
	if child.Parent != a.ID || child.Type != loop.Spec {
		t.Errorf("the spawned loop: %+v, want a spec below %s", child, a.ID)
	}

	text, isErr = call(s, "spawn_child", map[string]any{"type": "spec", "title": "Intruder", "task": "x", "parent": string(b.ID)})
	if !isErr || !strings.Contains(text, "outside the subtree of loop "+string(a.ID)) {
		t.Errorf("spawn_child below another tree: %q (error %v), want refused as outside the subtree", text, isErr)
	}
	for _, l := range list(t, r) {
		if l.Title == "Intruder" {
			t.Errorf("a refused spawn_child created loop %s", l.ID)
		}
	}

	text, isErr = call(s, "report_progress", map[string]any{"text": "halfway there", "percent": 50})
	if isErr {
		t.Errorf("report_progress: %q", text)
	}
	if p := show(t, r, string(a.ID)).Progress; p == nil || p.Text != "halfway there" || p.Percent != 50 {
		t.Errorf("loop A's progress %+v, want halfway there at 50%%", p)
	}
	if text, isErr = call(s, "get_task", nil); isErr || !strings.Contains(text, "Tree A") {
		t.Errorf("get_task: %q (error %v), want loop A's title", text, isErr)
	}
	if text, isErr = call(s, "list_siblings", nil); isErr || !strings.Contains(text, "no siblings") {
		t.Errorf("list_siblings of a root: %q (error %v), want none", text, isErr)
	}

	// B's id with A's token: refused as a forged token.
	forged := append([]string{}, envA...)
	for i, kv := range forged {
		if strings.HasPrefix(kv, "LOOPR_LOOP_ID=") {
			forged[i] = "LOOPR_LOOP_ID=" + string(b.ID)
		}
	}
	fs := mcpSession(t, r, forged)
	if text, isErr = callTool(t, fs, "report_progress", map[string]any{"text": "hijacked"}); !isErr || !strings.Contains(text, "token: not loop "+string(b.ID)) {
		t.Errorf("B's id with A's token: %q (error %v), want the token refused", text, isErr)
	}
	if p := show(t, r, string(b.ID)).Progress; p != nil {
		t.Errorf("a forged call set B's progress: %+v", p)
	}
	_ = envB

	const question = "Should the limiter count per user or per IP?"
	if text, isErr = call(s, "ask_human", map[string]any{"question": question}); isErr {
		t.Fatalf("ask_human: %q", text)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitEvery(t, 90*time.Second, slowPoll, "loop A to wait for a person", func() bool {
		return show(t, r, string(a.ID)).Status == loop.NeedsHuman
	})
	if got := show(t, r, string(a.ID)); got.Needs == nil || got.Needs.Reason != loop.NeedsQuestion || !strings.Contains(got.Needs.Detail, question) {
		t.Errorf("loop A needs %+v, want the question %q", got.Needs, question)
	}

	if cfg := ok(t, r.dir, "mcp", "--print-config"); !strings.Contains(cfg, `"command": "`+bin+`"`) || !strings.Contains(cfg, `"mcpServers"`) {
		t.Errorf("loopr mcp --print-config:\n%s\nwant the mcpServers snippet starting %s mcp", cfg, bin)
	}
	st := stopCleanly(t, r, d)
	var mine, refusedB int
	tools2 := map[string]bool{}
	for _, ev := range journal(t, st) {
		if ev.Kind != loop.EventMCP {
			continue
		}
		switch ev.Loop {
		case a.ID:
			mine++
			tool, _, _ := strings.Cut(strings.TrimPrefix(ev.Message, "mcp "), " ")
			tools2[tool] = true
		case b.ID:
			if strings.Contains(ev.Message, "refused: token") {
				refusedB++
			}
		}
		t.Logf("journal: %s %s", ev.Loop, ev.Message)
	}
	if mine != calls {
		t.Errorf("%d mcp events on loop A, want one per call (%d)", mine, calls)
	}
	for _, tool := range []string{"spawn_child", "report_progress", "get_task", "list_siblings", "ask_human"} {
		if !tools2[tool] {
			t.Errorf("no mcp event of %s on loop A", tool)
		}
	}
	if refusedB != 1 {
		t.Errorf("%d refused-token events on loop B, want 1", refusedB)
	}
}

// TestClaudeCodeMCPAskHuman: the real Claude Code CLI, started by the
// claude preset with loopr's MCP server (--mcp-config), is scripted by
// the fake API to call mcp__loopr__ask_human; the plan then waits for a
// person with that question, and `loopr answer` puts the answer in its
// next prompt.
func TestClaudeCodeMCPAskHuman(t *testing.T) {
	claude := claudePath(t)
	if inNetns(t) {
		return
	}
	logVersion(t, claude)
	const question = "Per user or per IP: which should the limiter count?"
	const answer = "Count per user."
	var asked atomic.Bool // the script called ask_human: it ends the run next
	// holds: a user message of r holds s (a resumed session's first
	// message is the first run's prompt).
	holds := func(r *fakeanthropic.Request, s string) bool {
		for _, m := range r.Messages {
			if m.Role == "user" && strings.Contains(m.Text(), s) {
				return true
			}
		}
		return false
	}
	c := startClaudeRig(t, claude, "ANTHROPIC_API_KEY=test-key", func(r *fakeanthropic.Request, typ string) (fakeanthropic.Reply, bool) {
		if typ != "plan" || !r.HasTool("Bash") || holds(r, answer) {
			return fakeanthropic.Reply{}, false
		}
		switch {
		case asked.Load():
		case r.HasTool("mcp__loopr__ask_human"):
			asked.Store(true)
			return fakeanthropic.Tool("mcp__loopr__ask_human", map[string]any{"question": question}, usagePerTurn), true
		case r.HasTool("ToolSearch") && r.Turn() == 0:
			// Claude Code defers MCP tools: a model loads one by name first.
			return fakeanthropic.Tool("ToolSearch", map[string]any{"query": "select:mcp__loopr__ask_human", "max_results": 1}, usagePerTurn), true
		default:
			var names []string
			for _, tool := range r.Tools {
				names = append(names, tool.Name)
			}
			t.Errorf("claude offers no mcp__loopr__ask_human at turn %d; its tools: %v", r.Turn(), names)
			return fakeanthropic.Text("no loopr tools", usagePerTurn), true
		}
		return fakeanthropic.Text("I asked; waiting for the answer.", usagePerTurn), true
	})
	var plan loop.Loop
	mustJSON(t, ok(t, c.repo.dir, "plan", "Add a rate limiter", "--json"), &plan)
	var got loop.Loop
	waitEvery(t, 3*time.Minute, slowPoll, "the plan to wait for a person", func() bool {
		if c.d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(c.d.output(), 40))
		}
		got = show(t, c.repo, string(plan.ID))
		return got.Status == loop.NeedsHuman || got.Status == loop.Failed || got.Status == loop.Complete
	})
	if got.Status != loop.NeedsHuman || got.Needs == nil || got.Needs.Reason != loop.NeedsQuestion || !strings.Contains(got.Needs.Detail, question) {
		t.Fatalf("plan %s is %s, needs %+v; want needs_human with the question %q\nagent.log:\n%s", plan.ID, got.Status, got.Needs, question,
			tail(iterFile(c.repo, string(plan.ID), 1, "agent.log"), 10))
	}
	ok(t, c.repo.dir, "answer", string(plan.ID), answer)
	waitEvery(t, 3*time.Minute, slowPoll, "the plan's next prompt to hold the answer", func() bool {
		for _, r := range c.api.Requests() {
			if r.HasTool("Bash") && holds(r, answer) {
				return true
			}
		}
		return false
	})
	st := stopCleanly(t, c.repo, c.d)
	for _, ev := range journal(t, st) {
		if ev.Kind == loop.EventMCP && ev.Loop == plan.ID && strings.HasPrefix(ev.Message, "mcp ask_human") {
			t.Logf("journal: %s", ev.Message)
			return
		}
	}
	t.Error("no mcp ask_human event in the plan's journal")
}

// TestMCPFromSandbox: an agent in bubblewrap (network none: loopr's home,
// the main socket with it, hidden) starts `loopr mcp` itself and calls
// report_progress through it: the MCP socket and the binary are bound in.
func TestMCPFromSandbox(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	rpc := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"report_progress","arguments":{"text":"from the sandbox","percent":10}}}`,
	}, "\n")
	script := fmt.Sprintf(`{ printf '%%s\n' '%s'; sleep 5; } | %s mcp > "$(dirname "$LOOPR_ARTIFACT")/mcp.out" 2>&1; sleep 600`, rpc, bin)
	r := newRepo(t, fastRetries+fmt.Sprintf(`agent:
  preset: command
  command: ["sh", "-c", %q]
  timeout_secs: 600
  sandbox: {runner: bwrap, network: none}
loops:
  plan: {require_approval: false, max_iterations: 1}
storage:
  disk_quota_min_gb: 0
`, script))
	d := startDaemon(t, r)
	_ = d
	var a loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Sandboxed", "--json"), &a)
	waitEvery(t, 90*time.Second, slowPoll, "the sandboxed agent's progress", func() bool {
		p := show(t, r, string(a.ID)).Progress
		return p != nil && p.Text == "from the sandbox" && p.Percent == 10
	})
}
