package daemon_test

import (
	"context"
	"github.com/go-json-experiment/json/v1"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestTokenShapesRedactedAtEverySink: a token an agent prints, in its
// output and in its question, and that a person put in the loop's title,
// is in no file of the home (the store, agent.log, the journal), no
// webhook body, not in notify.command's values, the daemon's log, the
// journal or the event stream; its mark is.
func TestTokenShapesRedactedAtEverySink(t *testing.T) {
	t.Parallel()
	token := "ghp_" + strings.Repeat("Q", 36)
	aws := "AKIA" + strings.Repeat("7", 16)
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	paths := newPaths(t)
	notified := filepath.Join(paths.Workspace, "notified")
	cfg := testConfig("sh", "-c", `echo "pushing with `+token+` and `+aws+`"; echo "may I use `+token+`?" > "$LOOPR_QUESTION_FILE"`)
	cfg.Webhooks = []config.Webhook{{URL: srv.URL, Events: []string{"created", "needs_human"}}}
	cfg.Notify.Command = []string{"sh", "-c", `printf '%s|%s' "$LOOPR_TITLE" "$LOOPR_REASON" > ` + notified}
	d := startDaemon(t, paths, cfg)
	ctx := context.Background()
	events, err := d.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: "deploy with " + token})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testslack.Scale(30 * time.Second))
	for {
		if l, err = d.c.Get(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		_, nerr := os.Stat(notified)
		if l.Status == loop.NeedsHuman && n >= 2 && nerr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop %s after 30s, %d webhook bodies, notify: %v; want needs_human, 2 and its file", l.Status, n, nerr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var seen strings.Builder
	seen.WriteString("loop record: ")
	rec, _ := json.Marshal(l)
	seen.Write(rec)
	if l.Needs == nil || !strings.Contains(l.Needs.Detail, "may I use [redacted github_token]?") {
		t.Errorf("Needs = %+v, want the question with its mark", l.Needs)
	}
	seen.WriteString("\njournal: ")
	if err := d.c.Journal(ctx, "", 0, 0, func(e api.JournalEntry) error {
		b, _ := json.Marshal(e)
		seen.Write(b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	seen.WriteString("\nevents: ")
	for stop := time.After(testslack.Scale(2 * time.Second)); ; {
		select {
		case m := <-events:
			b, _ := json.Marshal(m)
			seen.Write(b)
			continue
		case <-stop:
		}
		break
	}
	mu.Lock()
	seen.WriteString("\nwebhooks: " + strings.Join(bodies, "\n"))
	mu.Unlock()
	b, _ := os.ReadFile(notified)
	seen.WriteString("\nnotify: " + string(b))
	if want := "deploy with [redacted github_token]|question: may I use [redacted github_token]?"; string(b) != want {
		t.Errorf("notify.command got %q, want %q", b, want)
	}
	seen.WriteString("\ndaemon log: " + d.log.String())
	for _, leak := range []string{token, aws} {
		if strings.Contains(seen.String(), leak) {
			t.Errorf("%s leaked:\n%s", leak, seen.String())
		}
	}
	filepath.WalkDir(paths.Home, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, leak := range []string{token, aws} {
			if strings.Contains(string(b), leak) {
				t.Errorf("%s holds %s", path, leak)
			}
		}
		if filepath.Base(path) == "agent.log" && !strings.Contains(string(b), "pushing with [redacted github_token] and [redacted aws_access_key]") {
			t.Errorf("agent.log = %q, want the marks", b)
		}
		return nil
	})
}

// TestSecretsRedactedBeforeAnyAgent: the secret of a profile no loop has
// run on yet is redacted from the start (an agent of another profile may
// print the secret's file it finds in the workspace).
func TestSecretsRedactedBeforeAnyAgent(t *testing.T) {
	t.Parallel()
	paths := newPaths(t)
	value := "deploy-key-" + strings.Repeat("z", 24)
	file := filepath.Join(paths.Workspace, ".secrets", "deploy")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig("sh", "-c", "cat "+file)
	other := config.DefaultAgent()
	other.Preset, other.Command = "command", []string{"true"}
	other.Secrets = map[string]config.Secret{"DEPLOY_KEY": {File: file}}
	cfg.Agents = map[string]config.Agent{"deployer": other}
	d := startDaemon(t, paths, cfg)
	ctx := context.Background()
	l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: "ship it with " + value})
	if err != nil {
		t.Fatal(err)
	}
	if l, err = d.c.Get(ctx, l.ID); err != nil { // as stored
		t.Fatal(err)
	}
	if strings.Contains(l.Title, value) || !strings.Contains(l.Title, "[redacted DEPLOY_KEY]") {
		t.Errorf("title %q: want the deployer profile's secret redacted before any of its agents ran", l.Title)
	}
}
