package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/loopr-dev/loopr/config"
)

// FuzzParse checks that Parse never panics, that every error is one
// *config.Error on one line, and that every accepted configuration is valid
// and survives a round trip through yaml.Marshal. The committed corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(config.Template())
	f.Add([]byte(""))
	f.Add([]byte("types:\n  review: {base: 70, max_running: 3, max_iterations: 10}\n"))
	f.Add([]byte("agent:\n  command: &c [a, b]\nloops:\n  ralph: {agent: *c, timeout_secs: 5}\n"))
	f.Add([]byte("concurrency:\n  max_loops: 0\n  max_loops: 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Parse(data, "loopr.yml")
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse() error %T %v, want *config.Error", err, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Parse() error spans lines: %q", err.Error())
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse() accepted a config that Validate() rejects: %v", err)
		}
		out, err := yaml.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := config.Parse(out, "loopr.yml")
		if err != nil {
			t.Fatalf("Parse(Marshal(c)): %v\n%s", err, out)
		}
		if diff := cmp.Diff(c, again); diff != "" {
			t.Fatalf("Parse(Marshal(c)) mismatch (-want +got):\n%s", diff)
		}
	})
}
