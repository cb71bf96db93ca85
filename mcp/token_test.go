package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTokenVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	tok := Token(secret, "loopA")
	tests := []struct {
		name        string
		secret      []byte
		id, token   string
		wantAllowed bool
	}{
		{"its own loop", secret, "loopA", tok, true},
		{"another loop's id", secret, "loopB", tok, false},
		{"another secret", []byte("another secret of 32 bytes......"), "loopA", tok, false},
		{"empty token", secret, "loopA", "", false},
		{"no secret", nil, "loopA", Token(nil, "loopA"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Verify(tc.secret, tc.id, tc.token); got != tc.wantAllowed {
				t.Errorf("Verify() = %v, want %v", got, tc.wantAllowed)
			}
		})
	}
}

func TestLoadSecret(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	first, err := LoadSecret(home)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(home, SecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file %v, mode %v; want 0600", err, fi.Mode())
	}
	again, err := LoadSecret(home)
	if err != nil || string(again) != string(first) || len(first) != secretLen {
		t.Fatalf("second LoadSecret() = %x, %v; want the same %d-byte key %x", again, err, secretLen, first)
	}
	if err := os.Chmod(filepath.Join(home, SecretFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(home); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("LoadSecret() of a world-readable secret: %v; want refused naming chmod 600", err)
	}
}
