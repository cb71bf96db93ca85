// Package trust decides whether this machine's user has trusted the
// commands a loopr.yml would run, as direnv's `direnv allow` and mise's
// `mise trust` do for their files.
//
// A loopr.yml is code: its agent argv, validate commands, hooks,
// notify.command and webhooks run (or send data) as the user. The daemon
// runs none of them until `loopr trust` has recorded the Fingerprint of
// the file's command-bearing values for the file's absolute path in the
// Store, $XDG_CONFIG_HOME/loopr/trusted. The fingerprint covers exactly the
// keys Keys lists; prompts, caps, priorities and the other keys are not in
// it: they steer loops but start no program of their own choosing.
//
// A configuration with no file (loopr's built-in defaults), or whose
// command-bearing values are all the built-in defaults, needs no trust:
// it runs nothing a repository chose. LOOPR_TRUST_ALL=1 trusts every file
// (for CI, where the repository is the one being tested).
package trust

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/preset"
)

// Keys lists the command-bearing keys of loopr.yml, the values the
// fingerprint covers (docs/security.md repeats it).
var Keys = []string{
	"agent and agents.<name>: preset, command, resume_args, attach_args, env, env_pass, secrets, sandbox",
	"loops.<type>.validate, loops.<type>.hooks, loops.<type>.validate_in: clean, loops.<type>.fanout_judge",
	"types.<name>.validate, types.<name>.hooks, types.<name>.validate_in: clean, types.<name>.fanout_judge",
	"hooks",
	"merge.validate",
	"notify.command",
	"webhooks[].url",
	"worktree.copy",
	"store (an etcd backend: endpoints, prefix, user, TLS files), api.listen and api.token_file",
}

// AllEnv is the variable that, set to 1, trusts every loopr.yml.
const AllEnv = "LOOPR_TRUST_ALL"

// version starts the encoded document: a change of what the fingerprint
// covers changes every fingerprint, so that old trust is asked again.
const version = "loopr-trust-1"

// profile is what a fingerprint covers of one agent profile.
type profile struct {
	Preset     string                   `json:"preset"`
	Command    []string                 `json:"command"`
	ResumeArgs []string                 `json:"resume_args"`
	AttachArgs []string                 `json:"attach_args"`
	Env        map[string]string        `json:"env"`
	EnvPass    []string                 `json:"env_pass"`
	Secrets    map[string]config.Secret `json:"secrets"`
	Sandbox    config.Sandbox           `json:"sandbox"`
}

// hook is what a fingerprint covers of one hook: its commands and what a
// failing one does (on_error warn would turn a check into advice).
type hook struct {
	Run     []string `json:"run"`
	OnError string   `json:"on_error"`
}

// typeCmds is what a fingerprint covers of one loop type.
type typeCmds struct {
	Validate []string        `json:"validate"`
	Hooks    map[string]hook `json:"hooks"`
	// ValidateIn is set only for clean, where validate runs as the daemon,
	// outside the agent's sandbox (so files trusted before it was covered
	// keep their fingerprint).
	ValidateIn string `json:"validate_in,omitempty"`
	// FanoutJudge is the best-of-N judge command (absent: none, so files
	// trusted before it was covered keep their fingerprint).
	FanoutJudge []string `json:"fanout_judge,omitempty"`
}

func typeCmdsOf(s config.LoopSettings) typeCmds {
	t := typeCmds{Validate: s.Validate, Hooks: hooksOf(s.Hooks), FanoutJudge: s.FanoutJudge}
	if s.ValidateIn == config.ValidateInClean {
		t.ValidateIn = s.ValidateIn
	}
	return t
}

// document is the canonical form the fingerprint hashes.
type document struct {
	Version       string              `json:"version"`
	Profiles      map[string]profile  `json:"profiles"`
	Loops         map[string]typeCmds `json:"loops"`
	Types         map[string]typeCmds `json:"types"`
	Hooks         map[string]hook     `json:"hooks"`
	MergeValidate []string            `json:"merge_validate"`
	Notify        []string            `json:"notify"`
	Webhooks      []string            `json:"webhooks"`
	WorktreeCopy  []string            `json:"worktree_copy"`
	// Store and API are set only when they differ from the defaults (the
	// bbolt file, no TCP listener), so that the fingerprints of files
	// without them are those recorded before they were covered.
	Store *storeDoc `json:"store,omitempty"`
	API   *apiDoc   `json:"api,omitempty"`
}

// storeDoc is what a fingerprint covers of an etcd store: where loopr
// keeps and reads its records, loops included (a loop put in that store
// by anyone runs here).
type storeDoc struct {
	Backend string           `json:"backend"`
	Etcd    config.StoreEtcd `json:"etcd"`
}

// apiDoc is what a fingerprint covers of api: a TCP listener that accepts
// loops and commands from the network with the token of token_file.
type apiDoc struct {
	Listen    string `json:"listen"`
	TokenFile string `json:"token_file"`
}

func hooksOf(hs map[string]config.Hook) map[string]hook {
	out := make(map[string]hook, len(hs))
	for name, h := range hs {
		if len(h.Run) > 0 {
			out[name] = hook{Run: h.Run, OnError: h.OnError}
		}
	}
	return out
}

func documentOf(c *config.Config) document {
	d := document{
		Version:  version,
		Profiles: map[string]profile{}, Loops: map[string]typeCmds{}, Types: map[string]typeCmds{},
		Hooks: hooksOf(c.Hooks), MergeValidate: c.Merge.Validate, Notify: c.Notify.Command, WorktreeCopy: c.Worktree.Copy,
	}
	for _, name := range c.Profiles() {
		a, _ := c.Profile(name)
		d.Profiles[name] = profile{Preset: a.Preset, Command: a.Command, ResumeArgs: a.ResumeArgs, AttachArgs: a.AttachArgs,
			Env: a.Env, EnvPass: a.EnvPass, Secrets: a.Secrets, Sandbox: sandboxOf(a.Sandbox)}
	}
	for t, s := range c.Loops {
		d.Loops[t] = typeCmdsOf(s)
	}
	for t, s := range c.UserTypes {
		d.Types[t] = typeCmdsOf(s.LoopSettings)
	}
	for _, w := range c.Webhooks {
		d.Webhooks = append(d.Webhooks, w.URL)
	}
	if c.Store.Backend != "" && c.Store.Backend != config.Default().Store.Backend {
		d.Store = &storeDoc{Backend: c.Store.Backend, Etcd: c.Store.Etcd}
	}
	if c.API.Listen != "" {
		d.API = &apiDoc{Listen: c.API.Listen, TokenFile: c.API.TokenFile}
	}
	return d
}

// sandboxOf is sb with its defaults written out: runner "" is none.
func sandboxOf(sb config.Sandbox) config.Sandbox {
	return config.Sandbox{Runner: sb.RunnerOrDefault(), Network: sb.NetworkOrDefault(), AllowHosts: sb.AllowHosts}
}

// Fingerprint is the sha256, in hex, of a canonical JSON encoding of c's
// command-bearing values (Keys): the same for the same values, whatever
// the file's key order, comments, quoting or layout. A nil and an empty
// list or map encode alike.
func Fingerprint(c *config.Config) string {
	b, err := json.Marshal(documentOf(c), json.Deterministic(true))
	if err != nil {
		panic(fmt.Sprintf("trust: encode the fingerprint document: %v", err)) // plain strings and maps: cannot fail
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// builtin is the fingerprint of loopr's own defaults.
var builtin = Fingerprint(config.Default())

// Builtin reports whether c's command-bearing values are loopr's built-in
// defaults: such a configuration runs nothing a file chose.
func Builtin(c *config.Config) bool { return Fingerprint(c) == builtin }

// Command is one line of what a configuration runs, for people: the key
// and the command (or value) in shell-like form.
type Command struct {
	Key   string // agent.command, loops.ralph.validate, hooks.before_run, …
	Value string
}

func (c Command) String() string { return c.Key + ": " + c.Value }

// Commands lists what c runs, in loopr.yml's order: each profile's
// command and its environment, secrets and sandbox, each type's validate
// commands and hooks, the top-level hooks, merge.validate, notify.command,
// the webhooks and worktree.copy. Every value the fingerprint covers is
// in one line, so two configurations with different fingerprints differ
// in at least one line.
func Commands(c *config.Config) []Command {
	var out []Command
	add := func(key, value string) { out = append(out, Command{Key: key, Value: value}) }
	for _, name := range c.Profiles() {
		a, _ := c.Profile(name)
		key := "agent"
		if name != config.DefaultProfile {
			key = "agents." + name
		}
		out = append(out, profileCommands(key, a)...)
	}
	for _, t := range c.Types() {
		key, s := "loops."+t, c.Loops[t]
		if u, ok := c.UserTypes[t]; ok {
			key, s = "types."+t, u.LoopSettings
		}
		for _, cmd := range s.Validate {
			add(key+".validate", cmd)
		}
		if s.ValidateIn == config.ValidateInClean {
			add(key+".validate_in", "clean (validate runs as the daemon, outside any sandbox)")
		}
		if len(s.FanoutJudge) > 0 {
			add(key+".fanout_judge", Argv(s.FanoutJudge))
		}
		out = append(out, hookCommands(key+".hooks", s.Hooks)...)
	}
	out = append(out, hookCommands("hooks", c.Hooks)...)
	for _, cmd := range c.Merge.Validate {
		add("merge.validate", cmd)
	}
	if len(c.Notify.Command) > 0 {
		add("notify.command", Argv(c.Notify.Command))
	}
	for i, w := range c.Webhooks {
		add(fmt.Sprintf("webhooks[%d].url", i), w.URL)
	}
	if len(c.Worktree.Copy) > 0 {
		add("worktree.copy", strings.Join(c.Worktree.Copy, ", "))
	}
	if d := documentOf(c); d.Store != nil {
		add("store", storeLine(d.Store))
	}
	if c.API.Listen != "" {
		add("api.listen", c.API.Listen+" (token from "+c.API.TokenFile+")")
	}
	return out
}

// storeLine describes a non-default store, never its password (a changed
// password still changes the fingerprint, and the line says one is set).
func storeLine(s *storeDoc) string {
	if s.Backend != "etcd" {
		return s.Backend
	}
	e := s.Etcd
	v := "etcd " + strings.Join(e.Endpoints, " ")
	if e.Prefix != "" {
		v += ", prefix " + e.Prefix
	}
	if e.Username != "" {
		v += ", user " + e.Username
	}
	if e.Password != "" {
		v += fmt.Sprintf(", a password (sha256 %.8s…)", sha(e.Password))
	}
	for _, f := range [][2]string{{"ca_file", e.CAFile}, {"cert_file", e.CertFile}, {"key_file", e.KeyFile}} {
		if f[1] != "" {
			v += ", " + f[0] + " " + f[1]
		}
	}
	return v
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// profileCommands lists one profile: its argv (and the preset it comes
// from), resume and attach args, env, env_pass, secrets (where each is
// read, never a value) and sandbox.
func profileCommands(key string, a config.Agent) []Command {
	var out []Command
	add := func(k, v string) { out = append(out, Command{Key: key + k, Value: v}) }
	argv := Argv(a.Argv())
	if len(a.Command) == 0 {
		argv += "  (preset " + a.Preset + ")"
	} else if _, ok := preset.Get(a.Preset); ok {
		argv += "  (output read as preset " + a.Preset + ")"
	}
	add("", argv)
	if len(a.ResumeArgs) > 0 {
		add(".resume_args", Argv(a.ResumeArgs))
	}
	if len(a.AttachArgs) > 0 {
		add(".attach_args", Argv(a.AttachArgs))
	}
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		add(".env."+k, a.Env[k])
	}
	if len(a.EnvPass) > 0 {
		add(".env_pass", strings.Join(a.EnvPass, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(a.Secrets)) {
		s := a.Secrets[k]
		if s.File != "" {
			add(".secrets."+k, "from file "+s.File)
		} else {
			add(".secrets."+k, "from $"+s.Env)
		}
	}
	if sb := sandboxOf(a.Sandbox); sb.Runner != config.SandboxNone || sb.Network != config.NetworkHost || len(sb.AllowHosts) > 0 {
		v := "runner " + sb.Runner + ", network " + sb.Network
		if len(sb.AllowHosts) > 0 {
			v += ", allow_hosts " + strings.Join(sb.AllowHosts, " ")
		}
		add(".sandbox", v)
	}
	return out
}

// hookCommands lists the commands of a hooks map, hooks by name; a hook
// whose failure does not stop its step says so.
func hookCommands(key string, hs map[string]config.Hook) []Command {
	var out []Command
	for _, name := range slices.Sorted(maps.Keys(hs)) {
		h := hs[name]
		k := key + "." + name
		if h.OnError != "" && h.OnError != config.OnErrorBlock {
			k += " (on_error " + h.OnError + ")"
		}
		for _, cmd := range h.Run {
			out = append(out, Command{Key: k, Value: cmd})
		}
	}
	return out
}

// Argv formats an argv for people, as a shell would read it back: words
// with spaces, quotes or shell characters are single-quoted.
func Argv(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = quote(w)
	}
	return strings.Join(words, " ")
}

func quote(w string) string {
	if w != "" && !strings.ContainsFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%{}", r))
	}) {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// Changed lists the lines of what next runs that differ from what prev
// runs: new or changed lines as they are in next, then the lines next no
// longer has, marked "(removed)".
func Changed(prev, next *config.Config) []Command {
	was, now := Commands(prev), Commands(next)
	var out []Command
	for _, c := range now {
		if !slices.Contains(was, c) {
			out = append(out, c)
		}
	}
	for _, c := range was {
		if !slices.Contains(now, c) {
			out = append(out, Command{Key: c.Key, Value: c.Value + "  (removed)"})
		}
	}
	return out
}
