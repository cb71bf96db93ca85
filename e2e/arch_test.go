package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps the architecture of STYLE.md: the pure core imports no
// I/O, only store imports bbolt and etcd's client, and the TUI never reaches past the client.
func TestLayering(t *testing.T) {
	t.Parallel()
	const mod = "github.com/loopr-dev/loopr/"
	// pure is what the decision core may not import: no processes,
	// network, files, logger or store (STYLE.md rule 3).
	pure := []string{"os", "os/exec", "net", "net/", "log", "log/slog", "io/ioutil", "go.etcd.io/bbolt"}
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{"loop", append([]string{"github.com/oklog/ulid/v2", mod}, pure...)},
		{"scheduler", append([]string{mod + "store", mod + "config"}, pure...)},
		{"ratelimit", append([]string{mod + "store"}, pure...)},
		{"preset", append([]string{mod + "store", mod + "config", mod + "runner"}, pure...)},
		{"artifact", append([]string{mod + "store"}, pure...)},
		// fanout decides best-of-N groups: loopmgr applies what it says.
		{"fanout", append([]string{mod + "store", mod + "config", mod + "control", mod + "loopmgr"}, pure...)},
		{"transcript", append([]string{mod + "store", mod + "config", mod + "runner", mod + "client"}, pure...)},
		{"tui", []string{"go.etcd.io/bbolt", mod + "store", mod + "loopmgr", mod + "control", mod + "daemon"}},
		{"api", []string{"go.etcd.io/bbolt", mod + "store", mod + "control"}},
		{"client", []string{"go.etcd.io/bbolt", mod + "store", mod + "loopmgr", mod + "control"}},
		// web talks to the daemon only through its Backend (the client): the daemon mounts it.
		{"web", []string{"go.etcd.io/bbolt", mod + "store", mod + "loopmgr", mod + "control", mod + "daemon", mod + "config"}},
		// hooks runs what loopmgr decides: it reaches nothing above it.
		{"hooks", []string{"go.etcd.io/bbolt", mod + "store", mod + "loopmgr", mod + "control", mod + "daemon", mod + "mergequeue"}},
		// trust reads a configuration and the user's trust file: nothing of the daemon's.
		{"trust", []string{"go.etcd.io/bbolt", "os/exec", mod + "store", mod + "control", mod + "loopmgr", mod + "runner", mod + "daemon"}},
	}
	for _, r := range rules {
		// For every loopr package r.pkg depends on (itself included), check
		// its direct imports: what the standard library does inside is not
		// our layering.
		out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../"+r.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", r.pkg, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !strings.HasPrefix(f[0], mod) {
				continue
			}
			for _, imp := range f[1:] {
				for _, bad := range r.forbidden {
					hit := imp == bad
					if strings.HasSuffix(bad, "/") { // a prefix: mod (no loopr package at all) or net/
						hit = strings.HasPrefix(imp, bad)
					}
					if hit {
						t.Errorf("%s (needed by %s) imports %s, forbidden by STYLE.md", f[0], r.pkg, imp)
					}
				}
			}
		}
	}
	// Only store imports bbolt; only store and cluster (sessions, election,
	// the workers' git lock: issue 14) import the etcd client, and the
	// test helper internal/etcdtest (TLS files, enabling etcd's auth);
	// only internal/etcdtest (and its etcdmain binary) runs an etcd server.
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == mod+"store" {
			continue
		}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, "go.etcd.io/bbolt") {
				t.Errorf("%s imports bbolt; only store may", f[0])
			}
			if strings.HasPrefix(imp, "go.etcd.io/etcd/client") && f[0] != mod+"cluster" && f[0] != mod+"internal/etcdtest" {
				t.Errorf("%s imports the etcd client; only store, cluster and the test helper internal/etcdtest may", f[0])
			}
			if strings.HasPrefix(imp, "go.etcd.io/etcd/server") && f[0] != mod+"internal/etcdtest" && f[0] != mod+"internal/etcdtest/etcdmain" {
				t.Errorf("%s imports the etcd server; only internal/etcdtest (tests) may", f[0])
			}
		}
	}
}

// TestOneJSONLibrary (issue 20.6): every package encodes and decodes JSON
// with github.com/go-json-experiment/json (its v1 package where
// encoding/json's wire format and API are kept). encoding/json is allowed
// only in a test that measures or checks against it as an oracle.
func TestOneJSONLibrary(t *testing.T) {
	t.Parallel()
	oracles := map[string]bool{"client/stream_test.go": true}
	out, err := exec.Command("git", "-C", "..", "grep", "-lE", `^\s*(import\s+)?([A-Za-z0-9_.]+\s+)?"encoding/json"\s*$`, "--", "*.go").Output()
	if err != nil && len(out) > 0 {
		t.Fatalf("git grep: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if !oracles[f] {
			t.Errorf("%s imports encoding/json: use github.com/go-json-experiment/json (or its v1 package), see docs/design.md", f)
		}
	}
}
