package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/config"
)

// Tests of the keys the daemon reads: retention, webhooks, and Diff (what a
// hot reload reports).

func TestParseRetentionAndWebhooks(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte(`
retention:
  days: 7
webhooks:
  - url: https://hooks.example.com/loopr
    events: [complete, failed, awaiting_approval]
  - {url: "http://127.0.0.1:9000/x", events: [expired]}
`), "loopr.yml")
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	want := []config.Webhook{
		{URL: "https://hooks.example.com/loopr", Events: []string{"complete", "failed", "awaiting_approval"}},
		{URL: "http://127.0.0.1:9000/x", Events: []string{"expired"}},
	}
	if diff := cmp.Diff(want, c.Webhooks); diff != "" {
		t.Errorf("Webhooks mismatch (-want +got):\n%s", diff)
	}
	if c.Retention.Days != 7 {
		t.Errorf("Retention.Days = %d, want 7", c.Retention.Days)
	}
	if d := config.Default(); d.Retention.Days != 30 || d.Webhooks != nil {
		t.Errorf("Default() retention %d webhooks %v; want 30, none", d.Retention.Days, d.Webhooks)
	}
	c, err = config.Parse([]byte("webhooks: []\nretention: {days: 0}\n"), "loopr.yml")
	if err != nil || c.Webhooks != nil || c.Retention.Days != 0 {
		t.Errorf("Parse(empty list, days 0) = %v, %v, %v; want nil webhooks, 0", c.Webhooks, c.Retention, err)
	}
}

func TestWebhookErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml, want string
	}{
		{"file scheme", "webhooks:\n  - url: file:///etc/passwd\n    events: [complete]\n",
			`loopr.yml:2: webhooks[0].url: must be an http:// or https:// URL, got scheme "file"`},
		{"no scheme", "webhooks:\n  - url: hooks.example.com\n    events: [complete]\n",
			`loopr.yml:2: webhooks[0].url: must be an http:// or https:// URL, got scheme ""`},
		{"no host", "webhooks:\n  - url: 'https:///x'\n    events: [complete]\n",
			"loopr.yml:2: webhooks[0].url: must name a host"},
		{"port out of range", "webhooks:\n  - events: [complete]\n    url: http://hooks.example.com:99999/x\n",
			"loopr.yml:3: webhooks[0].url: port 99999: want a number from 1 to 65535"},
		{"port zero", "webhooks:\n  - url: http://127.0.0.1:0/x\n    events: [complete]\n",
			"loopr.yml:2: webhooks[0].url: port 0: want a number from 1 to 65535"},
		{"empty port", "webhooks:\n  - url: 'http://h:/x'\n    events: [complete]\n",
			"loopr.yml:2: webhooks[0].url: port missing after the colon: want a number from 1 to 65535, or no colon"},
		{"port only", "webhooks:\n  - url: 'http://:8080/x'\n    events: [complete]\n",
			"loopr.yml:2: webhooks[0].url: must name a host"},
		{"empty url", "webhooks:\n  - events: [complete]\n",
			"loopr.yml:2: webhooks[0].url: must not be empty"},
		{"unknown event", "webhooks:\n  - url: https://h/x\n    events:\n      - complete\n      - finished\n",
			`loopr.yml:5: webhooks[0].events[1]: unknown event "finished" (known: created, pending, paused, running, merging, awaiting_approval, awaiting_review, complete, failed, cancelled, expired, invalidated, rate_limited, needs_human, tree_complete)`},
		{"duplicate event", "webhooks:\n  - url: https://h/x\n    events: [complete, complete]\n",
			`loopr.yml:3: webhooks[0].events[1]: duplicate event "complete"`},
		{"no events", "webhooks:\n  - url: https://h/x\n",
			"loopr.yml:2: webhooks[0].events: must list at least one event (created, pending, paused, running, merging, awaiting_approval, awaiting_review, complete, failed, cancelled, expired, invalidated, rate_limited, needs_human, tree_complete)"},
		{"unknown key", "webhooks:\n  - url: https://h/x\n    events: [complete]\n    secret: x\n",
			"loopr.yml:4: webhooks[0].secret: unknown key"},
		{"not a mapping", "webhooks:\n  - https://h/x\n",
			`loopr.yml:2: webhooks[0]: must be a mapping, got "https://h/x"`},
		{"not a list", "webhooks: https://h/x\n",
			`loopr.yml:1: webhooks: must be a list of mappings, got "https://h/x"`},
		{"second item", "webhooks:\n  - {url: https://h/x, events: [complete]}\n  - {url: ftp://h/x, events: [complete]}\n",
			`loopr.yml:3: webhooks[1].url: must be an http:// or https:// URL, got scheme "ftp"`},
		{"negative retention", "retention:\n  days: -1\n", "loopr.yml:2: retention.days: must be >= 0"},
		{"retention type", "retention:\n  days: forever\n", `loopr.yml:2: retention.days: must be an integer, got "forever"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(tt.yaml), "/x/loopr.yml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() error = %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	a := config.Default()
	if got := config.Diff(a, config.Default()); len(got) != 0 {
		t.Errorf("Diff(Default, Default) = %v, want none", got)
	}
	b, err := config.Parse([]byte(`
scheduler:
  priority: {ralph: 120}
concurrency:
  per_type: {plan: 1}
agent:
  command: [codex, exec]
loops:
  ralph: {validate: []}
webhooks:
  - {url: "https://h/x", events: [complete]}
types:
  review: {base: 70}
`), "loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range config.Diff(a, b) {
		got = append(got, c.String())
	}
	want := []string{
		"scheduler.priority.ralph: 100 → 120",
		"concurrency.per_type.plan: 2 → 1",
		"agent.command: [] → [codex, exec]",
		"loops.ralph.validate: [go test ./...] → []",
		"webhooks[0]: (none) → {url: 'https://h/x', events: [complete]}",
		"types.review: (none) → {base: 70, max_running: 0, max_iterations: 10, require_approval: false, validate: [], validate_in: worktree}",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Diff() mismatch (-want +got):\n%s", diff)
	}
	back := config.Diff(b, a)
	if len(back) != len(want) || !strings.HasSuffix(back[len(back)-1].String(), "→ (none)") {
		t.Errorf("Diff(b, a) = %v; want the same keys reversed", back)
	}
}
