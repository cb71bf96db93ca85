package loopmgr

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Orphaned agents.
//
// The lease records an agent's pid once it runs, but a daemon can die
// between starting the agent and committing that pid (the crash suite hits
// this window under load), and validate commands never get one. Such
// processes outlive their daemon and would run on next to the loop's next
// iteration. Every process loopr starts for a loop carries LOOPR_HOME and
// LOOPR_LOOP_ID in its environment (SPEC §6), and so do the processes they
// start, so at recovery the manager finds them in /proc and kills their
// process groups. Where /proc is missing (not Linux) only the lease's pid
// is killed.

// orphanWait bounds the wait for killed orphans to disappear.
const orphanWait = 2 * time.Second

// killOrphans kills every process whose environment names home and one of
// ids (LOOPR_HOME, LOOPR_LOOP_ID), with its process group, and waits until
// they are gone. It returns how many processes it found.
func killOrphans(home string, ids map[string]bool) int {
	if len(ids) == 0 {
		return 0
	}
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	found := findOrphans(home, ids)
	self := os.Getpid()
	selfGroup := syscall.Getpgrp()
	for _, p := range found {
		if p.pgid > 1 && p.pgid != selfGroup {
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
		if p.pid != self {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(orphanWait)
	for len(found) > 0 && time.Now().Before(deadline) {
		if len(findOrphans(home, ids)) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return len(found)
}

// orphan is one process of a loop found in /proc.
type orphan struct {
	pid, pgid int
	loop      string
}

// findOrphans scans /proc for live processes whose environment holds
// LOOPR_HOME=home and LOOPR_LOOP_ID=<one of ids>.
func findOrphans(home string, ids map[string]bool) []orphan {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	wantHome := []byte("LOOPR_HOME=" + home)
	var out []orphan
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 {
			continue // gone, a zombie, or another user's
		}
		var id string
		homeOK := false
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			switch {
			case bytes.Equal(kv, wantHome):
				homeOK = true
			case bytes.HasPrefix(kv, []byte("LOOPR_LOOP_ID=")):
				id = string(kv[len("LOOPR_LOOP_ID="):])
			}
		}
		if !homeOK || !ids[id] {
			continue
		}
		state, pgid, ok := procState(pid)
		if !ok || state == "Z" || state == "X" {
			continue
		}
		out = append(out, orphan{pid: pid, pgid: pgid, loop: id})
	}
	return out
}

// procState returns a process's state letter and process group from
// /proc/<pid>/stat.
func procState(pid int) (state string, pgid int, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:]) // state ppid pgrp ...
	if len(f) < 3 {
		return "", 0, false
	}
	pgid, err = strconv.Atoi(f[2])
	return f[0], pgid, err == nil
}
