package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("hello"), 0o600)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, make([]byte, 11), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(plain, link)
	environ := filepath.Join(dir, "environ")
	os.Symlink("/proc/self/environ", environ)

	if b, err := Read(plain, 10); err != nil || string(b) != "hello" {
		t.Errorf("Read(plain) = %q, %v; want hello", b, err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
	cases := []struct{ name, path, want string }{
		{"too big", big, "larger than 10 bytes"},
		{"fifo", fifo, "not a regular file (a FIFO)"},
		{"device", "/dev/zero", "not a regular file (a device)"},
		{"directory", dir, "not a regular file (a directory)"},
		{"symlink", link, "is a symbolic link to " + plain},
		{"environ", environ, "is a symbolic link to /proc/self/environ"},
	}
	for _, tc := range cases {
		start := time.Now()
		b, err := Read(tc.path, 10)
		var se *Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) || b != nil {
			t.Errorf("%s: Read = %q, %v; want *Error with %q", tc.name, b, err, tc.want)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: Read took %v (it must never block)", tc.name, took)
		}
	}
}

func TestWriteAtomic(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "a", "b.md")
	if err := WriteAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Read(p, 10)
	if err != nil || string(b) != "two" {
		t.Errorf("after two writes: %q, %v; want two", b, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("%d files left in the directory, want 1 (no temporaries)", len(entries))
	}
}
