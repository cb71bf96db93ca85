package config_test

import (
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
)

// TestReference: every key of the template, in file order, with its value
// as written and its comment; sections have no value; the notes above
// quotas, webhooks and types carry their examples.
func TestReference(t *testing.T) {
	t.Parallel()
	ref := config.Reference()
	byKey := map[string]config.KeyDoc{}
	for _, k := range ref {
		if _, dup := byKey[k.Key]; dup {
			t.Errorf("key %s twice", k.Key)
		}
		byKey[k.Key] = k
		if k.Meaning == "" {
			t.Errorf("%s: no meaning", k.Key)
		}
		if k.Section != (k.Default == "") {
			t.Errorf("%s: section %v with default %q", k.Key, k.Section, k.Default)
		}
	}
	for key, want := range map[string]string{
		"concurrency.max_loops":    "50",
		"agent.preset":             "claude",
		"agent.command":            "[]",
		"agent.rate_limit_pattern": `'` + config.DefaultRateLimitPattern + `'`,
		"loops.ralph.validate":     `["go test ./..."]`,
		"loops.ralph.prompt":       `""`,
		"webhooks":                 "[]",
	} {
		if got := byKey[key].Default; got != want {
			t.Errorf("%s: default %q, want %q", key, got, want)
		}
	}
	if ref[0].Key != "scheduler" || !ref[0].Section {
		t.Errorf("first key %+v, want the scheduler section", ref[0])
	}
	if n := byKey["webhooks"].Note; !strings.Contains(n, "For example:") || !strings.Contains(n, "https://hooks.example.com/loopr") {
		t.Errorf("webhooks note %q lacks its example", n)
	}
}
