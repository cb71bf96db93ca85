//go:build linux

package contain

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// startTime is pid's start time in clock ticks after boot, 0 if unknown.
func startTime(pid int) uint64 {
	p, ok := readStat(pid)
	if !ok {
		return 0
	}
	return p.start
}

// processAlive reports whether pid is the live process that started at
// start (0: any).
func processAlive(pid int, start uint64) bool {
	p, ok := readStat(pid)
	return ok && !p.dead() && (start == 0 || p.start == start)
}

// uptimeTicks is now, in clock ticks after boot (0 if unknown).
func uptimeTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	s, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return uint64(s*clockTicks) + 1 // /proc/uptime rounds down to 1/100 s
}

// guardKill kills what the dead daemon o names started, and returns how
// many processes it found:
//
//   - its cgroup cells (their names carry its instance), with cgroup.kill;
//   - the strays it recorded in the home, if the file is still its own
//     (pid and start time each), and what is below them;
//   - every process whose environment names its home and a loop, started
//     before it died (cutoff: when its pipe ended), and what is below
//     them — unless another daemon of the home runs already (its pid
//     file names a live process): its Recover ends them, and the scan
//     cannot tell them from that daemon's own. A daemon of the home
//     started after it has a later instance and later processes: none
//     of them is touched.
//
// alive: the daemon lives on (frozen): its cgroup root stays, for the
// cells it makes when it resumes.
func guardKill(o GuardOptions, cutoff uint64, alive bool) int {
	inst := instance(o.PID, o.Start)
	n := 0
	if o.Cgroup != "" && validRoot(o.Cgroup) {
		entries, _ := os.ReadDir(o.Cgroup)
		for _, e := range entries {
			if !e.IsDir() || !strings.Contains(e.Name(), "."+inst+".") {
				continue
			}
			dir := filepath.Join(o.Cgroup, e.Name())
			n += len(cgroupPIDs(dir))
			killCgroup(dir, KillWait)
			removeCgroup(dir)
		}
		if !alive {
			_ = os.Remove(o.Cgroup) // fails while another daemon's cells are there
		}
	}
	n += killStraysOf(o.Home, inst)
	home := o.Home
	if abs, err := filepath.Abs(home); err == nil {
		home = abs
	}
	if cutoff != 0 && !otherDaemon(home, o.PID) {
		n += KillMatching(Match{Home: home, StartedBy: cutoff})
	}
	return n
}

// killStraysOf kills the strays recorded in home's strays file when the
// daemon inst recorded it, with everything below them.
func killStraysOf(home, inst string) int {
	b, err := readSmall(filepath.Join(home, strayFile))
	if err != nil {
		return 0
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "daemon "+inst {
		return 0 // another daemon's (or none): not the guard's to touch
	}
	return killStrayLines(lines[1:], os.Getpid())
}

// otherDaemon reports whether home's pid file names a live process other
// than pid: a daemon of the home started after pid died.
func otherDaemon(home string, pid int) bool {
	b, err := readSmall(filepath.Join(home, "daemon.pid"))
	if err != nil {
		return false
	}
	other, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && other > 1 && other != pid && processAlive(other, 0)
}
