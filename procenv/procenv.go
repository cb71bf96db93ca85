// Package procenv builds the environment of the processes loopr starts for
// a loop from loopr.yml: agents, validate commands (in the worktree, in a
// clean checkout, merge.validate) and hooks.
//
// Nothing of the daemon's environment reaches them unless it is allowed
// (Allowed): the base set (Base: PATH, HOME, the locale, the terminal,
// TMPDIR, TZ, SHELL, XDG_* and the CA bundle paths), every LOOPR_*
// variable, and what the agent profile lets through (Profile): its
// preset's own variables (preset.EnvPass, the agent only) and env_pass.
// Then come the profile's own values (the preset's Env, env:), and for the
// agent alone its secrets (ReadSecrets), read at each start. A user's
// GITHUB_TOKEN or AWS keys therefore stay with the daemon unless
// loopr.yml names them.
//
// notify.command and the git commands loopr runs itself keep the daemon's
// whole environment: they act for the user (their desktop, their
// credentials), not for an agent.
//
// Go sets PWD for a child only when exec.Cmd.Env is nil. loopr always passes
// an explicit environment, so without InDir a child would inherit the
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
