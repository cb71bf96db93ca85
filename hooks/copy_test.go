package hooks_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/hooks"
	"github.com/loopr-dev/loopr/internal/testslack"
)

func write(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// TestCopy: listed files and globs are copied with their mode; what is
// not a regular file of the workspace is refused and reported — a
// symlink out of it, a FIFO (without blocking), a directory, a path
// outside — and a missing file is reported; nothing fails.
func TestCopy(t *testing.T) {
	t.Parallel()
	ws, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, ".env"), "SECRET=1\n", 0o600)
	write(t, filepath.Join(ws, "config", "local.yml"), "a: 1\n", 0o644)
	write(t, filepath.Join(ws, "config", "other.yml"), "b: 2\n", 0o644)
	write(t, filepath.Join(outside, "passwd"), "root\n", 0o644)
	if err := os.Symlink(filepath.Join(outside, "passwd"), filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".env", filepath.Join(ws, "inner")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan hooks.CopyReport, 1)
	go func() {
		done <- hooks.Copy(ws, dst, []string{".env", "config/*.yml", "escape", "inner", "pipe", "config", "../x", "missing.yml"})
	}()
	var rep hooks.CopyReport
	select {
	case rep = <-done:
	case <-time.After(testslack.Scale(30 * time.Second)):
		t.Fatal("Copy blocked (on the FIFO?)")
	}
	if diff := cmp.Diff([]string{".env", "config/local.yml", "config/other.yml", "inner"}, rep.Copied); diff != "" {
		t.Errorf("Copied mismatch (-want +got):\n%s", diff)
	}
	for _, want := range []string{"escape: leads out of the workspace", "pipe: not a regular file", "config: a directory", "../x: outside the workspace", "missing.yml: no such file"} {
		if !slices.ContainsFunc(rep.Refused, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("Refused %q lacks %q", rep.Refused, want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dst, ".env")); err != nil || string(b) != "SECRET=1\n" {
		t.Errorf(".env in the worktree: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, ".env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf(".env mode %v, %v; want 0600", fi.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "escape")); err == nil {
		t.Errorf("the escaping symlink was copied")
	}
	if s := rep.String(); !strings.HasPrefix(s, "worktree.copy: copied .env, ") || !strings.Contains(s, "not copied: ") {
		t.Errorf("String() = %q", s)
	}
}

// TestCopyDoesNotWriteThroughTheCheckout: a directory of the worktree
// that is a symlink out of it (the repository holds one) is not written
// through.
func TestCopyDoesNotWriteThroughTheCheckout(t *testing.T) {
	t.Parallel()
	ws, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "config", "local.yml"), "a: 1\n", 0o644)
	if err := os.Symlink(outside, filepath.Join(dst, "config")); err != nil {
		t.Fatal(err)
	}
	rep := hooks.Copy(ws, dst, []string{"config/local.yml"})
	if len(rep.Copied) != 0 || len(rep.Refused) != 1 {
		t.Errorf("Copy() = %+v; want config/local.yml refused", rep)
	}
	if _, err := os.Stat(filepath.Join(outside, "local.yml")); err == nil {
		t.Errorf("the file was written outside the worktree")
	}
}
