package config_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
)

func TestTemplateIsDefault(t *testing.T) {
	t.Parallel()
	for name, tmpl := range map[string][]byte{"Template": config.Template(), "ShortTemplate": config.ShortTemplate()} {
		got, err := config.Parse(tmpl, "")
		if err != nil {
			t.Fatalf("Parse(%s()): %v", name, err)
		}
		if diff := cmp.Diff(config.Default(), got); diff != "" {
			t.Errorf("Parse(%s()) mismatch (-want +got):\n%s", name, diff)
		}
	}
}

// TestShortTemplate: the file `loopr init` writes is short, names the
// agent and ralph's validate first, comments every key, has one
// `command:` key (the agent's) and keeps to 130 columns.
func TestShortTemplate(t *testing.T) {
	t.Parallel()
	tmpl := config.ShortTemplate()
	if n := len(tmpl); n > 2500 {
		t.Errorf("ShortTemplate() is %d bytes; it should stay short (loopr init --full writes every key)", n)
	}
	lines := strings.Split(string(tmpl), "\n")
	first := map[string]int{}
	for i, l := range lines {
		if len(l) > 130 {
			t.Errorf("line %d is %d columns", i+1, len(l))
		}
		for _, k := range []string{"agent:", "command:", "validate:"} {
			if strings.HasPrefix(strings.TrimSpace(l), k) {
				if _, ok := first[k]; ok {
					t.Errorf("line %d: a second %s key", i+1, k)
				} else {
					first[k] = i + 1
				}
			}
		}
	}
	if first["agent:"] == 0 || first["agent:"] > 10 || first["validate:"] == 0 || first["validate:"] > 20 {
		t.Errorf("agent: at line %d, validate: at line %d; want both near the top", first["agent:"], first["validate:"])
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(tmpl, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind == yaml.MappingNode {
				walk(v, prefix+k.Value+".")
			} else if k.LineComment == "" && v.LineComment == "" {
				t.Errorf("line %d: %s%s: no comment", k.Line, prefix, k.Value)
			}
		}
	}
	walk(doc.Content[0], "")
}

// TestTemplateHasEveryKey keeps Template complete: every key the decoder
// accepts appears, each with a comment.
func TestTemplateHasEveryKey(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	if err := yaml.Unmarshal(config.Template(), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if prefix != "" {
				key = prefix + "." + k.Value
			}
			got = append(got, key)
			if k.LineComment == "" && v.LineComment == "" {
				t.Errorf("template line %d: %s: no comment", k.Line, key)
			}
			if v.Kind == yaml.MappingNode {
				walk(v, key)
			}
		}
	}
	walk(doc.Content[0], "")

	var want []string
	var schema func(typ reflect.Type, prefix string)
	schema = func(typ reflect.Type, prefix string) {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			key := name
			if prefix != "" {
				key = prefix + "." + name
			}
			want = append(want, key)
			switch ft := typ.Field(i).Type; {
			case ft.Kind() == reflect.Struct:
				schema(ft, key)
			case name == "loops":
				for _, lt := range loop.BuiltinTypes {
					want = append(want, key+"."+lt)
					schema(ft.Elem(), key+"."+lt)
				}
			}
		}
	}
	schema(reflect.TypeFor[config.Config](), "")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("template keys mismatch (-want +got):\n%s", diff)
	}
}

// TestMarshalRoundTrip: a Config marshalled with its yaml tags is a loopr.yml
// that parses back to the same Config.
func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.UserTypes = map[string]config.TypeSettings{
		"review": {Base: 70, MaxRunning: 3, LoopSettings: config.LoopSettings{MaxIterations: 10, Validate: []string{"make lint"}, Agent: "codex", TimeoutSecs: 60, Budget: config.Budget{USD: 2.5}}},
	}
	c.Agents = map[string]config.Agent{"codex": {Preset: "codex", TimeoutSecs: 60, RateLimitExitCode: 75, RateLimitPattern: "x", Fallback: []string{"default"},
		Env: map[string]string{"GOFLAGS": "-mod=mod"}, EnvPass: []string{"AWS_*"}, Secrets: map[string]config.Secret{"GH_TOKEN": {File: "/run/gh"}},
		Sandbox: config.Sandbox{Runner: "bwrap", Network: "allow", AllowHosts: []string{"api.openai.com:443"}}}}
	c.Budget = config.Budget{USD: 10, Tokens: 1000}
	c.Loops[loop.Spec] = config.LoopSettings{MaxIterations: 7, Prompt: "prompts/spec.md", Children: config.Parallel}
	data, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse(data, "")
	if err != nil {
		t.Fatalf("Parse(Marshal(c)): %v\n%s", err, data)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("Parse(Marshal(c)) mismatch (-want +got):\n%s", diff)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want func(c *config.Config) // applied to Default()
	}{
		{"empty file", "", func(*config.Config) {}},
		{"only comments", "# nothing here\n\n", func(*config.Config) {}},
		{"null document", "~\n", func(*config.Config) {}},
		{"empty sections keep defaults", "scheduler:\nconcurrency: {}\nloops:\n  ralph:\n", func(*config.Config) {}},
		{"empty types", "types: {}\n", func(*config.Config) {}},
		{"scalars", `
scheduler:
  poll_interval_secs: 3
  priority: {plan: 0, age_boost_max: 0}
concurrency:
  max_loops: 4
  per_type: {ralph: 0}
retry: {backoff_factor: 1.5, backoff_base_secs: 0}
git: {worktrees: false}
storage: {disk_quota_min_gb: 0.5}
agent: {rate_limit_pattern: '[^\s\S]'}
`, func(c *config.Config) {
			c.Scheduler.PollIntervalSecs = 3
			c.Scheduler.Priority.Plan = 0
			c.Scheduler.Priority.AgeBoostMax = 0
			c.Concurrency.MaxLoops = 4
			c.Concurrency.PerType.Ralph = 0
			c.Retry.BackoffFactor = 1.5
			c.Retry.BackoffBaseSecs = 0
			c.Git.Worktrees = false
			c.Storage.DiskQuotaMinGB = 0.5
			c.Agent.RateLimitPattern = `[^\s\S]`
		}},
		{"yaml integer forms", "concurrency: {max_loops: 0x10, max_api_calls: +7}\n", func(c *config.Config) {
			c.Concurrency.MaxLoops = 16
			c.Concurrency.MaxAPICalls = 7
		}},
		{"loop override keeps unset keys", `
agents:
  aider: {preset: command, command: [aider, --yes, "4"]}
loops:
  ralph:
    max_iterations: 5
    agent: aider
    prompt: prompts/task.md
    timeout_secs: 600
  plan: {require_approval: false, validate: ["test -s plan.md"]}
`, func(c *config.Config) {
			c.Loops[loop.Ralph] = config.LoopSettings{
				MaxIterations: 5, Validate: []string{"go test ./..."}, ValidateIn: config.ValidateInWorktree,
				Agent: "aider", Prompt: "prompts/task.md", TimeoutSecs: 600,
				ConflictGroup: "code", RequireChanges: true, Children: config.Parallel,
			}
			c.Loops[loop.Plan] = config.LoopSettings{MaxIterations: 10, Validate: []string{"test -s plan.md"}, Children: config.Parallel, ValidateIn: config.ValidateInWorktree}
			a := config.DefaultAgent()
			a.Preset, a.Command = "command", []string{"aider", "--yes", "4"}
			c.Agents = map[string]config.Agent{"aider": a}
		}},
		{"refresh by rebase", "merge: {refresh: rebase}\n", func(c *config.Config) {
			c.Merge.Refresh = config.RefreshRebase
		}},
		{"empty validate list clears the default", "loops:\n  ralph: {validate: []}\n", func(c *config.Config) {
			c.Loops[loop.Ralph] = config.LoopSettings{MaxIterations: 100, ValidateIn: config.ValidateInWorktree, ConflictGroup: "code", RequireChanges: true, Children: config.Parallel}
		}},
		{"the merge queue and clean validation", "merge: {validate: [make test], batch: 8}\nloops:\n  ralph: {validate_in: clean}\n", func(c *config.Config) {
			c.Merge = config.Merge{Validate: []string{"make test"}, Batch: 8, Refresh: config.RefreshMerge}
			r := c.Loops[loop.Ralph]
			r.ValidateIn = config.ValidateInClean
			c.Loops[loop.Ralph] = r
		}},
		{"user types start from the type defaults", `
types:
  review: {base: 70, max_running: 3, max_iterations: 10}
  docs: {validate: [make docs]}
`, func(c *config.Config) {
			c.UserTypes = map[string]config.TypeSettings{
				"review": {Base: 70, MaxRunning: 3, LoopSettings: config.LoopSettings{MaxIterations: 10, ValidateIn: config.ValidateInWorktree}},
				"docs":   {Base: 50, LoopSettings: config.LoopSettings{MaxIterations: 10, Validate: []string{"make docs"}, ValidateIn: config.ValidateInWorktree}},
			}
		}},
		{"alias values", `
agent:
  command: &cmd ["codex", "exec"]
agents:
  codex: {command: *cmd}
`, func(c *config.Config) {
			c.Agent.Command = []string{"codex", "exec"}
			a := config.DefaultAgent()
			a.Command = []string{"codex", "exec"}
			c.Agents = map[string]config.Agent{"codex": a}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Parse([]byte(tc.yaml), "loopr.yml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := config.Default()
			want.File = "loopr.yml"
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate() of a parsed config: %v", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want string
	}{
		// The document.
		{"not a mapping", "- plan\n- spec\n", "loopr.yml:1: must be a mapping, got a list"},
		{"scalar document", "hello\n", `loopr.yml:1: must be a mapping, got "hello"`},
		{"two documents", "git: {worktrees: true}\n---\ngit: {worktrees: false}\n", "loopr.yml:2: must hold a single YAML document"},
		{"syntax error", "scheduler:\n  poll_interval_secs: 1\n priority: {}\n", "loopr.yml:2: invalid YAML: did not find expected key"},
		{"unclosed flow", "loops:\n  ralph: {validate: [\n", "loopr.yml:2: invalid YAML: did not find expected node content"},

		// Keys.
		{"unknown top-level key", "schedular:\n  poll_interval_secs: 1\n", "loopr.yml:1: schedular: unknown key; did you mean scheduler?"},
		{"dotted key is quoted", "scheduler:\n  poll_interval_secs: 1\n  priority:\n    plan: 40\n\n\nscheduler.prioritty: 1\n", "loopr.yml:7: \"scheduler.prioritty\": unknown key"},
		{"unknown key in section", "scheduler:\n  poll_interval_secs: 1\n  priority:\n    plan: 40\n  # typo below\n\n  prioritty: {}\n", "loopr.yml:7: scheduler.prioritty: unknown key; did you mean priority?"},
		{"unknown loop key", "loops:\n  ralph:\n    max_iteration: 3\n", "loopr.yml:3: loops.ralph.max_iteration: unknown key; did you mean max_iterations?"},
		{"unknown type key", "types:\n  review:\n    priority: 1\n", "loopr.yml:3: types.review.priority: unknown key"},
		{"file is not a key", "File: x.yml\n", "loopr.yml:1: File: unknown key"},
		{"a section's key at the top", "max_loops: 5\n", "loopr.yml:1: max_loops: unknown key; did you mean concurrency.max_loops or worker.max_loops?"},
		{"a type's key at the top", "validate: [make test]\n", "loopr.yml:1: validate: unknown key; did you mean loops.ralph.validate or merge.validate or types.<name>.validate?"},
		{"refresh unknown", "merge:\n  refresh: squash\n", `loopr.yml:2: merge.refresh: unknown value "squash" (want merge, rebase or off)`},
		{"merge batch of none", "merge:\n  batch: 0\n", "loopr.yml:2: merge.batch: must be > 0"},
		{"merge batch too big", "merge:\n  batch: 1000\n", "loopr.yml:2: merge.batch: must be <= 256"},
		{"empty merge command", "merge:\n  validate: [\"make test\", \" \"]\n", "loopr.yml:2: merge.validate[1]: must not be empty"},
		{"validate_in unknown", "loops:\n  ralph:\n    validate_in: docker\n", `loopr.yml:3: loops.ralph.validate_in: unknown value "docker" (want worktree or clean)`},
		{"fanout too large", "loops:\n  ralph:\n    fanout: 17\n", `loopr.yml:3: loops.ralph.fanout: 17: must be 0 to 16 (0 or 1 = one loop, N = N candidates of which one merges)`},
		{"fanout of a phase", "loops:\n  phase:\n    fanout: 2\n", `loopr.yml:3: loops.phase.fanout: only tasks fan out (ralph and user types): a phase writes an artifact, not code to merge`},
		{"fanout_pick unknown", "loops:\n  ralph:\n    fanout_pick: best\n", `loopr.yml:3: loops.ralph.fanout_pick: unknown value "best" (want first, smallest_diff, judge)`},
		{"judge without a command", "types:\n  task:\n    fanout_pick: judge\n", "loopr.yml:2: types.task.fanout_judge: required with fanout_pick: judge: the command (argv) that reads the passing candidates' diffs and prints the winner"},
		{"a near spelling", "concurrency:\n  max_loop: 5\n", "loopr.yml:2: concurrency.max_loop: unknown key; did you mean max_loops?"},
		{"a swap is one edit", "git:\n  wroktrees: true\n", "loopr.yml:2: git.wroktrees: unknown key; did you mean worktrees?"},
		{"nothing near", "concurrency:\n  speed: 5\n", "loopr.yml:2: concurrency.speed: unknown key"},
		{"duplicate key", "concurrency:\n  max_loops: 5\n  max_api_calls: 2\n  max_loops: 6\n", "loopr.yml:4: concurrency.max_loops: duplicate key (first at line 2)"},
		{"duplicate section", "git: {}\nstorage: {}\ngit: {}\n", "loopr.yml:3: git: duplicate key (first at line 1)"},
		{"duplicate type", "types:\n  review: {}\n  review: {}\n", "loopr.yml:3: types.review: duplicate key (first at line 2)"},
		{"non-string key", "scheduler:\n  ? [a, b]\n  : 1\n", "loopr.yml:2: scheduler: keys must be strings, got a list"},
		{"merge key", "scheduler:\n  <<: {poll_interval_secs: 2}\n", `loopr.yml:2: scheduler."<<": merge keys are not supported`},

		// Types of values.
		{"string for integer", "concurrency:\n  max_api_calls: 10\n  max_loops: lots\n", `loopr.yml:3: concurrency.max_loops: must be an integer, got "lots"`},
		{"float for integer", "concurrency:\n  max_loops: 2.5\n", `loopr.yml:2: concurrency.max_loops: must be an integer, got "2.5"`},
		{"quoted integer", "concurrency:\n  max_loops: \"5\"\n", `loopr.yml:2: concurrency.max_loops: must be an integer, got "5"`},
		{"integer overflow", "concurrency:\n  max_loops: 99999999999999999999\n", `loopr.yml:2: concurrency.max_loops: must be an integer, got "99999999999999999999"`},
		{"null integer", "scheduler:\n  poll_interval_secs:\n", "loopr.yml:2: scheduler.poll_interval_secs: must be an integer, got null"},
		{"mapping for integer", "scheduler:\n  poll_interval_secs:\n    secs: 1\n", "loopr.yml:3: scheduler.poll_interval_secs: must be an integer, got a mapping"},
		{"scalar for section", "scheduler: fast\n", `loopr.yml:1: scheduler: must be a mapping, got "fast"`},
		{"list for section", "concurrency:\n  per_type: [1, 2]\n", "loopr.yml:2: concurrency.per_type: must be a mapping, got a list"},
		{"yes is not a bool", "git:\n  worktrees: yes\n", `loopr.yml:2: git.worktrees: must be true or false, got "yes"`},
		{"number for bool", "loops:\n  plan: {require_approval: 1}\n", `loopr.yml:2: loops.plan.require_approval: must be true or false, got "1"`},
		{"children order", "loops:\n  spec:\n    children: serial\n", `loopr.yml:3: loops.spec.children: "serial": must be parallel or sequential`},
		{"string for number", "retry:\n  backoff_factor: double\n", `loopr.yml:2: retry.backoff_factor: must be a number, got "double"`},
		{"string for list", "loops:\n  ralph:\n    validate: go test ./...\n", `loopr.yml:3: loops.ralph.validate: must be a list of strings, got "go test ./..."`},
		{"mapping in list", "agent:\n  command:\n    - claude\n    - {p: true}\n", "loopr.yml:4: agent.command[1]: must be a string, got a mapping"},
		{"null in list", "loops:\n  ralph: {validate: [make, ~]}\n", "loopr.yml:2: loops.ralph.validate[1]: must be a string, got null"},
		{"list for string", "agent:\n  rate_limit_pattern: [429]\n", "loopr.yml:2: agent.rate_limit_pattern: must be a string, got a list"},
		{"long value is cut", "concurrency:\n  max_loops: " + strings.Repeat("x", 60) + "\n", `loopr.yml:2: concurrency.max_loops: must be an integer, got "` + strings.Repeat("x", 39) + `…"`},

		// Ranges.
		{"zero max_loops", "concurrency:\n  max_loops: 0\n", "loopr.yml:2: concurrency.max_loops: must be > 0"},
		{"negative max_api_calls", "concurrency:\n  max_api_calls: -1\n", "loopr.yml:2: concurrency.max_api_calls: must be > 0"},
		{"negative per-type cap", "concurrency:\n  per_type:\n    spec: -2\n", "loopr.yml:3: concurrency.per_type.spec: must be >= 0"},
		{"negative max_running", "types:\n  review:\n    max_running: -1\n", "loopr.yml:3: types.review.max_running: must be >= 0"},
		{"zero poll interval", "scheduler: {poll_interval_secs: 0}\n", "loopr.yml:1: scheduler.poll_interval_secs: must be > 0"},
		{"negative age_boost_max", "scheduler:\n  priority:\n    age_boost_max: -5\n", "loopr.yml:3: scheduler.priority.age_boost_max: must be >= 0"},
		{"negative tree_boost_max", "scheduler:\n  priority:\n    tree_boost_max: -1\n", "loopr.yml:3: scheduler.priority.tree_boost_max: must be >= 0"},
		{"tree age below the tree boost", "scheduler:\n  priority:\n    tree_boost_max: 50\n    tree_age_boost_max: 40\n",
			"loopr.yml:4: scheduler.priority.tree_age_boost_max: must be >= tree_boost_max (50), with tree_age_boost_per_minute > 0, so that an old tree's age outweighs a newer tree's boost (or set tree_boost_max: 0)"},
		{"tree age that never grows", "scheduler:\n  priority: {tree_age_boost_per_minute: 0}\n",
			"loopr.yml:2: scheduler.priority.tree_age_boost_max: must be >= tree_boost_max (20), with tree_age_boost_per_minute > 0, so that an old tree's age outweighs a newer tree's boost (or set tree_boost_max: 0)"},
		{"negative base", "scheduler:\n  priority: {ralph: -1}\n", "loopr.yml:2: scheduler.priority.ralph: must be >= 0"},
		{"huge value", "agent:\n  timeout_secs: 10000000000\n", "loopr.yml:2: agent.timeout_secs: must be <= 1000000000"},
		{"zero max_iterations", "loops:\n  spec:\n    max_iterations: 0\n", "loopr.yml:3: loops.spec.max_iterations: must be > 0"},
		{"zero user max_iterations", "types:\n  review: {max_iterations: 0}\n", "loopr.yml:2: types.review.max_iterations: must be > 0"},
		{"negative loop timeout", "loops:\n  ralph: {timeout_secs: -1}\n", "loopr.yml:2: loops.ralph.timeout_secs: must be >= 0"},
		{"backoff_factor below 1", "retry:\n  backoff_factor: 0.5\n", "loopr.yml:2: retry.backoff_factor: must be >= 1"},
		{"backoff_factor infinite", "retry:\n  backoff_factor: .inf\n", "loopr.yml:2: retry.backoff_factor: must be a finite number"},
		{"retry max below base", "retry:\n  backoff_base_secs: 10\n  backoff_max_secs: 5\n", "loopr.yml:3: retry.backoff_max_secs: must be >= retry.backoff_base_secs (10)"},
		{"max_backoff below initial", "rate_limit:\n  initial_backoff_secs: 5\n  max_backoff_secs: 4\n", "loopr.yml:3: rate_limit.max_backoff_secs: must be >= rate_limit.initial_backoff_secs (5)"},
		{"initial above default max", "rate_limit:\n  initial_backoff_secs: 500\n", "loopr.yml:2: rate_limit.initial_backoff_secs: must be <= rate_limit.max_backoff_secs (120)"},
		{"max below default initial", "rate_limit:\n  max_backoff_secs: 1\n", "loopr.yml:2: rate_limit.max_backoff_secs: must be >= rate_limit.initial_backoff_secs (5)"},
		{"zero initial backoff", "rate_limit: {initial_backoff_secs: 0}\n", "loopr.yml:1: rate_limit.initial_backoff_secs: must be > 0"},
		{"empty command of preset command", "agent:\n  preset: command\n  command: []\n", "loopr.yml:3: agent.command: must not be empty with preset command (it has no command of its own)"},
		{"unknown preset", "agent:\n  preset: aider\n", "loopr.yml:2: agent.preset: unknown preset \"aider\" (known: claude, codex, gemini, opencode, command)"},
		{"profile named default", "agents:\n  default: {preset: codex}\n", "loopr.yml:2: agents.default: \"default\" names the agent: section; give this profile another name"},
		{"bad profile name", "agents:\n  Codex: {preset: codex}\n", "loopr.yml:2: agents.Codex: invalid profile name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter"},
		{"unknown key in a profile", "agents:\n  codex:\n    presett: codex\n", "loopr.yml:3: agents.codex.presett: unknown key; did you mean preset?"},
		{"unknown type profile", "agents:\n  codex: {preset: codex}\nloops:\n  ralph: {agent: codx}\n", "loopr.yml:4: loops.ralph.agent: unknown agent profile \"codx\" (known: default, codex)"},
		{"unknown user type profile", "types:\n  review: {agent: nope}\n", "loopr.yml:2: types.review.agent: unknown agent profile \"nope\" (known: default)"},
		{"unknown fallback", "agent:\n  fallback: [codex]\n", "loopr.yml:2: agent.fallback[0]: unknown agent profile \"codex\" (known: default)"},
		{"self fallback", "agents:\n  codex: {preset: codex, fallback: [codex]}\n", "loopr.yml:2: agents.codex.fallback: fallback cycle: codex → codex"},
		{"fallback cycle", "agent:\n  fallback: [codex]\nagents:\n  codex:\n    preset: codex\n    fallback: [default]\n", "loopr.yml:2: agent.fallback: fallback cycle: default → codex → default"},
		{"duplicate fallback", "agents:\n  a: {}\nagent:\n  fallback: [a, a]\n", "loopr.yml:4: agent.fallback[1]: duplicate profile \"a\""},
		{"negative budget", "budget: {usd: -1}\n", "loopr.yml:1: budget.usd: must be >= 0 (0 = no budget)"},
		{"negative loop budget", "loops:\n  ralph:\n    budget: {tokens: -5}\n", "loopr.yml:3: loops.ralph.budget.tokens: must be >= 0"},
		{"string budget", "budget: {usd: lots}\n", "loopr.yml:1: budget.usd: must be a number, got \"lots\""},
		{"zero max_consecutive", "rate_limit: {max_consecutive: 0}\n", "loopr.yml:1: rate_limit.max_consecutive: must be > 0"},
		{"negative transient_max", "retry: {transient_max: -1}\n", "loopr.yml:1: retry.transient_max: must be >= 0"},
		{"bad env name", "agent:\n  env: {\"1X\": y}\n", "loopr.yml:2: agent.env.1X: is not a variable name (letters, digits and _, not starting with a digit)"},
		{"trust all in env", "agent:\n  env: {LOOPR_TRUST_ALL: \"1\"}\n", "loopr.yml:2: agent.env.LOOPR_TRUST_ALL: is never given to an agent: it would let a loopr the agent starts run any loopr.yml"},
		{"trust all as secret", "agent:\n  secrets: {LOOPR_TRUST_ALL: {env: X}}\n", "loopr.yml:2: agent.secrets.LOOPR_TRUST_ALL: is never given to an agent: it would let a loopr the agent starts run any loopr.yml"},
		{"bad env_pass", "agent:\n  env_pass: [\"A-B\"]\n", "loopr.yml:2: agent.env_pass[0]: \"A-B\" is not a variable name or PREFIX_* pattern"},
		{"secret with both", "agent:\n  secrets:\n    TOKEN: {file: t, env: T}\n", "loopr.yml:3: agent.secrets.TOKEN: must have exactly one of file: PATH or env: VARIABLE"},
		{"secret with neither", "agents:\n  c:\n    secrets: {TOKEN: {}}\n", "loopr.yml:3: agents.c.secrets.TOKEN: must have exactly one of file: PATH or env: VARIABLE"},
		{"secret also in env", "agent:\n  env: {TOKEN: x}\n  secrets: {TOKEN: {env: T}}\n", "loopr.yml:3: agent.secrets.TOKEN: is also set in agent.env: a variable is either a plain value or a secret"},
		{"unknown runner", "agent:\n  sandbox: {runner: docker}\n", "loopr.yml:2: agent.sandbox.runner: must be one of none, bwrap, not \"docker\""},
		{"network without sandbox", "agent:\n  sandbox: {network: none}\n", "loopr.yml:2: agent.sandbox.network: none needs runner: bwrap (without a sandbox the agent has the host's network)"},
		{"allow host without port", "agent:\n  sandbox: {runner: bwrap, network: allow, allow_hosts: [api.example.com]}\n", "loopr.yml:2: agent.sandbox.allow_hosts[0]: \"api.example.com\" must be host:port, e.g. api.anthropic.com:443"},
		{"allow with nothing to allow", "agent:\n  preset: command\n  command: [aider]\n  sandbox: {runner: bwrap, network: allow}\n", "loopr.yml:4: agent.sandbox.allow_hosts: must list the host:port the agent may reach: preset command has no API host of its own, so network: allow would admit nothing (use network: none for that)"},
		{"allow hosts with host network", "agent:\n  sandbox: {runner: bwrap, allow_hosts: [\"a:1\"]}\n", "loopr.yml:2: agent.sandbox.allow_hosts: is only used with network: allow"},
		{"blank program", "agent:\n  command: [\"\", -p]\n", "loopr.yml:2: agent.command[0]: must not be empty"},
		{"argv as loop agent", "loops:\n  ralph:\n    agent: [aider]\n", "loopr.yml:3: loops.ralph.agent: must name an agent profile (default, or one of agents:), got a list: put the argv in agents.<name>.command and name that profile here"},
		{"blank validate command", "loops:\n  ralph:\n    validate:\n      - make\n      - \"\"\n", "loopr.yml:5: loops.ralph.validate[1]: must not be empty"},
		{"exit code 0", "agent: {rate_limit_exit_code: 0}\n", "loopr.yml:1: agent.rate_limit_exit_code: must be between 1 and 255"},
		{"bad pattern", "agent:\n  rate_limit_pattern: '(429'\n", "loopr.yml:2: agent.rate_limit_pattern: must be a valid Go regexp: missing closing ): `(429`"},
		{"empty pattern", "agent:\n  rate_limit_pattern: ''\n", `loopr.yml:2: agent.rate_limit_pattern: must not be empty (to turn the check off, use a pattern that never matches: '[^\s\S]')`},
		{"pattern matching everything", "agent:\n  rate_limit_pattern: '.*'\n", "loopr.yml:2: agent.rate_limit_pattern: matches empty output, so every run would count as rate limited"},
		{"unknown resume mode", "agent:\n  resume: sometimes\n", `loopr.yml:2: agent.resume: must be one of off, interrupted, always, not "sometimes"`},
		{"session pattern without a group", "agent:\n  preset: command\n  command: [a]\n  session_pattern: 'session: \\S+'\n  resume_args: [--resume, '{session}']\n",
			"loopr.yml:4: agent.session_pattern: must have a group, (...), around the session id"},
		{"resume args without the session", "agent:\n  preset: command\n  command: [a]\n  session_pattern: 'session: (\\S+)'\n  resume_args: [--resume]\n",
			"loopr.yml:5: agent.resume_args: must contain {session}, where the session id goes"},
		{"resume args alone", "agent:\n  preset: command\n  command: [a]\n  resume_args: [--resume, '{session}']\n",
			"loopr.yml:1: agent.session_pattern: must be set with resume_args: a Go regexp whose first group is the session id in the agent's output"},
		{"resume args on claude", "agent:\n  session_pattern: 'session: (\\S+)'\n  resume_args: [--resume, '{session}']\n",
			"loopr.yml:3: agent.resume_args: only the command preset takes resume_args and session_pattern (preset claude resumes its own way)"},
		{"negative disk quota", "storage:\n  disk_quota_min_gb: -1\n", "loopr.yml:2: storage.disk_quota_min_gb: must be >= 0"},
		{"nan disk quota", "storage:\n  disk_quota_min_gb: .nan\n", "loopr.yml:2: storage.disk_quota_min_gb: must be a finite number"},

		// Types.
		{"loops of a user type", "loops:\n  review: {max_iterations: 3}\n", "loopr.yml:2: loops.review: not a built-in type (plan, spec, phase, ralph); user types go under types"},
		{"redefined built-in type", "types:\n  review: {base: 1}\n  ralph: {base: 1}\n", "loopr.yml:3: types.ralph: ralph is a built-in type: set it with scheduler.priority.ralph, concurrency.per_type.ralph and loops.ralph"},
		{"invalid type name", "types:\n  Review: {}\n", "loopr.yml:2: types.Review: invalid type name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter"},
		{"type name with spaces", "types:\n  \"code review\": {}\n", `loopr.yml:2: types."code review": invalid type name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter`},
		{"type name with newline", "types:\n  \"a\\nb\": {}\n", `loopr.yml:2: types."a\nb": invalid type name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter`},

		// The first error wins: decoding errors before range errors.
		{"decoding before validation", "concurrency:\n  max_loops: 0\ngit:\n  worktree: true\n", "loopr.yml:4: git.worktree: unknown key; did you mean worktrees?"},
		{"validation in key order", "storage:\n  disk_quota_min_gb: -1\nconcurrency:\n  max_loops: 0\n", "loopr.yml:4: concurrency.max_loops: must be > 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Parse([]byte(tc.yaml), "loopr.yml")
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", c, tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("Parse() error\n got %s\nwant %s", got, tc.want)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("Parse() error is %T, want *config.Error", err)
			}
		})
	}
}

func TestAliasExpansionBounded(t *testing.T) {
	t.Parallel()
	// 7 KB of YAML that would decode to 200,000 strings.
	var b strings.Builder
	b.WriteString("loops:\n  ralph:\n    validate: &v [" + strings.Repeat("a, ", 1999) + "a]\ntypes:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  t%d: {validate: *v}\n", i)
	}
	_, err := config.Parse([]byte(b.String()), "loopr.yml")
	if want := "loopr.yml:53: types.t48.validate: too many values (more than 100000, counting aliases each time they are used)"; err == nil || err.Error() != want {
		t.Errorf("Parse() error = %v, want %q", err, want)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  config.Error
		want string
	}{
		{"file and line", config.Error{File: "loopr.yml", Line: 12, Key: "concurrency.max_loops", Msg: "must be > 0"}, "loopr.yml:12: concurrency.max_loops: must be > 0"},
		{"no line", config.Error{File: "loopr.yml", Key: "concurrency.max_loops", Msg: "must be > 0"}, "loopr.yml: concurrency.max_loops: must be > 0"},
		{"no file", config.Error{Key: "concurrency.max_loops", Msg: "must be > 0"}, "concurrency.max_loops: must be > 0"},
		{"line without file", config.Error{Line: 3, Key: "git", Msg: "unknown key"}, "line 3: git: unknown key"},
		{"no key", config.Error{File: "loopr.yml", Line: 1, Msg: "must be a mapping, got a list"}, "loopr.yml:1: must be a mapping, got a list"},
		{"one line", config.Error{Msg: "a\nb"}, `a\nb`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestValidate covers configurations built in code: errors name the key and
// have no line.
func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(c *config.Config)
		want   string // "" = valid
	}{
		{"default", func(*config.Config) {}, ""},
		{"zero value", func(c *config.Config) { *c = config.Config{} }, "scheduler.poll_interval_secs: must be > 0"},
		{"file named", func(c *config.Config) { c.File = "/etc/loopr/custom.yml"; c.Concurrency.MaxLoops = -1 }, "custom.yml: concurrency.max_loops: must be > 0"},
		{"missing built-in loop", func(c *config.Config) { delete(c.Loops, loop.Phase) }, "loops.phase.max_iterations: must be > 0"},
		{"nil loops", func(c *config.Config) { c.Loops = nil }, "loops.plan.max_iterations: must be > 0"},
		{"extra loop", func(c *config.Config) { c.Loops["zz"] = config.LoopSettings{MaxIterations: 1} }, "loops.zz: not a built-in type (plan, spec, phase, ralph); user types go under types"},
		{"built-in user type", func(c *config.Config) {
			c.UserTypes = map[string]config.TypeSettings{"plan": config.DefaultTypeSettings()}
		}, "types.plan: plan is a built-in type: set it with scheduler.priority.plan, concurrency.per_type.plan and loops.plan"},
		{"bad user type name", func(c *config.Config) {
			c.UserTypes = map[string]config.TypeSettings{"9lives": config.DefaultTypeSettings()}
		}, "types.9lives: invalid type name: use up to 32 lowercase letters, digits, '-' and '_', starting with a letter"},
		{"user types checked by name", func(c *config.Config) {
			c.UserTypes = map[string]config.TypeSettings{"b": {LoopSettings: config.LoopSettings{MaxIterations: 0}}, "a": {LoopSettings: config.LoopSettings{MaxIterations: 1}, Base: -1}}
		}, "types.a.base: must be >= 0"},
		{"max backoff below initial", func(c *config.Config) { c.RateLimit.InitialBackoffSecs = 500 }, "rate_limit.max_backoff_secs: must be >= rate_limit.initial_backoff_secs (500)"},
		{"nil command of preset command", func(c *config.Config) { c.Agent.Preset, c.Agent.Command = "command", nil }, "agent.command: must not be empty with preset command (it has no command of its own)"},
		{"nan factor", func(c *config.Config) { c.Retry.BackoffFactor = nanf() }, "retry.backoff_factor: must be a finite number"},
		{"huge factor", func(c *config.Config) { c.Retry.BackoffFactor = 1e6 }, "retry.backoff_factor: must be <= 1000"},
		{"exit code over 255", func(c *config.Config) { c.Agent.RateLimitExitCode = 256 }, "agent.rate_limit_exit_code: must be between 1 and 255"},
		{"checks in file order", func(c *config.Config) {
			c.Storage.DiskQuotaMinGB = -1
			c.Agent.TimeoutSecs = 0
			c.Scheduler.Priority.RetryPenaltyMax = -1
		}, "scheduler.priority.retry_penalty_max: must be >= 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			tc.change(c)
			err := c.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func nanf() float64 { z := 0.0; return z / z }

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()

	_, err := config.Load(filepath.Join(dir, "loopr.yml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want fs.ErrNotExist", err)
	}

	good := filepath.Join(dir, "good.yml")
	if err := os.WriteFile(good, []byte("concurrency:\n  max_loops: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(good)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.File != good || c.Concurrency.MaxLoops != 3 {
		t.Errorf("Load() = File %q, MaxLoops %d; want %q, 3", c.File, c.Concurrency.MaxLoops, good)
	}

	bad := filepath.Join(dir, "loopr.yml")
	if err := os.WriteFile(bad, []byte("concurrency:\n  max_loops: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(bad)
	if want := "loopr.yml:2: concurrency.max_loops: must be > 0"; err == nil || err.Error() != want {
		t.Errorf("Load(bad) error = %v, want %q", err, want)
	}
}

func TestViews(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
agent:
  command: [claude, -p]
  timeout_secs: 900
concurrency:
  max_api_calls: 4
  per_type: {phase: 0}
scheduler:
  poll_interval_secs: 2
agents:
  aider: {preset: command, command: [aider], timeout_secs: 120}
loops:
  ralph: {agent: aider, timeout_secs: 60}
  spec: {agent: aider}
types:
  review: {base: 70, max_running: 3, max_iterations: 12, validate: [make lint]}
  audit: {prompt: prompts/audit.md}
`), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"plan", "spec", "phase", "ralph", "audit", "review"}, c.Types()); diff != "" {
		t.Errorf("Types() mismatch (-want +got):\n%s", diff)
	}
	for typ, want := range map[string]bool{"plan": true, "ralph": true, "review": true, "audit": true, "nope": false, "": false} {
		if got := c.KnownType(typ); got != want {
			t.Errorf("KnownType(%q) = %v, want %v", typ, got, want)
		}
	}
	type view struct{ Base, Cap int }
	gotViews := map[string]view{}
	for _, typ := range append(c.Types(), "nope") {
		gotViews[typ] = view{c.Base(typ), c.TypeCap(typ)}
	}
	wantViews := map[string]view{
		"plan": {40, 2}, "spec": {60, 5}, "phase": {80, 0}, "ralph": {100, 50},
		"review": {70, 3}, "audit": {50, 0}, "nope": {0, 0},
	}
	if diff := cmp.Diff(wantViews, gotViews); diff != "" {
		t.Errorf("Base/TypeCap mismatch (-want +got):\n%s", diff)
	}

	gotLoops := map[string]config.LoopSettings{}
	for _, typ := range append(c.Types(), "nope") {
		gotLoops[typ] = c.Loop(typ)
	}
	agent, wt := config.DefaultProfile, config.ValidateInWorktree
	wantLoops := map[string]config.LoopSettings{
		"plan":   {MaxIterations: 10, RequireApproval: true, ValidateIn: wt, Agent: agent, TimeoutSecs: 900, Children: config.Parallel},
		"spec":   {MaxIterations: 25, ValidateIn: wt, Agent: "aider", TimeoutSecs: 120, Children: config.Sequential},
		"phase":  {MaxIterations: 50, ValidateIn: wt, Agent: agent, TimeoutSecs: 900, Children: config.Parallel},
		"ralph":  {MaxIterations: 100, Validate: []string{"go test ./..."}, ValidateIn: wt, Agent: "aider", TimeoutSecs: 60, ConflictGroup: "code", RequireChanges: true, Children: config.Parallel},
		"review": {MaxIterations: 12, Validate: []string{"make lint"}, ValidateIn: wt, Agent: agent, TimeoutSecs: 900},
		"audit":  {MaxIterations: 10, ValidateIn: wt, Agent: agent, Prompt: "prompts/audit.md", TimeoutSecs: 900},
		"nope":   {ValidateIn: wt, Agent: agent, TimeoutSecs: 900},
	}
	if diff := cmp.Diff(wantLoops, gotLoops); diff != "" {
		t.Errorf("Loop() mismatch (-want +got):\n%s", diff)
	}

	// Loop returns copies: changing them leaves the config alone.
	l := c.Loop("ralph")
	l.Validate[0] = "x"
	if c.Loops["ralph"].Validate[0] != "go test ./..." {
		t.Error("Loop() returned slices shared with the config")
	}
	if got := c.Loop("ralph").Timeout(); got != time.Minute {
		t.Errorf("Loop(ralph).Timeout() = %v, want 1m", got)
	}

	if got := c.APICallCap(); got != 4 {
		t.Errorf("APICallCap() = %d, want 4 (concurrency.max_api_calls is smaller)", got)
	}
	c.RateLimit.MaxConcurrentAPICalls = 2
	if got := c.APICallCap(); got != 2 {
		t.Errorf("APICallCap() = %d, want 2 (rate_limit.max_concurrent_api_calls is smaller)", got)
	}
	if got := c.PollInterval(); got != 2*time.Second {
		t.Errorf("PollInterval() = %v, want 2s", got)
	}
}

func TestDefaultIsFresh(t *testing.T) {
	t.Parallel()
	a := config.Default()
	a.Agent.Fallback = append(a.Agent.Fallback, "x")
	a.Loops[loop.Ralph].Validate[0] = "x"
	if diff := cmp.Diff(config.Default().Agent.Fallback, []string(nil)); diff != "" {
		t.Errorf("Default() shares slices between calls (-want +got):\n%s", diff)
	}
	if config.Default().Loops[loop.Ralph].Validate[0] != "go test ./..." {
		t.Error("Default() shares loop settings between calls")
	}
}

func TestTemplateIsACopy(t *testing.T) {
	t.Parallel()
	b := config.Template()
	b[0] = '!'
	if config.Template()[0] != '#' {
		t.Error("Template() returned its backing array")
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	r := config.Default().Retry // 2s * 2^(n-1), at most 60s
	var got []time.Duration
	for it := range 8 {
		got = append(got, r.Delay(it))
	}
	want := []time.Duration{2 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 60 * time.Second, 60 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Delay(0..7) mismatch (-want +got):\n%s", diff)
	}
	if got := r.Delay(1 << 30); got != time.Minute {
		t.Errorf("Delay(huge) = %v, want 1m", got)
	}
	if got := (config.Retry{BackoffBaseSecs: 3, BackoffFactor: 1.5, BackoffMaxSecs: 100}).Delay(3); got != 6750*time.Millisecond {
		t.Errorf("Delay(3) with factor 1.5 = %v, want 6.75s", got)
	}
	if got := (config.Retry{BackoffFactor: 2, BackoffMaxSecs: 100}).Delay(1 << 30); got != 0 {
		t.Errorf("Delay with base 0 = %v, want 0", got)
	}
}

func TestRateLimitRegexp(t *testing.T) {
	t.Parallel()
	re, err := config.Default().Agent.RateLimitRegexp()
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{"Error: 429 Too Many Requests", "Rate limit exceeded", "Claude usage limit reached|1745000000", "You've hit your limit", "QUOTA EXCEEDED"} {
		if !re.MatchString(out) {
			t.Errorf("default pattern does not match %q", out)
		}
	}
	for _, out := range []string{"", "ok: 14290 tests passed", "all good"} {
		if re.MatchString(out) {
			t.Errorf("default pattern matches %q", out)
		}
	}
	if re, err := (config.Agent{}).RateLimitRegexp(); re != nil || err != nil {
		t.Errorf("RateLimitRegexp() of \"\" = %v, %v; want nil, nil", re, err)
	}
}
