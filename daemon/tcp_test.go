package daemon

import (
	"github.com/go-json-experiment/json/v1"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
)

func TestAPIToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name, content string
		mode          os.FileMode
		want          string // "" = accepted
	}{
		{"private", good + "\n", 0o600, ""},
		{"read-only", good, 0o400, ""},
		{"world-readable", good, 0o644, "mode 0644 lets other users read or change the token; run chmod 600"},
		{"group-readable", good, 0o640, "mode 0640"},
		{"world-writable", good, 0o602, "mode 0602"},
		{"empty", "\n", 0o600, "empty"},
		{"short", "secret", 0o600, "token too short (6 characters, want at least 16"},
		{"two lines", good + "\n" + good, 0o600, "more than one line"},
		{"missing", "", 0, "no such file or directory"},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-"))
		if tt.mode != 0 {
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tt.mode)
		}
		cfg := config.Default()
		cfg.API = config.API{Listen: "127.0.0.1:0", TokenFile: path}
		tok, err := apiToken(cfg)
		switch {
		case tt.want == "" && (err != nil || string(tok) != good):
			t.Errorf("%s: apiToken() = %q, %v; want the token", tt.name, tok, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "api.token_file "+path)):
			t.Errorf("%s: apiToken() = %v; want an error naming the file and %q", tt.name, err, tt.want)
		}
	}
	if tok, err := apiToken(config.Default()); tok != nil || err != nil {
		t.Errorf("no listener: apiToken() = %q, %v; want nothing", tok, err)
	}
}

func TestBearer(t *testing.T) {
	t.Parallel()
	token := []byte("0123456789abcdef0123456789abcdef")
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := bearer(token, slog.New(slog.DiscardHandler), ok)
	tests := []struct {
		name, auth string
		pass       bool
	}{
		{"right token", "Bearer " + string(token), true},
		{"scheme in any case", "bearer " + string(token), true},
		{"no header", "", false},
		{"empty token", "Bearer ", false},
		{"wrong token", "Bearer " + strings.Repeat("x", len(token)), false},
		{"prefix of the token", "Bearer " + string(token[:10]), false},
		{"token and more", "Bearer " + string(token) + "x", false},
		{"basic auth", "Basic " + string(token), false},
		{"no scheme", string(token), false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/v1/status", nil)
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if tt.pass {
			if w.Code != http.StatusTeapot {
				t.Errorf("%s: %d, want the request served", tt.name, w.Code)
			}
			continue
		}
		var e api.Error
		if w.Code != http.StatusUnauthorized || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Err.Code != api.CodeUnauthorized ||
			w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %q; want 401 unauthorized JSON with WWW-Authenticate", tt.name, w.Code, w.Body)
		}
	}
}
