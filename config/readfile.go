package config

import (
	"path/filepath"

	"github.com/loopr-dev/loopr/internal/safefile"
)

// MaxFileSize bounds how much of loopr.yml is read. A real configuration
// is a few KiB; the cap keeps a file replaced by /dev/zero or a runaway
// generator from exhausting the daemon's memory on a reload.
const MaxFileSize = 1 << 20

// ReadFile reads the configuration file at path as safefile.Read does: a
// FIFO put where loopr.yml should be is refused at once instead of
// hanging the daemon's start, its reload or `loopr config check`. A
// missing file is an error wrapping fs.ErrNotExist, as os.ReadFile's.
// (loopr.yml may be a symbolic link into a dotfiles repository, so the
// link is followed; the file it names must be regular.)
func ReadFile(path string) ([]byte, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return safefile.Read(path, MaxFileSize)
}
