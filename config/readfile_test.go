package config_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/testslack"
)

// TestLoadRefusesWhatIsNotARegularFile: loopr.yml replaced by a FIFO, a
// link to /dev/zero or to /proc/self/environ, or a huge file is refused at
// once with one line naming the file, never read (no hang, no memory
// blow-up, no environment in the error); a symlink to a regular file is
// followed.
func TestLoadRefusesWhatIsNotARegularFile(t *testing.T) {
	t.Setenv("LOOPR_CONFIG_TEST_SECRET", "cfg-env-marker-91d2")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo", "loopr.yml")
	zero := filepath.Join(dir, "zero", "loopr.yml")
	environ := filepath.Join(dir, "environ", "loopr.yml")
	huge := filepath.Join(dir, "huge", "loopr.yml")
	real := filepath.Join(dir, "real.yml")
	linked := filepath.Join(dir, "linked", "loopr.yml")
	for _, p := range []string{fifo, zero, environ, huge, linked} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{zero: "/dev/zero", environ: "/proc/self/environ", linked: real} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(huge, bytes.Repeat([]byte("# x\n"), config.MaxFileSize/4+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("concurrency:\n  max_loops: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for path, want := range map[string]string{
		fifo:    "loopr.yml: a named pipe (FIFO), not a regular file; make it a regular file",
		zero:    "loopr.yml: a character device, not a regular file; make it a regular file",
		huge:    "loopr.yml: 1048580 bytes; the limit is 1048576",
		environ: "loopr.yml: a /proc pseudo-file, not a regular file; make it a regular file",
	} {
		done := make(chan error, 1)
		go func() { _, err := config.Load(path); done <- err }()
		select {
		case err := <-done:
			var ce *config.Error
			if !errors.As(err, &ce) || err.Error() != want {
				t.Errorf("config.Load(%s) = %v, want the *config.Error %q", path, err, want)
			}
			if err != nil && strings.Contains(err.Error(), "cfg-env-marker") {
				t.Errorf("the error carries the environment: %v", err)
			}
		case <-time.After(testslack.Scale(5 * time.Second)):
			t.Fatalf("config.Load(%s) blocked for 5s", path)
		}
	}
	c, err := config.Load(linked)
	if err != nil || c.Concurrency.MaxLoops != 7 {
		t.Fatalf("config.Load(symlink to a regular file) = %v, %v; want max_loops 7", c, err)
	}
}
