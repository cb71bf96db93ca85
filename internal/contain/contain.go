// Package contain keeps every process an iteration starts within bounds the
// daemon can end, however the process tries to leave them.
//
// An agent runs in a process group of its own, but a process can leave its
// group (setsid, the real Claude Code CLI runs its Bash tool that way, or a
// double fork with job control), clear its environment (env -i) and outlive
// its parent. Three mechanisms catch it, strongest first; the daemon uses
// every one the machine allows and says which in `loopr status`:
//
//   - cgroup: a cgroup v2 per process started (agent, each validate
//     command), made below the daemon's own cgroup and entered at clone
//     time (CLONE_INTO_CGROUP), so no descendant can be outside it. Ending
//     it is `cgroup.kill` (or SIGKILL to each pid in cgroup.procs until it
//     is empty), then rmdir. A daemon that starts kills and removes the
//     cgroups a crashed one left. A cell's name carries the daemon's
//     instance (pid and start time), so a dead daemon's guard (guard.go)
//     kills its cells and never those of a daemon started after it.
//   - subreaper: the daemon is a child subreaper (PR_SET_CHILD_SUBREAPER),
//     so a process that detaches is reparented to the daemon instead of
//     init. Such strays are attributed to a loop by their environment
//     (LOOPR_LOOP_ID) or, when they cleared it, by their working directory
//     (the loop's worktree); one nobody can claim is killed once no agent
//     runs. The daemon reaps them, without racing os/exec: it waits only
//     for pids it did not start.
//     Without cgroups the daemon also records its strays in the home, so
//     the next daemon can end them after a crash.
//   - scan: every process whose environment carries this home's LOOPR_HOME
//     and the loop's LOOPR_LOOP_ID, and everything below it, is killed when
//     the loop's process ends and, for every loop, when a daemon starts.
//     Off Linux there is no /proc to scan: the process group is all.
//
// And a daemon that dies without a clean stop has its guard, `loopr
// _guard` (guard.go), kill what it started at once, instead of leaving it
// to the next daemon's Recover.
package contain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Containment modes, as `loopr status` shows them.
const (
	ModeCgroup    = "cgroup"         // cgroup per process + subreaper + scan
	ModeSubreaper = "subreaper+scan" // no writable cgroup v2
	ModeScan      = "pgroup+scan"    // neither (not Linux, or turned off)
)

// EnvMode names the environment variable that narrows the containment the
// daemon chooses: "cgroup", "subreaper" or "scan" (the default, "auto", is
// the strongest available). The tests use it to prove each mode.
const EnvMode = "LOOPR_CONTAINMENT"

// KillWait bounds the wait for killed processes to disappear.
const KillWait = 2 * time.Second

// Jail is one daemon's containment. A nil *Jail contains nothing beyond
// the process group: its methods start processes plainly.
type Jail struct {
	home string
	log  *slog.Logger

	mode      atomic.Value // string
	subreaper bool
	root      string       // this home's cgroup directory; "" without cgroups
	why       atomic.Value // string: what the mode is made of

	// state guards root.
	state    sync.Mutex
	recorded string // the strays last written to the home (Run's goroutine)
	seq      atomic.Uint64
	pgid     int // the daemon's own process group: its git commands live there
	self     int
	start    uint64 // the daemon's start time (clock ticks after boot; 0 off Linux)
	inst     string // instance(self, start): in its cells' names and its strays file
}

// started is every process started through any jail of this process and
// not yet waited for. Being a subreaper is a property of the process, so
// is the set of children its reapers must leave alone (tests run several
// daemons in one process). mu orders starts against the reapers: a start
// holds it for reading from clone until its pid is in pids, a reaper holds
// it for writing, so none reaps a child os/exec still has to wait for.
var started = struct {
	mu     sync.RWMutex
	state  sync.Mutex // guards pids and guards
	pids   map[int]bool
	guards map[int]bool // the daemons' guards (guard.go): not strays, not agents
}{pids: map[int]bool{}, guards: map[int]bool{}}

// isStarted reports whether pid was started through a jail (or is a
// guard) and not yet waited for.
func isStarted(pid int) bool {
	started.state.Lock()
	defer started.state.Unlock()
	return started.pids[pid] || started.guards[pid]
}

// Setup chooses the containment for the daemon of home: the strongest the
// machine allows, narrowed by want ("", "auto", "cgroup", "subreaper",
// "scan"). It fails only for an unknown want: what the machine does not
// allow, it does without and says so in Why.
func Setup(home string, want string, log *slog.Logger) (*Jail, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch want {
	case "", "auto", ModeCgroup, "subreaper", "scan":
	default:
		return nil, fmt.Errorf("%s=%q: want auto, cgroup, subreaper or scan", EnvMode, want)
	}
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	j := &Jail{home: home, log: log, self: os.Getpid(), pgid: getpgrp()}
	j.start = startTime(j.self)
	j.inst = instance(j.self, j.start)
	mode, why := ModeScan, "process group and environment scan"
	if want != "scan" {
		if err := setSubreaper(); err != nil {
			why = fmt.Sprintf("process group and environment scan (no subreaper: %v)", err)
		} else {
			j.subreaper = true
			mode, why = ModeSubreaper, "subreaper and environment scan"
		}
	}
	if j.subreaper && (want == "" || want == "auto" || want == ModeCgroup) {
		root, err := cgroupRoot(home)
		if err == nil {
			j.root = root
			mode, why = ModeCgroup, "a cgroup v2 per process below "+root
		} else {
			why += fmt.Sprintf(" (no cgroup: %v)", err)
		}
	}
	j.mode.Store(mode)
	j.why.Store(why)
	return j, nil
}

// Mode is the containment in force: ModeCgroup, ModeSubreaper or ModeScan.
func (j *Jail) Mode() string {
	if j == nil {
		return ModeScan
	}
	return j.mode.Load().(string)
}

// Why says in a few words what the mode is made of, or why a stronger one
// is not available.
func (j *Jail) Why() string {
	if j == nil {
		return "process group only"
	}
	return j.why.Load().(string)
}

// Start starts the command mk makes, contained: in a cgroup of its own
// when the jail has cgroups (name becomes part of its directory name), and
// registered as a process the daemon's reaper must leave to os/exec. mk may
// be called twice: when cloning into the cgroup fails, the process starts
// plainly and cgroups are off from then on. The caller must call
// Exited(cmd.Process.Pid) once cmd.Wait returned, and End on the cell
// (which may be nil) when the process and what it left must be gone.
func (j *Jail) Start(mk func() *exec.Cmd, name string) (*exec.Cmd, *Cell, error) {
	cmd := mk()
	if j == nil {
		return cmd, nil, cmd.Start()
	}
	var cell *Cell
	if root := j.cgroupDir(); root != "" {
		// The daemon's instance in the name tells its cells from those of
		// a daemon of the same home started after it died (the guard).
		c, err := newCell(root, fmt.Sprintf("%s.%s.%d", safeName(name), j.inst, j.seq.Add(1)))
		if err != nil {
			j.degrade(err)
		} else {
			cell = c
			intoCgroup(cmd, c.fd)
		}
	}
	started.mu.RLock()
	err := cmd.Start()
	if err != nil && cell != nil && cmd.Process == nil {
		// Cloning into the cgroup can fail where creating it did not (a
		// delegation the kernel refuses). Start plainly: if that works,
		// the cgroup was the trouble, and cgroups are off from now on; if
		// not (a missing binary), the cgroup had nothing to do with it.
		cell.remove()
		cell = nil
		cgErr := err
		cmd = mk()
		if err = cmd.Start(); err == nil {
			j.degrade(fmt.Errorf("start in cgroup: %w", cgErr))
		}
	}
	if err == nil {
		started.state.Lock()
		started.pids[cmd.Process.Pid] = true
		started.state.Unlock()
	}
	started.mu.RUnlock()
	if err != nil {
		cell.remove()
		return cmd, nil, err
	}
	return cmd, cell, nil
}

func (j *Jail) cgroupDir() string {
	j.state.Lock()
	defer j.state.Unlock()
	return j.root
}

// degrade drops cgroups for the rest of the daemon's life after a failure.
func (j *Jail) degrade(err error) {
	j.state.Lock()
	defer j.state.Unlock()
	if j.root == "" {
		return
	}
	j.log.Warn("cgroups off: containment falls back to subreaper and environment scan", "err", err)
	j.root = ""
	j.mode.Store(ModeSubreaper)
	j.why.Store(fmt.Sprintf("subreaper and environment scan (cgroups failed: %v)", err))
}

// Exited tells the jail that os/exec has waited for pid.
func (j *Jail) Exited(pid int) {
	if j == nil {
		return
	}
	started.state.Lock()
	delete(started.pids, pid)
	started.state.Unlock()
}

// Cell is the cgroup of one started process. A nil *Cell is a process
// without one: every method does nothing.
type Cell struct {
	dir string
	fd  int
}

// Signal sends sig to every process in the cell.
func (c *Cell) Signal(sig os.Signal) {
	if c == nil {
		return
	}
	for _, pid := range cgroupPIDs(c.dir) {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(sig)
		}
	}
}

// Empty reports whether no process is left in the cell.
func (c *Cell) Empty() bool {
	if c == nil {
		return true
	}
	return cgroupEmpty(c.dir)
}

// Kill kills every process in the cell and waits up to KillWait for them
// to be gone.
func (c *Cell) Kill() {
	if c == nil {
		return
	}
	killCgroup(c.dir, KillWait)
}

// End kills what is left in the cell and removes it.
func (c *Cell) End() {
	if c == nil {
		return
	}
	if !c.Empty() {
		c.Kill()
	}
	c.remove()
}

func (c *Cell) remove() {
	if c == nil {
		return
	}
	closeFD(c.fd)
	removeCgroup(c.dir)
	// The home's cgroup exists only while a cell does: a daemon killed
	// while idle leaves nothing behind. Another cell makes this fail.
	_ = os.Remove(filepath.Dir(c.dir))
}

// newCell makes the cgroup for one process, and the home's cgroup above
// it when a removal of the last cell took it.
func newCell(root, name string) (*Cell, error) {
	dir := filepath.Join(root, name)
	var err error
	for range 3 {
		if err = os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err = os.Mkdir(dir, 0o755); !errors.Is(err, os.ErrNotExist) {
			break // made, or failed for a reason other than a root removed meanwhile
		}
	}
	if err != nil {
		return nil, err
	}
	fd, err := openDir(dir)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &Cell{dir: dir, fd: fd}, nil
}

// safeName keeps what a cgroup directory name may hold.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// Recover runs at daemon start, before any agent: it kills and removes
// every cgroup a previous daemon of this home left (this daemon's and the
// one recorded in the home, wherever that daemon ran), records this
// daemon's, kills the strays a previous daemon recorded (without cgroups),
// and kills every process whose environment carries this home and any loop
// id, with everything below it. It returns how many processes it killed.
func (j *Jail) Recover() int {
	if j == nil {
		return 0
	}
	n := 0
	record := filepath.Join(j.home, "cgroup")
	if b, err := readSmall(record); err == nil {
		if old := strings.TrimSpace(string(b)); old != "" && old != j.cgroupDir() && validRoot(old) {
			n += sweepRoot(old, true)
		}
	}
	if root := j.cgroupDir(); root != "" {
		n += sweepRoot(root, false)
		if err := writeRecord(record, root); err != nil {
			j.log.Warn("record the daemon's cgroup", "err", err)
		}
	}
	n += j.killRecordedStrays()
	n += KillMatching(Match{Home: j.home})
	return n
}

// Close removes this daemon's cgroup directory once every cell is gone.
func (j *Jail) Close() {
	if j == nil {
		return
	}
	if root := j.cgroupDir(); root != "" {
		sweepRoot(root, true)
	}
}

// rootName is the cgroup directory name for home: one per home, so
// daemons of different homes never touch each other's processes.
func rootName(home string) string {
	sum := sha256.Sum256([]byte(home))
	return "loopr-" + hex.EncodeToString(sum[:6])
}

// validRoot reports whether dir looks like a cgroup loopr made: a
// "loopr-" directory holding cgroup.procs.
func validRoot(dir string) bool {
	if !filepath.IsAbs(dir) || !strings.HasPrefix(filepath.Base(dir), "loopr-") {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "cgroup.procs"))
	return err == nil
}

// sweepRoot kills every process in the cells below root, removes them,
// and removes root too when asked. It returns how many processes it found.
func sweepRoot(root string, removeRoot bool) int {
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		n += len(cgroupPIDs(dir))
		killCgroup(dir, KillWait)
		removeCgroup(dir)
	}
	if removeRoot {
		_ = os.Remove(root)
	}
	return n
}

var errNoCgroup2 = errors.New("no cgroup v2 file system")
