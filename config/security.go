package config

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/loopr-dev/loopr/preset"
)

// Secret is one entry of a profile's `secrets:`: where the daemon reads the
// value, at each start of an agent. Exactly one of File and Env is set.
type Secret struct {
	File string `yaml:"file"` // a file whose content (without a final newline) is the value; relative to the workspace
	Env  string `yaml:"env"`  // a variable of the daemon's environment
}

// Sandbox is a profile's `sandbox:` section.
type Sandbox struct {
	Runner     string   `yaml:"runner"`      // SandboxNone or SandboxBwrap
	Network    string   `yaml:"network"`     // NetworkHost, NetworkNone or NetworkAllow (bwrap only)
	AllowHosts []string `yaml:"allow_hosts"` // host:port reachable with NetworkAllow; empty: the preset's API hosts
}

// The sandbox runners and network modes.
const (
	SandboxNone  = "none"
	SandboxBwrap = "bwrap"
	NetworkHost  = "host"
	NetworkNone  = "none"
	NetworkAllow = "allow"
)

// SandboxRunners and SandboxNetworks list the values of sandbox.runner and
// sandbox.network.
var (
	SandboxRunners  = []string{SandboxNone, SandboxBwrap}
	SandboxNetworks = []string{NetworkHost, NetworkNone, NetworkAllow}
)

// RunnerOrDefault is Runner, "" read as none.
func (s Sandbox) RunnerOrDefault() string {
	if s.Runner == "" {
		return SandboxNone
	}
	return s.Runner
}

// NetworkOrDefault is Network, "" read as host.
func (s Sandbox) NetworkOrDefault() string {
	if s.Network == "" {
		return NetworkHost
	}
	return s.Network
}

// trustAllEnv is trust.AllEnv (package trust imports config): the one
// variable procenv.Never keeps from every loop's process, env: and secrets:
// included.
const trustAllEnv = "LOOPR_TRUST_ALL"

const neverGiven = "is never given to an agent: it would let a loopr the agent starts run any loopr.yml"

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// security checks a profile's env, env_pass, secrets and sandbox keys.
func (v *checker) security(key string, a Agent) {
	for _, name := range sortedKeys(a.Env) {
		if !envName.MatchString(name) {
			v.fail(key+".env."+name, "is not a variable name (letters, digits and _, not starting with a digit)")
		}
		if strings.Contains(a.Env[name], "\x00") {
			v.fail(key+".env."+name, "must not contain a NUL byte")
		}
		if name == trustAllEnv {
			v.fail(key+".env."+name, neverGiven)
		}
	}
	for i, name := range a.EnvPass {
		if !envName.MatchString(strings.TrimSuffix(name, "*")) {
			v.fail(fmt.Sprintf("%s.env_pass[%d]", key, i), "%q is not a variable name or PREFIX_* pattern", name)
		}
	}
	for _, name := range sortedKeys(a.Secrets) {
		s, sk := a.Secrets[name], key+".secrets."+name
		switch {
		case !envName.MatchString(name):
			v.fail(sk, "is not a variable name (letters, digits and _, not starting with a digit)")
		case (s.File == "") == (s.Env == ""):
			v.fail(sk, "must have exactly one of file: PATH or env: VARIABLE")
		case s.Env != "" && !envName.MatchString(s.Env):
			v.fail(sk+".env", "%q is not a variable name", s.Env)
		case name == trustAllEnv:
			v.fail(sk, neverGiven)
		}
		if _, ok := a.Env[name]; ok {
			v.fail(sk, "is also set in %s.env: a variable is either a plain value or a secret", key)
		}
	}
	sb, sk := a.Sandbox, key+".sandbox"
	if sb.Runner != "" && !slices.Contains(SandboxRunners, sb.Runner) {
		v.fail(sk+".runner", "must be one of %s, not %q", strings.Join(SandboxRunners, ", "), sb.Runner)
	}
	if sb.Network != "" && !slices.Contains(SandboxNetworks, sb.Network) {
		v.fail(sk+".network", "must be one of %s, not %q", strings.Join(SandboxNetworks, ", "), sb.Network)
	}
	if sb.NetworkOrDefault() != NetworkHost && sb.RunnerOrDefault() != SandboxBwrap {
		v.fail(sk+".network", "%s needs runner: bwrap (without a sandbox the agent has the host's network)", sb.Network)
	}
	for i, h := range sb.AllowHosts {
		if err := checkHostPort(h); err != nil {
			v.fail(fmt.Sprintf("%s.allow_hosts[%d]", sk, i), "%v", err)
		}
	}
	if len(sb.AllowHosts) > 0 && sb.NetworkOrDefault() != NetworkAllow {
		v.fail(sk+".allow_hosts", "is only used with network: allow")
	}
	if p, _ := preset.Get(a.Preset); sb.NetworkOrDefault() == NetworkAllow && len(sb.AllowHosts) == 0 &&
		len(p.Hosts) == 0 && len(p.BaseURLEnv) == 0 {
		v.fail(sk+".allow_hosts", "must list the host:port the agent may reach: preset %s has no API host of its own, so network: allow would admit nothing (use network: none for that)", a.Preset)
	}
}

// checkHostPort checks one allow_hosts entry: host:port, port 1-65535.
func checkHostPort(h string) error {
	host, port, err := net.SplitHostPort(h)
	if err != nil || host == "" {
		return fmt.Errorf("%q must be host:port, e.g. api.anthropic.com:443", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port must be between 1 and 65535", h)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
