package trust_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/trust"
)

func parse(t *testing.T, yml string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(yml), "/work/repo/loopr.yml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, yml)
	}
	return c
}

const base = `agent:
  command: [my-agent, --fast]
  env: {A: "1", B: "2"}
loops:
  ralph:
    validate: ["go test ./...", "make lint"]
hooks:
  before_run: {run: ["echo hi"]}
notify:
  command: [notify-send, loopr]
`

// TestFingerprintStable: the same values in another key order, layout,
// quoting and with comments give the same fingerprint.
func TestFingerprintStable(t *testing.T) {
	t.Parallel()
	other := `# the same, written otherwise
notify: {command: ["notify-send", "loopr"]}
hooks:
  before_run:
    run:
      - echo hi
loops:
  ralph: {validate: ['go test ./...', "make lint"]}
agent:
  env:
    B: "2"
    A: "1"
  command:
    - my-agent
    - "--fast"
`
	a, b := trust.Fingerprint(parse(t, base)), trust.Fingerprint(parse(t, other))
	if a != b {
		t.Errorf("Fingerprint differs for the same values:\n%s\n%s", a, b)
	}
	if len(a) != 64 {
		t.Errorf("Fingerprint = %q, want 64 hex digits", a)
	}
}

// TestFingerprintKeys: every command-bearing key changes the fingerprint
// (and the listing); a key that runs nothing does not.
func TestFingerprintKeys(t *testing.T) {
	t.Parallel()
	orig := parse(t, base)
	want := trust.Fingerprint(orig)
	tests := []struct {
		name   string
		edit   func(c *config.Config)
		change bool
	}{
		{"agent preset", func(c *config.Config) { c.Agent.Preset = "codex" }, true},
		{"agent command", func(c *config.Config) { c.Agent.Command = []string{"other"} }, true},
		{"agent command split", func(c *config.Config) { c.Agent.Command = []string{"my-agent --fast"} }, true},
		{"agent resume_args", func(c *config.Config) { c.Agent.ResumeArgs = []string{"--resume", "{session}"} }, true},
		{"agent attach_args", func(c *config.Config) { c.Agent.AttachArgs = []string{"sh"} }, true},
		{"agent env", func(c *config.Config) { c.Agent.Env = map[string]string{"A": "3", "B": "2"} }, true},
		{"agent env_pass", func(c *config.Config) { c.Agent.EnvPass = []string{"AWS_*"} }, true},
		{"agent secrets", func(c *config.Config) { c.Agent.Secrets = map[string]config.Secret{"TOKEN": {Env: "GH"}} }, true},
		{"agent sandbox", func(c *config.Config) { c.Agent.Sandbox = config.Sandbox{Runner: "bwrap", Network: "none"} }, true},
		{"allow_hosts", func(c *config.Config) {
			c.Agent.Sandbox = config.Sandbox{Runner: "bwrap", Network: "allow", AllowHosts: []string{"a:1"}}
		}, true},
		{"profile", func(c *config.Config) { c.Agents = map[string]config.Agent{"fast": config.DefaultAgent()} }, true},
		{"loops validate", func(c *config.Config) { setValidate(c, "ralph", "true") }, true},
		{"loops validate dropped", func(c *config.Config) { setValidate(c, "ralph", "go test ./...") }, true},
		{"loops hooks", func(c *config.Config) { setHooks(c, "spec", "date") }, true},
		{"types validate", func(c *config.Config) {
			c.UserTypes = map[string]config.TypeSettings{"docs": {LoopSettings: config.LoopSettings{Validate: []string{"vale ."}}}}
		}, true},
		{"types hooks", func(c *config.Config) {
			c.UserTypes = map[string]config.TypeSettings{"docs": {LoopSettings: config.LoopSettings{Hooks: map[string]config.Hook{"before_run": {Run: []string{"x"}}}}}}
		}, true},
		{"hooks", func(c *config.Config) { c.Hooks["after_merge"] = config.Hook{Run: []string{"date"}, OnError: "block"} }, true},
		{"hook on_error", func(c *config.Config) { c.Hooks["before_run"] = config.Hook{Run: []string{"echo hi"}, OnError: "warn"} }, true},
		{"merge validate", func(c *config.Config) { c.Merge.Validate = []string{"make"} }, true},
		{"notify", func(c *config.Config) { c.Notify.Command = []string{"notify-send", "other"} }, true},
		{"webhook", func(c *config.Config) { c.Webhooks = []config.Webhook{{URL: "http://127.0.0.1:1/x"}} }, true},
		{"worktree copy", func(c *config.Config) { c.Worktree.Copy = []string{".env"} }, true},
		{"store etcd", func(c *config.Config) {
			c.Store = config.Store{Backend: "etcd", Etcd: config.StoreEtcd{Endpoints: []string{"http://evil:2379"}}}
		}, true},
		{"etcd password", func(c *config.Config) {
			c.Store = config.Store{Backend: "etcd", Etcd: config.StoreEtcd{Endpoints: []string{"http://a:2379"}, Password: "pw"}}
			c.Store.Etcd.Password = "other"
		}, true},
		{"api listen", func(c *config.Config) { c.API = config.API{Listen: "0.0.0.0:7070", TokenFile: "tok"} }, true},
		{"store bbolt spelled out", func(c *config.Config) { c.Store.Backend = "bbolt" }, false},
		{"max_loops", func(c *config.Config) { c.Concurrency.MaxLoops = 3 }, false},
		{"prompt", func(c *config.Config) { l := c.Loops["ralph"]; l.Prompt = "p.md"; c.Loops["ralph"] = l }, false},
		{"timeout", func(c *config.Config) { c.Agent.TimeoutSecs = 60 }, false},
		{"priority", func(c *config.Config) { c.Scheduler.Priority.Ralph = 7 }, false},
		{"validate_in clean", func(c *config.Config) { l := c.Loops["ralph"]; l.ValidateIn = "clean"; c.Loops["ralph"] = l }, true},
		{"validate_in worktree", func(c *config.Config) { l := c.Loops["ralph"]; l.ValidateIn = "worktree"; c.Loops["ralph"] = l }, false},
		{"hook timeout", func(c *config.Config) {
			c.Hooks["before_run"] = config.Hook{Run: []string{"echo hi"}, OnError: "block", TimeoutSecs: 9}
		}, false},
		{"webhook events", func(c *config.Config) { c.Webhooks = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := parse(t, base)
			tt.edit(c)
			got := trust.Fingerprint(c)
			if (got != want) != tt.change {
				t.Errorf("%s: fingerprint changed = %v, want %v", tt.name, got != want, tt.change)
			}
			if changed := trust.Changed(orig, c); (len(changed) > 0) != tt.change {
				t.Errorf("%s: Changed = %v, want changes: %v", tt.name, changed, tt.change)
			}
		})
	}
}

func setValidate(c *config.Config, typ string, cmds ...string) {
	l := c.Loops[typ]
	l.Validate = cmds
	c.Loops[typ] = l
}

func setHooks(c *config.Config, typ string, cmds ...string) {
	l := c.Loops[typ]
	l.Hooks = map[string]config.Hook{"after_run": {Run: cmds, OnError: config.OnErrorBlock}}
	c.Loops[typ] = l
}

// writeBase writes base as dir/loopr.yml and loads it.
func writeBase(t *testing.T, dir string) (string, *config.Config) {
	t.Helper()
	file := filepath.Join(dir, "loopr.yml")
	if err := os.WriteFile(file, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return file, c
}

// TestCheck: no file, or a file whose commands are loopr's defaults,
// needs no trust; LOOPR_TRUST_ALL=1 trusts anything; else the store decides.
func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := trust.Store{Path: filepath.Join(dir, "cfg", "loopr", "trusted")}
	none := func(string) string { return "" }
	file, c := writeBase(t, dir)
	plain, err := config.Parse([]byte("concurrency: {max_loops: 3}\n"), file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		c      *config.Config
		getenv func(string) string
		want   bool
	}{
		{"defaults", config.Default(), none, true},
		{"built-in commands", plain, none, true},
		{"untrusted", c, none, false},
		{"trust all", c, func(k string) string { return map[string]string{trust.AllEnv: "1"}[k] }, true},
		{"trust all not 1", c, func(k string) string { return map[string]string{trust.AllEnv: "yes"}[k] }, false},
	} {
		s, err := st.Check(tc.c, tc.getenv)
		if err != nil || s.Trusted != tc.want {
			t.Errorf("%s: Check = %+v, %v; want trusted %v", tc.name, s, err, tc.want)
		}
	}
	if err := st.Add(trust.Fingerprint(c), file); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if s, err := st.Check(c, none); err != nil || !s.Trusted {
		t.Fatalf("after Add: Check = %+v, %v; want trusted", s, err)
	}
	for path, want := range map[string]os.FileMode{st.Path: 0o600, filepath.Dir(st.Path): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	// Other commands at the same path: not trusted, and it says why.
	c2 := parse(t, base)
	c2.File = file
	setValidate(c2, "ralph", "true")
	if s, err := st.Check(c2, none); err != nil || s.Trusted || !strings.Contains(s.Why, "changed") {
		t.Errorf("changed commands: Check = %+v, %v; want untrusted, changed", s, err)
	}
	// Trusting the new ones replaces the old line: one line per file.
	if err := st.Add(trust.Fingerprint(c2), file); err != nil {
		t.Fatal(err)
	}
	if s, _ := st.Check(c, none); s.Trusted {
		t.Errorf("the old commands are still trusted after the new ones were")
	}
	data, _ := os.ReadFile(st.Path)
	if n := strings.Count(string(data), file); n != 1 {
		t.Errorf("trust file names %s %d times, want 1:\n%s", file, n, data)
	}
}

// TestDamagedStore: a trust file with a line that is not "<sha256> <path>"
// is an error naming the file and line; nothing panics and nothing is
// trusted.
func TestDamagedStore(t *testing.T) {
	t.Parallel()
	file, c := writeBase(t, t.TempDir())
	good := trust.Fingerprint(c) + " " + file + "\n"
	for name, data := range map[string]string{
		"garbage":   "\x00\xff not a line\n" + good,
		"short sum": "abc " + file + "\n",
		"relative":  trust.Fingerprint(c) + " loopr.yml\n",
		"no path":   trust.Fingerprint(c) + "\n",
		"upper hex": strings.ToUpper(trust.Fingerprint(c)) + " " + file + "\n",
	} {
		st := trust.Store{Path: filepath.Join(t.TempDir(), "trusted")}
		if err := os.WriteFile(st.Path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := st.Check(c, func(string) string { return "" })
		if err == nil || s.Trusted || !strings.Contains(err.Error(), st.Path+":1") {
			t.Errorf("%s: Check = %+v, %v; want an error naming %s:1", name, s, err, st.Path)
		}
		if err := st.Add(trust.Fingerprint(c), file); err == nil {
			t.Errorf("%s: Add over a damaged file succeeded; want its error", name)
		}
	}
	// A directory where the file should be: an error, not a panic.
	st := trust.Store{Path: t.TempDir()}
	if _, err := st.Check(c, func(string) string { return "" }); err == nil {
		t.Errorf("Check with a directory as the trust file: no error")
	}
	// Comments and blank lines are fine.
	st = trust.Store{Path: filepath.Join(t.TempDir(), "trusted")}
	if err := os.WriteFile(st.Path, []byte("# mine\n\n"+good), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := st.Check(c, func(string) string { return "" }); err != nil || !s.Trusted {
		t.Errorf("Check with comments = %+v, %v; want trusted", s, err)
	}
}

// TestDefaultPath: XDG_CONFIG_HOME when absolute, else ~/.config.
func TestDefaultPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ xdg, home, want string }{
		{"/x/cfg", "/h", "/x/cfg/loopr/trusted"},
		{"", "/h", "/h/.config/loopr/trusted"},
		{"relative", "/h", "/h/.config/loopr/trusted"},
	} {
		env := map[string]string{"XDG_CONFIG_HOME": tc.xdg, "HOME": tc.home}
		got, err := trust.DefaultPath(func(k string) string { return env[k] })
		if err != nil || got != tc.want {
			t.Errorf("DefaultPath(%q, %q) = %q, %v; want %q", tc.xdg, tc.home, got, err, tc.want)
		}
	}
}

// TestCommands: the listing people are asked about.
func TestCommands(t *testing.T) {
	t.Parallel()
	c := parse(t, base+"webhooks: [{url: 'http://127.0.0.1:9/hook', events: [failed]}]\nagents: {gem: {preset: gemini, secrets: {K: {file: k.txt}}}}\n")
	var lines []string
	for _, cmd := range trust.Commands(c) {
		lines = append(lines, cmd.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"agent: my-agent --fast",
		"agent.env.A: 1",
		"agents.gem: gemini --output-format stream-json --yolo  (preset gemini)",
		"agents.gem.secrets.K: from file k.txt",
		"loops.ralph.validate: go test ./...",
		"loops.ralph.validate: make lint",
		"hooks.before_run: echo hi",
		"notify.command: notify-send loopr",
		"webhooks[0].url: http://127.0.0.1:9/hook",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Commands lack %q:\n%s", want, got)
		}
	}
	if a := trust.Argv([]string{"sh", "-c", "echo 'hi' > x"}); a != `sh -c 'echo '\''hi'\'' > x'` {
		t.Errorf("Argv = %s", a)
	}
}

// FuzzStore: whatever the trust file holds, Check and Add return (an
// error naming the file, or a verdict) and never panic.
func FuzzStore(f *testing.F) {
	f.Add([]byte("# c\n" + strings.Repeat("a", 64) + " /x/loopr.yml\n"))
	f.Add([]byte("\x00\xff\n \n"))
	f.Add([]byte(strings.Repeat("0", 64) + "  /tmp/ sp ace/loopr.yml\r\n"))
	c := config.Default()
	c.File = "/x/loopr.yml"
	c.Agent.Command = []string{"x"}
	f.Fuzz(func(t *testing.T, data []byte) {
		st := trust.Store{Path: filepath.Join(t.TempDir(), "trusted")}
		if err := os.WriteFile(st.Path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Check(c, func(string) string { return "" }); err != nil && !strings.Contains(err.Error(), st.Path) {
			t.Errorf("Check error %q does not name the file", err)
		}
		if err := st.Add(trust.Fingerprint(c), c.File); err != nil && !strings.Contains(err.Error(), st.Path) {
			t.Errorf("Add error %q does not name the file", err)
		}
	})
}

// TestStoreAndListenNotBuiltin: a file that only points the store at an
// etcd cluster, or only opens a TCP listener, is not "built-in commands":
// loops put in that store, or sent to that port, would run here. The
// listing never shows the etcd password.
func TestStoreAndListenNotBuiltin(t *testing.T) {
	t.Parallel()
	for _, yml := range []string{
		"store: {backend: etcd, etcd: {endpoints: [\"http://10.9.9.9:2379\"], username: u, password: hunter2hunter2}}\n",
		"api: {listen: \"0.0.0.0:7070\", token_file: tok}\n",
	} {
		c := parse(t, yml)
		if trust.Builtin(c) {
			t.Errorf("%s: counted as the built-in commands, want it to need trust", yml)
		}
		if len(trust.Commands(c)) == 0 {
			t.Errorf("%s: no line lists it", yml)
		}
		for _, cmd := range trust.Commands(c) {
			if strings.Contains(cmd.Value, "hunter2") {
				t.Errorf("the listing shows the etcd password: %s", cmd)
			}
		}
	}
}

// TestSymlinkBorrowsNoTrust: a repository whose loopr.yml is a symbolic
// link to a file trusted elsewhere (../theirs/loopr.yml) is not trusted:
// the trusted commands would run on this repository's Makefile and tests.
// A workspace reached through a linked directory keeps its trust.
func TestSymlinkBorrowsNoTrust(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	trusted, evil := filepath.Join(root, "trusted"), filepath.Join(root, "evil")
	for _, d := range []string{trusted, evil} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file, c := writeBase(t, trusted)
	store := trust.Store{Path: filepath.Join(root, "cfg", "trusted")}
	if err := store.Add(trust.Fingerprint(c), file); err != nil {
		t.Fatal(err)
	}
	none := func(string) string { return "" }
	link := filepath.Join(evil, "loopr.yml")
	if err := os.Symlink("../trusted/loopr.yml", link); err != nil {
		t.Fatal(err)
	}
	borrowed, err := config.Load(link)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := store.Check(borrowed, none); err != nil || st.Trusted {
		t.Errorf("a loopr.yml linked to a trusted file elsewhere: %+v, %v; want it not trusted", st, err)
	}
	viaDir := filepath.Join(root, "alias")
	if err := os.Symlink(trusted, viaDir); err != nil {
		t.Fatal(err)
	}
	same, err := config.Load(filepath.Join(viaDir, "loopr.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := store.Check(same, none); err != nil || !st.Trusted {
		t.Errorf("the trusted workspace through a linked directory: %+v, %v; want it trusted", st, err)
	}
}

// Concurrent Adds (two `loopr trust` at once) keep every line: without the
// lock, each read-modify-rename drops the lines another wrote meanwhile.
func TestConcurrentAddsKeepEveryLine(t *testing.T) {
	dir := t.TempDir()
	s := trust.Store{Path: filepath.Join(dir, "cfg", "trusted")}
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := filepath.Join(dir, fmt.Sprintf("repo%02d", i), "loopr.yml")
			errs <- s.Add(strings.Repeat(fmt.Sprintf("%x", i%16), 64), file)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(s.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "/loopr.yml\n"); got != n {
		t.Fatalf("%d lines after %d concurrent adds, want %d:\n%s", got, n, n, b)
	}
}
