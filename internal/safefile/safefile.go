// Package safefile reads files that someone else may have replaced: an
// agent's artifact, a parent artifact, a prompt template, loopr.yml.
//
// Read opens without following a final symbolic link and without
// blocking, checks on the opened descriptor that the file is a regular
// file, and reads at most a limit. So a FIFO put where a file should be
// is refused at once instead of blocking a goroutine (and every write
// transaction behind it) until someone opens the pipe for writing; a
// symbolic link to /proc/self/environ or a secret elsewhere is refused
// instead of copied into feedback, the store and the next prompt; and
// /dev/zero cannot exhaust memory.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Error says why a file was refused. Path is the file as asked for.
type Error struct {
	Path string
	Why  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Why }

// Read returns the content of the regular file at path, or an error when
// the file is missing (wrapping fs.ErrNotExist), is a symbolic link, is
// not a regular file, or is larger than limit bytes (*Error).
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			why := "is a symbolic link; write a regular file there"
			if to, lerr := os.Readlink(path); lerr == nil {
				why = fmt.Sprintf("is a symbolic link to %s; write a regular file there", to)
			}
			return nil, &Error{Path: path, Why: why}
		}
		return nil, err // *fs.PathError: names the path, wraps fs.ErrNotExist
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Path: path, Why: "not a regular file (" + Kind(fi.Mode()) + "); write a regular file there"}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, &Error{Path: path, Why: fmt.Sprintf("larger than %d bytes", limit)}
	}
	return b, nil
}

// Kind names a file mode's type for a person.
func Kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return m.Type().String()
	}
}

// WriteAtomic writes data to path through a temporary file in the same
// directory and a rename, so a reader sees the old file or the new one.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
