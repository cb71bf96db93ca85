package config

import (
	"errors"
	"fmt"

	"github.com/loopr-dev/loopr/internal/safefile"
)

// MaxFileSize bounds how much of loopr.yml is read. A real configuration
// is a few KiB; the cap keeps a file replaced by /dev/zero or a runaway
// generator from exhausting the daemon's memory on a reload.
const MaxFileSize = 1 << 20

// ReadFile reads the configuration file at path, following a symlink (a
// dotfiles repository may hold it) but only from a regular file of at most
// MaxFileSize: a FIFO would block the start, a reload or `config check`
// forever, /dev/zero would fill the memory, and /proc/self/environ would
// put the environment into the parse error. Those are refused with an
// *Error naming the file. A missing file is an error wrapping
// fs.ErrNotExist, as os.ReadFile's.
func ReadFile(path string) ([]byte, error) {
	data, err := safefile.ReadFollow(path, MaxFileSize)
	var nr *safefile.NotRegularError
	var tl *safefile.TooLargeError
	switch {
	case errors.As(err, &nr):
		return nil, &Error{File: baseName(path), Msg: nr.Describe() + ", not a regular file; make it a regular file"}
	case errors.As(err, &tl) && tl.Size > tl.Limit:
		return nil, &Error{File: baseName(path), Msg: fmt.Sprintf("%d bytes; the limit is %d", tl.Size, tl.Limit)}
	case errors.As(err, &tl):
		return nil, &Error{File: baseName(path), Msg: fmt.Sprintf("larger than %d bytes, the limit", tl.Limit)}
	}
	return data, err // *fs.PathError: names the path, wraps fs.ErrNotExist
}
