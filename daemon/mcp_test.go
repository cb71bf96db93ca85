package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestMCPJournalBounded: every MCP call is journalled, the refused ones
// too, but a hostile agent that names a tool, a target or a type of a
// megabyte (on mcp.sock, without `loopr mcp`) must not write a megabyte
// into the journal per call: the entry names them, cut short.
func TestMCPJournalBounded(t *testing.T) {
	t.Parallel()
	td := startDaemon(t, newPaths(t), testConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := td.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Title: "target", RunnableAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("A", 300<<10)
	for _, req := range []api.MCPRequest{
		{Loop: l.ID, Token: "forged", Tool: huge},
		{Loop: l.ID, Token: "forged", Tool: api.ToolGetTask, Target: huge},
		{Loop: l.ID, Token: "forged", Tool: api.ToolSpawnChild, Type: huge},
	} {
		if _, err := td.c.MCP(ctx, req); err == nil {
			t.Fatalf("MCP call with a forged token: no error")
		}
	}
	var mcps []string
	err = td.c.Journal(ctx, l.ID, 0, 0, func(e api.JournalEntry) error {
		if e.Kind == loop.EventMCP {
			mcps = append(mcps, e.Message)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mcps) != 3 {
		t.Fatalf("journal holds %d mcp entries, want 3 (every call, refused too)", len(mcps))
	}
	for _, m := range mcps {
		if len(m) > 1024 || !strings.Contains(m, "refused") {
			t.Errorf("mcp journal entry of %d bytes (want at most 1 KiB, saying refused): %.200s…", len(m), m)
		}
	}
}
