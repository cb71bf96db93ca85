//go:build linux

package contain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process as /proc/<pid>/stat shows it.
type proc struct {
	pid, ppid, pgid int
	state           byte
	start           uint64 // clock ticks after boot: with pid, names the process
}

// snapshot reads every process's stat line.
func snapshot() map[int]proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make(map[int]proc, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readStat(pid); ok {
			out[pid] = p
		}
	}
	return out
}

// readStat parses /proc/<pid>/stat: pid (comm) state ppid pgrp ...; comm
// may hold spaces and parentheses.
func readStat(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || f[0] == "" {
		return proc{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return proc{}, false
	}
	p := proc{pid: pid, ppid: ppid, pgid: pgid, state: f[0][0]}
	if len(f) > 19 { // field 22, starttime
		p.start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return p, true
}

func (p proc) dead() bool { return p.state == 'Z' || p.state == 'X' }

// loopEnv returns the LOOPR_HOME and LOOPR_LOOP_ID in pid's environment
// ("" when absent or unreadable).
func loopEnv(pid int) (home, loop string) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", ""
	}
	for kv := range bytes.SplitSeq(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("LOOPR_HOME=")); ok {
			home = string(v)
		} else if v, ok := bytes.CutPrefix(kv, []byte("LOOPR_LOOP_ID=")); ok {
			loop = string(v)
		}
	}
	return home, loop
}

// cwdWithin reports whether pid's working directory is dir or below it.
func cwdWithin(pid int, dir string) bool {
	if dir == "" {
		return false
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return false
	}
	cwd = strings.TrimSuffix(cwd, " (deleted)")
	return cwd == dir || strings.HasPrefix(cwd, dir+string(filepath.Separator))
}

// Match names the processes KillMatching kills: those whose environment
// holds LOOPR_HOME=Home and LOOPR_LOOP_ID=Loop (any loop id when Loop is "").
type Match struct {
	Home string
	Loop string
	// StartedBy, if not 0, takes only processes started at or before
	// this clock tick after boot (and everything below them).
	StartedBy uint64
}

// KillMatching kills every live process m names and everything below it
// (a child that cleared its environment is still its parent's), with the
// process groups they lead (never the caller's), and waits up to KillWait
// until none is left. It returns how many processes it found. Without
// /proc it finds nothing.
func KillMatching(m Match) int {
	if abs, err := filepath.Abs(m.Home); err == nil {
		m.Home = abs
	}
	self, selfGroup := os.Getpid(), syscall.Getpgrp()
	find := func() []proc {
		procs := snapshot()
		children := map[int][]int{}
		for pid, p := range procs {
			children[p.ppid] = append(children[p.ppid], pid)
		}
		seen := map[int]bool{self: true}
		var out []proc
		var add func(pid int)
		add = func(pid int) {
			if seen[pid] {
				return
			}
			seen[pid] = true
			if p := procs[pid]; !p.dead() {
				out = append(out, p)
			}
			for _, c := range children[pid] {
				add(c)
			}
		}
		for pid, p := range procs {
			if seen[pid] || p.dead() {
				continue
			}
			if m.StartedBy != 0 && p.start > m.StartedBy {
				continue
			}
			if home, loop := loopEnv(pid); home == m.Home && loop != "" && (m.Loop == "" || loop == m.Loop) {
				add(pid)
			}
		}
		return out
	}
	found := find()
	if len(found) == 0 {
		return 0
	}
	deadline := time.Now().Add(KillWait)
	for left := found; len(left) > 0 && time.Now().Before(deadline); left = find() {
		ours := make(map[int]bool, len(left))
		for _, p := range left {
			ours[p.pid] = true
		}
		for _, p := range left {
			// A group is killed only when its leader is one of these: a
			// process may have joined a group that is not the loop's.
			if p.pgid > 1 && p.pgid != selfGroup && ours[p.pgid] {
				_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return len(found)
}

// KillStrays kills the processes that left an iteration of loop and were
// reparented to the daemon (the subreaper): children of the daemon that it
// did not start and that are not in its own process group (its git
// commands), with everything below them. A stray belongs to loop when its
// environment's LOOPR_LOOP_ID says so or, having cleared it, when its
// working directory is within worktree ("" when the loop runs in the
// user's workspace, which is no evidence); a stray nobody can claim is
// killed once no process started through the jail runs. It returns how
// many processes it killed. Without the subreaper it does nothing.
func (j *Jail) KillStrays(loop, worktree string) int {
	if j == nil || !j.subreaper {
		return 0
	}
	killed := map[int]bool{}
	deadline := time.Now().Add(KillWait)
	for {
		// No start may be between clone and registration meanwhile: its
		// child would look like a stray no loop can claim.
		started.mu.Lock()
		victims := j.strays(loop, worktree)
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed[pid] = true
		}
		started.mu.Unlock()
		if len(victims) == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
		j.reap()
	}
	return len(killed)
}

// strays lists the live processes KillStrays must kill now.
func (j *Jail) strays(loop, worktree string) []int {
	procs := snapshot()
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	started.state.Lock()
	var roots []int
	for _, pid := range children[j.self] {
		if !started.pids[pid] && !started.guards[pid] && procs[pid].pgid != j.pgid {
			roots = append(roots, pid)
		}
	}
	idle := len(started.pids) == 0
	started.state.Unlock()

	var out []int
	// owner is the loop a process belongs to: its own LOOPR_LOOP_ID, else
	// its parent's within the stray tree; "?" for none.
	var walk func(pid int, parentOwner string)
	walk = func(pid int, parentOwner string) {
		owner := parentOwner
		if home, id := loopEnv(pid); id != "" && home == j.home {
			owner = id
		} else if id != "" {
			owner = "\x00another home" // never this jail's
		} else if owner == "?" && cwdWithin(pid, worktree) {
			owner = loop
		}
		if !procs[pid].dead() && (owner == loop || owner == "?" && idle) {
			out = append(out, pid)
		}
		for _, c := range children[pid] {
			walk(c, owner)
		}
	}
	for _, r := range roots {
		walk(r, "?")
	}
	return out
}

// Run reaps the strays that exited, until ctx ends: on every SIGCHLD and
// every second. It waits only for zombies the daemon did not start through
// the jail and that are not in its process group, so os/exec's own Wait
// never loses its child. Without the subreaper it only waits for ctx.
func (j *Jail) Run(ctx context.Context) error {
	if j == nil || !j.subreaper {
		<-ctx.Done()
		return nil
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			j.reap()
			return nil
		case <-sig:
		case <-tick.C:
		}
		j.reap()
		j.recordStrays()
		// SIGCHLDs come in bursts (every git command); one scan covers many.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// reap waits for every zombie child that is a stray.
func (j *Jail) reap() int {
	started.mu.Lock() // no start is between clone and registration
	defer started.mu.Unlock()
	n := 0
	for pid, p := range snapshot() {
		if p.ppid != j.self || p.state != 'Z' || p.pgid == j.pgid {
			continue
		}
		if isStarted(pid) {
			continue
		}
		var ws syscall.WaitStatus
		if got, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); got == pid {
			n++
		}
	}
	return n
}

// strayFile is where the daemon keeps the strays it has (pid and start
// time, a line each) when no cgroup holds them: after a crash, nothing else
// names a detached process that cleared its environment.
const strayFile = "strays"

// recordStrays writes the daemon's current strays to the home when they
// changed: children it did not start, outside its process group.
func (j *Jail) recordStrays() {
	if j.Mode() == ModeCgroup {
		return
	}
	var lines []string
	started.mu.Lock() // as in KillStrays: no half-started child is a stray
	for pid, p := range snapshot() {
		if p.ppid == j.self && !p.dead() && p.pgid != j.pgid && !isStarted(pid) {
			lines = append(lines, fmt.Sprintf("%d %d", pid, p.start))
		}
	}
	started.mu.Unlock()
	sort.Strings(lines)
	if len(lines) > 0 {
		// Which daemon recorded them, for its guard (a line older
		// daemons' Recover skips: it is not "pid start").
		lines = append([]string{"daemon " + j.inst}, lines...)
	}
	rec := strings.Join(lines, "\n")
	if rec == j.recorded {
		return
	}
	path := filepath.Join(j.home, strayFile)
	var err error
	if rec == "" {
		err = os.Remove(path)
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	} else {
		err = writeRecord(path, rec)
	}
	if err != nil {
		j.log.Warn("record stray processes", "err", err)
		return
	}
	j.recorded = rec
}

// killRecordedStrays kills the strays a previous daemon of this home
// recorded, if they still run (same pid, same start time), with
// everything below them. It returns how many processes it killed.
func (j *Jail) killRecordedStrays() int {
	path := filepath.Join(j.home, strayFile)
	b, err := readSmall(path)
	if err != nil {
		return 0
	}
	defer os.Remove(path)
	return killStrayLines(strings.Split(string(b), "\n"), j.self)
}

// killStrayLines kills the processes the lines of a strays file name
// ("<pid> <start time>"), if they still run with that start time, with
// everything below them, except self; it waits up to KillWait for them to
// go and returns how many it killed.
func killStrayLines(lines []string, self int) int {
	procs := snapshot()
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	seen := map[int]bool{}
	var victims []int
	var add func(pid int)
	add = func(pid int) {
		if seen[pid] || pid == self || procs[pid].dead() {
			return
		}
		seen[pid] = true
		victims = append(victims, pid)
		for _, c := range children[pid] {
			add(c)
		}
	}
	for _, l := range lines {
		var pid int
		var start uint64
		if _, err := fmt.Sscanf(l, "%d %d", &pid, &start); err != nil || pid <= 1 {
			continue
		}
		if p, ok := procs[pid]; ok && p.start == start {
			add(pid)
		}
	}
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(KillWait)
	for _, pid := range victims {
		for time.Now().Before(deadline) {
			if p, ok := readStat(pid); !ok || p.dead() {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return len(victims)
}
