// Package mcp is loopr's MCP server: `loopr mcp` speaks the Model Context
// Protocol over stdio (github.com/modelcontextprotocol/go-sdk) to the agent
// CLI that started it, and forwards each tool call to the daemon (POST
// /v1/mcp on <home>/mcp.sock), which checks it and acts.
//
// An agent's calls are scoped to its loop: the runner gives each agent its
// loop id and a per-loop token, HMAC-SHA256 of the id under a secret the
// daemon keeps in <home>/mcp.secret (mode 0600). The daemon refuses a call
// whose token is not its loop's, a call of a loop whose agent is not
// running, and a call whose target lies outside the loop's subtree (403),
// and journals every call (event kind mcp).
//
// The tools: ask_human (the loop waits for a person, as with
// $LOOPR_QUESTION_FILE), report_progress (Loop.Progress, shown in the TUI
// and the web dashboard), get_task, get_feedback, list_siblings and
// spawn_child (a loop below the caller's own, admitted as any new loop).
package mcp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Names of the server's files in loopr's home, and of the variables that
// tell `loopr mcp` whose calls it forwards.
const (
	SecretFile = "mcp.secret" // the daemon's HMAC key (0600)
	SocketName = "mcp.sock"   // the daemon's MCP socket: POST /v1/mcp only
	TokenFile  = "mcp.token"  // in an iteration directory: that loop's token (0600)
	ServerName = "loopr"      // the server's name in the agent CLI's configuration

	EnvLoop   = "LOOPR_LOOP_ID"
	EnvToken  = "LOOPR_MCP_TOKEN"
	EnvSocket = "LOOPR_MCP_SOCKET"
)

// secretLen is the length of the HMAC key, in bytes.
const secretLen = 32

// Token is loop id's token under secret: hex HMAC-SHA256.
func Token(secret []byte, id string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	return hex.EncodeToString(m.Sum(nil))
}

// Verify reports, in constant time, whether token is loop id's.
func Verify(secret []byte, id, token string) bool {
	want := Token(secret, id)
	return len(secret) > 0 && hmac.Equal([]byte(want), []byte(token))
}

// LoadSecret reads the daemon's secret from <home>/mcp.secret, creating it
// (32 random bytes, mode 0600) when it does not exist. A file other users
// may read or change, or that is not the daemon's user's, is refused: its
// key would let them act as any loop's agent.
func LoadSecret(home string) ([]byte, error) {
	path := filepath.Join(home, SecretFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	switch {
	case err == nil:
		key := make([]byte, secretLen)
		rand.Read(key)
		_, werr := f.Write([]byte(hex.EncodeToString(key) + "\n"))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("mcp secret %s: %w", path, werr)
		}
	case !errors.Is(err, fs.ErrExist):
		return nil, fmt.Errorf("mcp secret %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("mcp secret %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("mcp secret %s: not a regular file: remove it, the daemon makes a new one", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("mcp secret %s: mode %04o lets other users read or change it: run chmod 600 %s", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("mcp secret %s: owned by uid %d, not by the daemon's user (uid %d)", path, st.Uid, os.Geteuid())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mcp secret %s: %w", path, err)
	}
	key, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("mcp secret %s: not a hex key of at least 16 bytes: remove it, the daemon makes a new one (running agents' tokens then stop working)", path)
	}
	return key, nil
}
