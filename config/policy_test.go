package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
)

// TestParsePolicyKeys covers the scheduling-policy keys: fairness,
// admission, quotas and each type's tier, conflict_group and default_cost.
func TestParsePolicyKeys(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
scheduler:
  fairness: {enabled: true, alpha: 0.5, idle_ttl_secs: 60}
admission: {max_pending: 1000}
quotas:
  alice: {max_running: 2}
  "bob@example.com": {max_running: 1, max_pending: 10}
loops:
  phase: {tier: 3, default_cost: 120}
  ralph: {conflict_group: ""}
types:
  deploy: {tier: 2, conflict_group: env, default_cost: 300}
`), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Scheduler.Fairness, (config.Fairness{Enabled: true, Alpha: 0.5, IdleTTLSecs: 60}); got != want {
		t.Errorf("Fairness = %+v, want %+v", got, want)
	}
	if got := c.Scheduler.Fairness.IdleTTL().Seconds(); got != 60 {
		t.Errorf("IdleTTL() = %vs, want 60s", got)
	}
	if c.Admission.MaxPending != 1000 {
		t.Errorf("Admission.MaxPending = %d, want 1000", c.Admission.MaxPending)
	}
	wantQuotas := map[string]config.Quota{"alice": {MaxRunning: 2}, "bob@example.com": {MaxRunning: 1, MaxPending: 10}}
	if diff := cmp.Diff(wantQuotas, c.Quotas); diff != "" {
		t.Errorf("Quotas mismatch (-want +got):\n%s", diff)
	}
	got := map[string]config.TypePolicy{}
	for _, typ := range append(c.Types(), "nope") {
		got[typ] = c.Policy(typ)
	}
	want := map[string]config.TypePolicy{
		loop.Plan:  {DefaultCost: 60},
		loop.Spec:  {DefaultCost: 60},
		loop.Phase: {Tier: 3, DefaultCost: 120},
		loop.Ralph: {DefaultCost: 60}, // the "code" group turned off
		"deploy":   {Tier: 2, ConflictGroup: "env", DefaultCost: 300},
		"nope":     {DefaultCost: 60},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Policy() mismatch (-want +got):\n%s", diff)
	}
	if g := config.Default().Policy(loop.Ralph).ConflictGroup; g != "code" {
		t.Errorf("default ralph conflict_group = %q, want code", g)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{"alpha zero", "scheduler:\n  fairness:\n    alpha: 0\n", "loopr.yml:3: scheduler.fairness.alpha: must be > 0 and <= 1"},
		{"alpha above one", "scheduler:\n  fairness: {alpha: 1.5}\n", "loopr.yml:2: scheduler.fairness.alpha: must be > 0 and <= 1"},
		{"negative ttl", "scheduler:\n  fairness:\n    idle_ttl_secs: -1\n", "loopr.yml:3: scheduler.fairness.idle_ttl_secs: must be >= 0"},
		{"enabled not a bool", "scheduler:\n  fairness:\n    enabled: yes\n", `loopr.yml:3: scheduler.fairness.enabled: must be true or false, got "yes"`},
		{"negative max_pending", "admission:\n  max_pending: -5\n", "loopr.yml:2: admission.max_pending: must be >= 0"},
		{"unknown quota key", "quotas:\n  alice:\n    max_runing: 2\n", "loopr.yml:3: quotas.alice.max_runing: unknown key; did you mean max_running?"},
		{"negative quota", "quotas:\n  alice: {max_running: 1}\n  bob:\n    max_pending: -1\n", "loopr.yml:4: quotas.bob.max_pending: must be >= 0"},
		{"empty owner", "quotas:\n  \"\": {max_running: 1}\n", `loopr.yml:2: quotas."": owner name must not be empty`},
		{"quota not a mapping", "quotas:\n  alice: 3\n", `loopr.yml:2: quotas.alice: must be a mapping, got "3"`},
		{"negative tier", "loops:\n  ralph:\n    tier: -1\n", "loopr.yml:3: loops.ralph.tier: must be >= 0"},
		{"bad group", "types:\n  deploy:\n    conflict_group: \"a b\"\n", `loopr.yml:3: types.deploy.conflict_group: invalid group name "a b": use up to 64 letters, digits, '-', '_' and '.'`},
		{"negative cost", "types:\n  deploy: {base: 1}\n  lint:\n    default_cost: -3\n", "loopr.yml:4: types.lint.default_cost: must be >= 0"},
		{"cost not an integer", "loops:\n  plan:\n    default_cost: 1.5\n", `loopr.yml:3: loops.plan.default_cost: must be an integer, got "1.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tt.yaml), "loopr.yml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestOverlay decodes a part of another document over a configuration:
// errors name that document's lines and the key with its prefix, and the
// base is left alone.
func TestOverlay(t *testing.T) {
	t.Parallel()
	base, err := config.Parse([]byte("concurrency: {max_loops: 20}\n"), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	doc := `until: 30
config:
  concurrency: {max_loops: 8}
  scheduler:
    fairness: {enabled: true}
types:
  sync-clone: {base: 100, tier: 8, max_running: 8, conflict_group: git}
bad:
  concurrency:
    max_loops: 0
worse:
  loops:
    ralph: {tier: 1, colour: red}
`
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatal(err)
	}
	part := func(key string) *yaml.Node {
		m := root.Content[0]
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == key {
				return m.Content[i+1]
			}
		}
		t.Fatalf("no %s", key)
		return nil
	}
	c, err := config.Overlay(base, part("config"), "dir/work.yaml", "config")
	if err != nil {
		t.Fatal(err)
	}
	types := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: "types", Line: 6}, part("types")}}
	c, err = config.Overlay(c, types, "dir/work.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Concurrency.MaxLoops != 8 || !c.Scheduler.Fairness.Enabled || c.Policy("sync-clone") != (config.TypePolicy{Tier: 8, ConflictGroup: "git", DefaultCost: 60}) ||
		c.TypeCap("sync-clone") != 8 || c.Base("sync-clone") != 100 {
		t.Errorf("Overlay() = %+v", c)
	}
	if base.Concurrency.MaxLoops != 20 || base.Scheduler.Fairness.Enabled || base.KnownType("sync-clone") {
		t.Errorf("Overlay() changed its base: %+v", base)
	}

	_, err = config.Overlay(base, part("bad"), "dir/work.yaml", "bad")
	if want := "work.yaml:10: bad.concurrency.max_loops: must be > 0"; err == nil || err.Error() != want {
		t.Errorf("Overlay(bad) error = %v, want %q", err, want)
	}
	_, err = config.Overlay(base, part("worse"), "dir/work.yaml", "worse")
	if want := "work.yaml:13: worse.loops.ralph.colour: unknown key"; err == nil || err.Error() != want {
		t.Errorf("Overlay(worse) error = %v, want %q", err, want)
	}
	if c, err := config.Overlay(base, nil, "work.yaml", "config"); err != nil || cmp.Diff(base, c) != "" {
		t.Errorf("Overlay(nil) = %v, %v; want a copy of base", c, err)
	}
}
