package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/config"
)

func TestAPISection(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("api:\n  listen: \"127.0.0.1:7070\"\n  token_file: secrets/token\n"), "/ws/loopr.yml")
	if err != nil {
		t.Fatal(err)
	}
	if c.API.Listen != "127.0.0.1:7070" || c.TokenPath() != filepath.FromSlash("/ws/secrets/token") {
		t.Errorf("api = %+v, token path %q", c.API, c.TokenPath())
	}
	if d := config.Default(); d.API.Listen != "" || d.TokenPath() != "" {
		t.Errorf("default api = %+v: want no TCP listener", d.API)
	}
	abs, _ := config.Parse([]byte("api: {listen: \":0\", token_file: /etc/loopr/token}\n"), "/ws/loopr.yml")
	if abs == nil || abs.TokenPath() != "/etc/loopr/token" {
		t.Errorf("absolute token_file: %+v", abs)
	}

	tests := []struct{ name, yml, want string }{
		{"no port", "api:\n  listen: localhost\n  token_file: t\n", "loopr.yml:2: api.listen: want host:port"},
		{"bad port", "api:\n  listen: \"127.0.0.1:http\"\n  token_file: t\n", `loopr.yml:2: api.listen: port "http": want a number from 0 to 65535`},
		{"port too big", "api:\n  listen: \"127.0.0.1:70000\"\n  token_file: t\n", "loopr.yml:2: api.listen: port \"70000\""},
		{"no token", "api:\n  listen: \"127.0.0.1:7070\"\n", "loopr.yml:1: api.token_file: required with api.listen"},
		{"unknown key", "api:\n  listen: \"127.0.0.1:7070\"\n  token: abc\n", "loopr.yml:3: api.token: unknown key"},
		{"web open without token", "api:\n  web: true\n  web_listen: \"0.0.0.0:7071\"\n", `loopr.yml:3: api.web_listen: "0.0.0.0:7071" is not a loopback address: set api.token_file too`},
		{"web any host without token", "api:\n  web: true\n  web_listen: \":7071\"\n", "api.web_listen: \":7071\" is not a loopback address"},
		{"web bad port", "api:\n  web: true\n  web_listen: \"127.0.0.1:x\"\n", `api.web_listen: port "x"`},
	}
	for _, ok := range []string{"api: {web: true}\n", "api: {web: true, web_listen: \"localhost:7071\"}\n",
		"api: {web: true, web_listen: \"[::1]:0\"}\n", "api: {web: true, web_listen: \"0.0.0.0:7071\", token_file: t}\n"} {
		if _, err := config.Parse([]byte(ok), "loopr.yml"); err != nil {
			t.Errorf("Parse(%q) = %v; want it accepted", ok, err)
		}
	}
	for _, tt := range tests {
		_, err := config.Parse([]byte(tt.yml), "loopr.yml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse() = %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
