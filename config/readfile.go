package config

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// MaxFileSize bounds how much of loopr.yml is read. A real configuration
// is a few KiB; the cap keeps a file replaced by /dev/zero or a runaway
// generator from exhausting the daemon's memory on a reload.
const MaxFileSize = 1 << 20

// ReadFile reads the configuration file at path, refusing what is not a
// regular file. It opens without blocking, so a FIFO put where loopr.yml
// should be is refused at once instead of hanging the daemon's start, its
// reload or `loopr config check` until someone writes to the pipe. A
// missing file is an error wrapping fs.ErrNotExist, as os.ReadFile's.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *fs.PathError: names the path, wraps fs.ErrNotExist
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s); loopr.yml must be a plain file", path, fileKind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes; is it the right file?", path, MaxFileSize)
	}
	return data, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	default:
		return m.Type().String()
	}
}
