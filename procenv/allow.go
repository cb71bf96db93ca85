package procenv

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/preset"
)

// Base lists the variables of the daemon's environment every process loopr
// starts for a loop gets; a trailing * matches a prefix. They name where
// things are and how to talk to the user, never a credential: the search
// path, the home and user, the locale, the terminal, the temporary
// directory, the time zone, the shell, the XDG directories (where CLIs keep
// their settings), the CA bundles a TLS-intercepting network needs (paths,
// not keys), and LOOPR_* (loopr's own).
//
// Proxies (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) are not among
// them: a proxy URL often carries a user and password. A profile that needs
// them names them in env_pass. Nor are SSH_AUTH_SOCK (it signs as the user:
// pushes, commits), cloud credentials, package registry tokens or
// GOPROXY/GOFLAGS/GOPRIVATE (a GOPROXY URL may carry a token).
var Base = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"LANG", "LANGUAGE", "LC_*", "TERM", "TMPDIR", "TZ",
	"XDG_*",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
	"LOOPR_*",
}

// Never lists the variables no process loopr starts for a loop gets, even
// when Base or env_pass matches them: LOOPR_TRUST_ALL would let whatever the
// agent starts (a loopr of its own) run an untrusted loopr.yml.
var Never = []string{"LOOPR_TRUST_ALL"}

// Match reports whether the variable name matches one of patterns: a name,
// or a prefix followed by *.
func Match(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}

// Allowed returns the entries of environ (KEY=value) whose name Base or one
// of pass matches, in their order. environ is not modified.
func Allowed(environ []string, pass ...[]string) []string {
	out := make([]string, 0, len(Base)+8)
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || slices.Contains(Never, name) {
			continue
		}
		if Match(name, Base) || slices.ContainsFunc(pass, func(p []string) bool { return Match(name, p) }) {
			out = append(out, kv)
		}
	}
	return out
}

// Set returns env with each of kvs (KEY=value) set: an entry of env, or an
// earlier one of kvs, with the same name is dropped, so each variable
// appears once and the last value wins. env is not modified.
func Set(env []string, kvs ...string) []string {
	last := make(map[string]int, len(kvs))
	for i, kv := range kvs {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	out := make([]string, 0, len(env)+len(kvs))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := last[name]; !set {
			out = append(out, kv)
		}
	}
	for i, kv := range kvs {
		name, _, _ := strings.Cut(kv, "=")
		if last[name] == i {
			out = append(out, kv)
		}
	}
	return out
}

// Profile is what an agent profile of loopr.yml says about the environment
// of its loops' processes.
type Profile struct {
	Key        string   // the profile's key in loopr.yml, for errors: "agent" or "agents.NAME"
	PresetPass []string // the preset's own variables (preset.EnvPass): the agent only
	Pass       []string // env_pass: the agent, its validate commands and hooks
	PresetEnv  []string // the preset's KEY=value (preset.Env): the agent only
	Env        []string // env:, KEY=value in name order: the agent, its validate commands and hooks
	Secrets    []Secret // secrets:, in name order: the agent only
}

// Of returns the Profile of agent profile a, called name (config.Profile);
// a relative secret file is resolved in workspace.
func Of(a config.Agent, name, workspace string) Profile {
	key := "agent"
	if name != "" && name != config.DefaultProfile {
		key = "agents." + name
	}
	pr, _ := preset.Get(a.Preset)
	p := Profile{Key: key, PresetPass: pr.EnvPass, Pass: slices.Clone(a.EnvPass), PresetEnv: a.PresetEnv()}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		p.Env = append(p.Env, k+"="+a.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(a.Secrets)) {
		s := a.Secrets[k]
		file := s.File
		if file != "" && !filepath.IsAbs(file) {
			file = filepath.Join(workspace, file)
		}
		p.Secrets = append(p.Secrets, Secret{Name: k, File: file, Env: s.Env})
	}
	return p
}

// Agent returns the environment of an agent of the profile, before the
// LOOPR_* the runner sets: from environ (the daemon's) what Base, the
// preset's and env_pass allow, then the preset's values, env: and the
// secrets' values (ReadSecrets).
func (p Profile) Agent(environ []string, secrets []Value) []string {
	set := slices.Concat(p.PresetEnv, p.Env)
	for _, s := range secrets {
		set = append(set, s.Name+"="+s.Value)
	}
	return Set(Allowed(environ, p.PresetPass, p.Pass), set...)
}

// Commands returns the environment of the validate commands and hooks of
// the profile's loops: from environ what Base and env_pass allow, then
// env:. Neither the preset's variables (the agent CLI's API key) nor the
// secrets: these commands run what the agent wrote (its tests, its build),
// outside any sandbox the agent has, so a secret there would reach code the
// agent controls without the agent's limits; a command that needs one
// gets it through env_pass, a choice written in loopr.yml.
func (p Profile) Commands(environ []string) []string {
	return Set(Allowed(environ, p.Pass), p.Env...)
}

// Proxies are the proxy variables: often needed to reach a provider at
// all, yet not in Base (a proxy URL may carry a password).
var Proxies = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"}

// Withheld returns the names among Proxies that environ sets and the
// profile's agent does not get: an agent behind a proxy that cannot reach
// its API is the likeliest surprise of the allowlist, worth a warning.
func (p Profile) Withheld(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if Match(name, Proxies) && !Match(name, p.PresetPass) && !Match(name, p.Pass) && !slices.ContainsFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, name+"=") }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
