// Package workspace finds the repository loopr works on and the home
// directory that holds its state (SPEC §1).
//
// The workspace is the nearest directory at or above the current one that
// holds loopr.yml; failing that, the root of the enclosing git repository
// (found the way git finds it, by walking up to a .git entry); failing that,
// the current directory. The home is <workspace>/.loopr unless --home or
// LOOPR_HOME says otherwise.
package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ConfigName is the file name of the configuration in a workspace.
const ConfigName = "loopr.yml"

// Paths are the locations loopr uses. All are absolute.
type Paths struct {
	Workspace string // the repository worked on
	Home      string // <workspace>/.loopr by default
	Config    string // loopr.yml in use ("" when none exists and none was named)
	ConfigSet bool   // the config was named explicitly (--config); a missing file is then an error
}

// DB is the bbolt store file.
func (p Paths) DB() string { return filepath.Join(p.Home, "loopr.db") }

// Socket is the daemon's unix socket.
func (p Paths) Socket() string { return filepath.Join(p.Home, "loopr.sock") }

// PIDFile is written by a running daemon.
func (p Paths) PIDFile() string { return filepath.Join(p.Home, "daemon.pid") }

// Logs is the daemon's log directory.
func (p Paths) Logs() string { return filepath.Join(p.Home, "logs") }

// Loops holds per-loop iteration directories.
func (p Paths) Loops() string { return filepath.Join(p.Home, "loops") }

// LoopDir is one loop's directory. id must be a valid loop id.
func (p Paths) LoopDir(id string) string { return filepath.Join(p.Home, "loops", id) }

// Worktrees holds git worktrees of running loops.
func (p Paths) Worktrees() string { return filepath.Join(p.Home, "worktrees") }

// Resolve finds the paths from the current directory cwd, an optional
// --home value and an optional --config value. LOOPR_HOME is read from env.
func Resolve(cwd, home, config string, getenv func(string) string) (Paths, error) {
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		return Paths{}, fmt.Errorf("workspace: %w", err)
	}
	var p Paths
	if config != "" {
		abs, err := filepath.Abs(config)
		if err != nil {
			return Paths{}, fmt.Errorf("--config: %w", err)
		}
		p.Config, p.ConfigSet = abs, true
		p.Workspace = filepath.Dir(abs)
	} else if dir, ok := findUp(cwd, ConfigName); ok {
		p.Workspace = dir
		p.Config = filepath.Join(dir, ConfigName)
	} else if dir, ok := findUp(cwd, ".git"); ok {
		p.Workspace = dir
	} else {
		p.Workspace = cwd
	}
	if home == "" && getenv != nil {
		home = getenv("LOOPR_HOME")
	}
	if home == "" {
		home = filepath.Join(p.Workspace, ".loopr")
	}
	if p.Home, err = filepath.Abs(home); err != nil {
		return Paths{}, fmt.Errorf("--home: %w", err)
	}
	return p, nil
}

// findUp returns the nearest directory at or above dir that holds name.
func findUp(dir, name string) (string, bool) {
	for {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return dir, true
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
