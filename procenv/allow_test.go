package procenv

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/loopr-dev/loopr/config"
)

// daemonEnv is a daemon's environment with the credentials users export.
var daemonEnv = []string{
	"PATH=/usr/bin", "HOME=/home/u", "USER=u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TMPDIR=/tmp/u",
	"XDG_CONFIG_HOME=/home/u/.config", "SSL_CERT_FILE=/etc/ca.pem",
	"GITHUB_TOKEN=ghp_planted", "AWS_SECRET_ACCESS_KEY=aws-planted", "OPENAI_API_KEY=sk-planted",
	"ANTHROPIC_API_KEY=sk-ant-planted", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "NPM_TOKEN=npm-planted",
	"HTTPS_PROXY=http://u:p@proxy:3128", "SSH_AUTH_SOCK=/tmp/agent.sock", "GOPRIVATE=example.com/*",
	"BASH_ENV=/home/u/.rc", "LOOPRX=1", "=C:", "NOEQUALS",
}

func TestMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		variable string
		patterns []string
		want     bool
	}{
		{"exact", "PATH", []string{"PATH"}, true},
		{"exact is not a prefix", "PATHX", []string{"PATH"}, false},
		{"prefix", "ANTHROPIC_API_KEY", []string{"ANTHROPIC_*"}, true},
		{"prefix needs its underscore", "ANTHROPICX", []string{"ANTHROPIC_*"}, false},
		{"case matters", "path", []string{"PATH"}, false},
		{"no patterns", "PATH", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Match(tc.variable, tc.patterns); got != tc.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tc.variable, tc.patterns, got, tc.want)
			}
		})
	}
}

func TestAllowedKeepsTheBaseSetOnly(t *testing.T) {
	t.Parallel()
	want := []string{"PATH=/usr/bin", "HOME=/home/u", "USER=u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TMPDIR=/tmp/u",
		"XDG_CONFIG_HOME=/home/u/.config", "SSL_CERT_FILE=/etc/ca.pem"} // LOOPR_TRUST_ALL=1 withheld (Never)
	if diff := cmp.Diff(want, Allowed(daemonEnv)); diff != "" {
		t.Errorf("Allowed() mismatch (-want +got):\n%s", diff)
	}
	got := Allowed(daemonEnv, []string{"NPM_TOKEN"}, []string{"GO*", "LOOPR_TRUST_ALL"})
	if diff := cmp.Diff(append(want, "NPM_TOKEN=npm-planted", "GOPRIVATE=example.com/*"), got, cmpSorted); diff != "" {
		t.Errorf("Allowed() with pass mismatch (-want +got):\n%s", diff)
	}
}

var cmpSorted = cmp.Transformer("sort", func(in []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range in {
		m[s] = true
	}
	return m
})

func TestSet(t *testing.T) {
	t.Parallel()
	env := []string{"A=1", "B=2", "C=3"}
	got := Set(env, "B=20", "D=4", "D=40")
	if diff := cmp.Diff([]string{"A=1", "C=3", "B=20", "D=40"}, got); diff != "" {
		t.Errorf("Set() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"A=1", "B=2", "C=3"}, env); diff != "" {
		t.Errorf("Set() modified its input (-before +after):\n%s", diff)
	}
}

func TestProfileAgentAndCommands(t *testing.T) {
	t.Parallel()
	a := config.DefaultAgent() // the claude preset: ANTHROPIC_* passes, and its own CLAUDE_CODE_MAX_RETRIES=0
	a.EnvPass = []string{"NPM_TOKEN"}
	a.Env = map[string]string{"GOFLAGS": "-mod=mod", "PATH": "/opt/bin:/usr/bin"}
	a.Secrets = map[string]config.Secret{"GH_TOKEN": {File: ".secrets/gh"}, "B_KEY": {Env: "B_SRC"}}
	p := Of(a, config.DefaultProfile, "/w")
	if diff := cmp.Diff([]Secret{{Name: "B_KEY", Env: "B_SRC"}, {Name: "GH_TOKEN", File: "/w/.secrets/gh"}}, p.Secrets); diff != "" {
		t.Errorf("Of().Secrets mismatch (-want +got):\n%s", diff)
	}
	agent := p.Agent(daemonEnv, []Value{{"GH_TOKEN", "gh-secret-value"}})
	want := []string{"HOME=/home/u", "USER=u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TMPDIR=/tmp/u",
		"XDG_CONFIG_HOME=/home/u/.config", "SSL_CERT_FILE=/etc/ca.pem",
		"ANTHROPIC_API_KEY=sk-ant-planted", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "NPM_TOKEN=npm-planted",
		"CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1", "GOFLAGS=-mod=mod", "PATH=/opt/bin:/usr/bin", "GH_TOKEN=gh-secret-value"}
	if diff := cmp.Diff(want, agent); diff != "" {
		t.Errorf("Agent() mismatch (-want +got):\n%s", diff)
	}
	cmds := p.Commands(daemonEnv)
	want = []string{"HOME=/home/u", "USER=u", "LANG=C.UTF-8", "LC_ALL=C", "TERM=xterm", "TMPDIR=/tmp/u",
		"XDG_CONFIG_HOME=/home/u/.config", "SSL_CERT_FILE=/etc/ca.pem",
		"NPM_TOKEN=npm-planted", "GOFLAGS=-mod=mod", "PATH=/opt/bin:/usr/bin"}
	if diff := cmp.Diff(want, cmds); diff != "" {
		t.Errorf("Commands() mismatch (-want +got):\n%s", diff)
	}
	for _, planted := range []string{"ghp_planted", "aws-planted", "sk-planted", "proxy:3128", "agent.sock", "BASH_ENV", "LOOPRX", "LOOPR_TRUST_ALL"} {
		for _, env := range [][]string{agent, cmds} {
			if strings.Contains(strings.Join(env, "\n"), planted) {
				t.Errorf("%q passed:\n%s", planted, strings.Join(env, "\n"))
			}
		}
	}
}

func TestOfNamesTheProfilesKey(t *testing.T) {
	t.Parallel()
	a := config.DefaultAgent()
	a.Preset = "codex"
	a.Secrets = map[string]config.Secret{"K": {Env: "UNSET_FOR_TEST"}}
	p := Of(a, "cheap", "/w")
	if p.Key != "agents.cheap" || Of(a, "", "/w").Key != "agent" {
		t.Errorf("Of().Key = %q and %q, want agents.cheap and agent", p.Key, Of(a, "", "/w").Key)
	}
	_, err := p.ReadSecrets(func(string) (string, bool) { return "", false })
	if err == nil || !strings.HasPrefix(err.Error(), "agents.cheap.secrets.K: UNSET_FOR_TEST is not set") {
		t.Errorf("ReadSecrets() error = %v, want one naming agents.cheap.secrets.K", err)
	}
	if !Match("OPENAI_API_KEY", p.PresetPass) || Match("ANTHROPIC_API_KEY", p.PresetPass) {
		t.Errorf("codex's PresetPass = %q, want OPENAI_* and not ANTHROPIC_*", p.PresetPass)
	}
}

func TestReadSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SET": "from-env-value", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		secret  Secret
		want    string
		wantErr string
	}{
		{"file without its final newline", Secret{File: write("a", "token-1\n")}, "token-1", ""},
		{"file with CRLF", Secret{File: write("b", "token-2\r\n")}, "token-2", ""},
		{"only one newline goes", Secret{File: write("c", "line1\nline2\n\n")}, "line1\nline2\n", ""},
		{"env", Secret{Env: "SET"}, "from-env-value", ""},
		{"env unset", Secret{Env: "NOPE"}, "", "agent.secrets.S: NOPE is not set in the daemon's environment: export it"},
		{"env empty", Secret{Env: "EMPTY"}, "", "agent.secrets.S: EMPTY is empty"},
		{"missing file", Secret{File: filepath.Join(dir, "nope")}, "", "no such file or directory: write the secret's value into it"},
		{"empty file", Secret{File: write("e", "\n")}, "", "is empty"},
		{"FIFO", Secret{File: fifo}, "", "is a named pipe (FIFO), not a regular file"},
		{"directory", Secret{File: dir}, "", "is a directory"},
		{"device", Secret{File: "/dev/zero"}, "", "is a device"},
		{"huge file", Secret{File: write("h", strings.Repeat("x", MaxSecretBytes+1))}, "", "larger than 64 KiB"},
		{"NUL", Secret{File: write("n", "a\x00b")}, "", "NUL byte"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.secret.Name = "S"
			done := make(chan struct{})
			var got []Value
			var err error
			go func() {
				defer close(done)
				got, err = Profile{Secrets: []Secret{tc.secret}}.ReadSecrets(lookup)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("ReadSecrets() still blocked after a minute")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReadSecrets() error = %v, want one containing %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "agent.secrets.S: ") {
					t.Errorf("ReadSecrets() error = %v, want it to name agent.secrets.S", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadSecrets() error = %v", err)
			}
			if diff := cmp.Diff([]Value{{"S", tc.want}}, got); diff != "" {
				t.Errorf("ReadSecrets() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadSecretsNeverSaysTheValue: an error about a secret that was read
// (a NUL in it) does not quote it.
func TestReadSecretsNeverSaysTheValue(t *testing.T) {
	t.Parallel()
	_, err := Profile{Secrets: []Secret{{Name: "S", Env: "V"}}}.ReadSecrets(func(string) (string, bool) { return "hunter2-secret\x00", true })
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("ReadSecrets() error = %v, want an error without the value", err)
	}
}

func TestWithheld(t *testing.T) {
	t.Parallel()
	env := append(daemonEnv, "no_proxy=localhost")
	if got := (Profile{}).Withheld(env); !cmp.Equal(got, []string{"HTTPS_PROXY", "no_proxy"}) {
		t.Errorf("Withheld() = %q, want HTTPS_PROXY and no_proxy", got)
	}
	p := Profile{Pass: []string{"HTTPS_PROXY"}, Env: []string{"no_proxy=127.0.0.1"}}
	if got := p.Withheld(env); len(got) != 0 {
		t.Errorf("Withheld() with env_pass and env: = %q, want none", got)
	}
}
