package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPrepareHome(t *testing.T) {
	t.Parallel()
	real, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(real, ".claude", ".credentials.json"), "token-1")
	write(t, filepath.Join(real, ".claude", "settings.json"), "{}")
	write(t, filepath.Join(real, ".claude.json"), "{\"a\":1}")
	write(t, filepath.Join(real, ".ssh", "id_ed25519"), "private key")
	write(t, filepath.Join(real, ".claude", "projects", "big.jsonl"), strings.Repeat("x", maxHomeFile+1))
	write(t, filepath.Join(real, ".claude", "projects", "-other-project", "s.jsonl"), "other project's transcript")
	write(t, filepath.Join(real, ".claude", "history.jsonl"), "every prompt typed")
	write(t, filepath.Join(state, ExtraHomeDir, ".gitconfig"), "[user]\n")
	p := Policy{Sandbox: config.Sandbox{Runner: "bwrap"}, Preset: "claude", State: state}

	home, err := p.PrepareHome("r1", real)
	if err != nil {
		t.Fatal(err)
	}
	if home != filepath.Join(state, "loops", "r1", "home") {
		t.Errorf("home %s, want under the loop's directory", home)
	}
	for rel, want := range map[string]string{
		".claude/.credentials.json": "token-1", ".claude/settings.json": "{}", ".claude.json": "{\"a\":1}", ".gitconfig": "[user]\n",
	} {
		if got := read(t, filepath.Join(home, rel)); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	for _, rel := range []string{".ssh", ".claude/projects/big.jsonl", ".claude/projects", ".claude/history.jsonl"} {
		if _, err := os.Lstat(filepath.Join(home, rel)); err == nil {
			t.Errorf("%s was copied into the private home: want only the preset's files, none over %d bytes, none of its HomeSkip", rel, maxHomeFile)
		}
	}

	// The agent's own files stay, and so does a copy it changed; a
	// refreshed source file is copied again.
	write(t, filepath.Join(home, ".claude", "projects", "wt", "session.jsonl"), "mine")
	write(t, filepath.Join(home, ".claude.json"), "{\"a\":1,\"agent\":2}")
	later := time.Now().Add(time.Minute)
	write(t, filepath.Join(real, ".claude", ".credentials.json"), "token-2")
	if err := os.Chtimes(filepath.Join(real, ".claude", ".credentials.json"), later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PrepareHome("r1", real); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(home, ".claude", ".credentials.json")); got != "token-2" {
		t.Errorf("refreshed credentials = %q, want token-2", got)
	}
	if got := read(t, filepath.Join(home, ".claude.json")); got != "{\"a\":1,\"agent\":2}" {
		t.Errorf(".claude.json the agent changed = %q, want its change kept", got)
	}
	if got := read(t, filepath.Join(home, ".claude", "projects", "wt", "session.jsonl")); got != "mine" {
		t.Errorf("the agent's session file = %q, want it kept", got)
	}
}

// TestPrepareHomeLinks: the private home is the agent's to write, so what
// it leaves there — a link at the copy's temporary name, or a directory of
// the preset's replaced by a link — never makes the next copy write
// outside the private home.
func TestPrepareHomeLinks(t *testing.T) {
	t.Parallel()
	real, state, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(real, ".claude", "settings.json"), "{}")
	write(t, filepath.Join(real, ".config", "opencode", "opencode.json"), "{}")
	victim := filepath.Join(outside, "bashrc")
	write(t, victim, "mine\n")
	p := Policy{Sandbox: config.Sandbox{Runner: "bwrap"}, Preset: "claude", State: state}
	home, err := p.PrepareHome("r1", real)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's doing: the copy is gone, its temporary name links to
	// your file; .claude is a link to a directory of yours.
	os.Remove(filepath.Join(home, ".claude", "settings.json"))
	if err := os.Symlink(victim, filepath.Join(home, ".claude", "settings.json.loopr-copy")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PrepareHome("r1", real); err != nil {
		t.Fatal(err)
	}
	if got := read(t, victim); got != "mine\n" {
		t.Errorf("the file the planted link named = %q, want it untouched", got)
	}
	if err := os.RemoveAll(filepath.Join(home, ".claude")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, ".claude")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PrepareHome("r1", real); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(outside, "settings.json")); err == nil {
		t.Errorf("the copy went through the planted .claude link into %s", outside)
	}
	if got := read(t, filepath.Join(home, ".claude", "settings.json")); got != "{}" {
		t.Errorf("private .claude/settings.json = %q, want the copy", got)
	}
}
