package control_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/trust"
	"github.com/loopr-dev/loopr/workspace"
)

// TestStartTrust: a loopr.yml that only points the store at an etcd
// cluster, or opens api.listen, is refused until trusted; the direct
// CLI's and the daemon's OpenStore do not dial the untrusted endpoints.
func TestStartTrust(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			dialed <- struct{}{}
			c.Close()
		}
	}()
	dir := t.TempDir()
	file := filepath.Join(dir, "loopr.yml")
	yml := "store: {backend: etcd, etcd: {endpoints: [\"http://" + ln.Addr().String() + "\"], dial_timeout_secs: 2}}\n"
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv(trust.AllEnv, "")
	_, err = control.OpenStore(cfg, workspace.Paths{Workspace: dir, Home: filepath.Join(dir, ".loopr")}, store.Options{})
	if err == nil || !strings.Contains(err.Error(), "store.etcd") || !strings.Contains(err.Error(), "loopr trust") {
		t.Fatalf("OpenStore of an untrusted etcd store: %v, want an error naming store.etcd and loopr trust", err)
	}
	select {
	case <-dialed:
		t.Fatal("OpenStore dialed the endpoint of an untrusted loopr.yml")
	case <-time.After(100 * time.Millisecond):
	}
	env := map[string]string{"XDG_CONFIG_HOME": xdg}
	getenv := func(k string) string { return env[k] }
	api, err := config.Parse([]byte("api: {listen: \"127.0.0.1:0\", token_file: tok}\n"), file)
	if err != nil {
		t.Fatal(err)
	}
	if err := control.StartTrust(api, getenv); err == nil || !strings.Contains(err.Error(), "api.listen") {
		t.Errorf("StartTrust of an untrusted api.listen: %v, want an error naming api.listen", err)
	}
	if err := (trust.Store{Path: filepath.Join(xdg, "loopr", "trusted")}).Add(trust.Fingerprint(cfg), file); err != nil {
		t.Fatal(err)
	}
	if err := control.StartTrust(cfg, getenv); err != nil {
		t.Errorf("StartTrust once trusted: %v", err)
	}
	env[trust.AllEnv] = "1"
	if err := control.StartTrust(api, getenv); err != nil {
		t.Errorf("StartTrust with LOOPR_TRUST_ALL=1: %v", err)
	}
}
