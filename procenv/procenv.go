// Package procenv builds the environment of the processes loopr starts:
// agents, validate commands, notify commands.
//
// Go sets PWD for a child only when exec.Cmd.Env is nil. loopr always passes
// an explicit environment, so without this package a child would inherit the
// daemon's PWD while running in its worktree, and a CLI that trusts PWD over
// getcwd (opencode does) would edit the directory the daemon was started in:
// usually the user's own checkout.
package procenv

import (
	"path/filepath"
	"strings"
)

// InDir returns env for a process whose working directory is dir: PWD names
// dir and OLDPWD is dropped (it would name a directory of the daemon's).
// Every other entry keeps its order. env is not modified. A relative dir is
// made absolute; when that fails, PWD is dropped rather than set wrong.
func InDir(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if strings.HasPrefix(kv, "PWD=") || strings.HasPrefix(kv, "OLDPWD=") {
			continue
		}
		out = append(out, kv)
	}
	if dir == "" {
		return out
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return out
	}
	return append(out, "PWD="+abs)
}
