package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
)

func TestStoreSection(t *testing.T) {
	t.Parallel()
	if d := config.Default(); d.Store.Backend != "bbolt" || d.Store.Etcd.DialTimeoutSecs != 5 {
		t.Errorf("default store = %+v: want bbolt, dial timeout 5", d.Store)
	}
	c, err := config.Parse([]byte("store:\n  backend: etcd\n  etcd:\n    endpoints: [\"http://127.0.0.1:2379\"]\n    prefix: /loopr/x\n    ca_file: tls/ca.pem\n"), "/ws/loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Backend != "etcd" || c.Store.Etcd.Endpoints[0] != "http://127.0.0.1:2379" || c.StorePath(c.Store.Etcd.CAFile) != filepath.FromSlash("/ws/tls/ca.pem") {
		t.Errorf("store = %+v", c.Store)
	}

	tests := []struct{ name, yml, want string }{
		{"unknown backend", "store:\n  backend: sqlite\n", `loopr.yml:2: store.backend: "sqlite": want bbolt (the file <home>/loopr.db) or etcd`},
		{"no endpoints", "store:\n  backend: etcd\n", "store.etcd.endpoints: required with store.backend etcd"},
		{"bad endpoint", "store:\n  backend: etcd\n  etcd: {endpoints: [\"127.0.0.1:2379\"]}\n", `store.etcd.endpoints[0]: "127.0.0.1:2379": want an http or https URL`},
		{"endpoint port out of range", "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://127.0.0.1:123456\"]}\n", `store.etcd.endpoints[0]: "http://127.0.0.1:123456": port 123456: want a number from 1 to 65535`},
		{"bad prefix", "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], prefix: loopr}\n", `store.etcd.prefix: "loopr": must start with /`},
		{"root prefix", "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], prefix: /}\n", `store.etcd.prefix: "/": must start with / and name the store`},
		{"dial timeout", "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], dial_timeout_secs: 0}\n", "store.etcd.dial_timeout_secs: must be"},
		{"user without password", "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], username: u}\n", "username and password go together"},
		{"cert without key", "store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], cert_file: c.pem}\n", "cert_file and key_file go together"},
		{"unknown key", "store:\n  backend: etcd\n  etcd: {endpoint: x}\n", "store.etcd.endpoint: unknown key"},
	}
	for _, tt := range tests {
		_, err := config.Parse([]byte(tt.yml), "loopr.yml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse() = %v, want an error with %q", tt.name, err, tt.want)
		}
	}

	// A changed password is a change, but its value never shows.
	a, _ := config.Parse([]byte("store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], username: u, password: old-secret}\n"), "loopr.yml")
	b, _ := config.Parse([]byte("store:\n  backend: etcd\n  etcd: {endpoints: [\"http://h:2379\"], username: u, password: new-secret}\n"), "loopr.yml")
	changes := config.Diff(a, b)
	if len(changes) != 1 || changes[0].String() != "store.etcd.password: (hidden) → (hidden)" {
		t.Errorf("Diff(password change) = %v", changes)
	}
}
