package cli

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// warnUncommitted says on stderr, in one line, when the workspace's
// working tree has uncommitted changes as a new root loop is made: its
// branch starts from the last commit, so the agents will not see them.
// Never an error: without git, or when git fails, it says nothing.
func (e *env) warnUncommitted() {
	if e.cfg == nil || !e.cfg.Git.Worktrees || e.paths.Workspace == "" {
		return
	}
	n := e.uncommittedFiles()
	if n == 0 {
		return
	}
	verb, them := "are", "them"
	if n == 1 {
		verb, them = "is", "it"
	}
	fmt.Fprintf(e.stderr, "loopr: warning: %s in your working tree %s uncommitted; the agents start from the last commit and will not see %s (commit, or `git stash`, first)\n",
		count(n, "file"), verb, them)
}

// uncommittedFiles counts the paths `git status` lists in the workspace,
// loopr's home left out; 0 when it cannot tell.
func (e *env) uncommittedFiles() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", e.paths.Workspace, "status", "--porcelain=v1", "-z", "--untracked-files=normal")
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	home := ""
	if rel, err := filepath.Rel(e.paths.Workspace, e.paths.Home); err == nil && !strings.HasPrefix(rel, "..") {
		home = filepath.ToSlash(rel) + "/"
	}
	n := 0
	recs := bytes.Split(out, []byte{0})
	for i := 0; i < len(recs); i++ {
		rec := string(recs[i])
		if len(rec) < 4 {
			continue
		}
		if rec[0] == 'R' || rec[0] == 'C' {
			i++ // the rename's source follows
		}
		if home != "" && strings.HasPrefix(rec[3:], home) {
			continue
		}
		n++
	}
	return n
}
