//go:build linux

package contain

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loopr-dev/loopr/internal/safefile"
)

func setSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

func getpgrp() int { return syscall.Getpgrp() }

// intoCgroup makes cmd start inside the cgroup open at fd (clone3 with
// CLONE_INTO_CGROUP): no instant of the process's life is spent outside.
func intoCgroup(cmd *exec.Cmd, fd int) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
}

func openDir(dir string) (int, error) {
	return unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

func closeFD(fd int) { _ = unix.Close(fd) }

// cgroupRoot finds the cgroup v2 directory the daemon runs in and makes
// this home's directory below it, checking that a cell can be made there.
func cgroupRoot(home string) (string, error) {
	mnt, mntRoot, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	if mntRoot != "/" {
		rel, ok := strings.CutPrefix(own, mntRoot)
		if !ok {
			return "", fmt.Errorf("the daemon's cgroup %s is outside the mounted %s", own, mntRoot)
		}
		own = rel
	}
	root := filepath.Join(mnt, own, rootName(home))
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		return "", fmt.Errorf("%s is not a cgroup: %w", root, err)
	}
	// Probe: a cell can be made here.
	probe := filepath.Join(root, fmt.Sprintf("probe.%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := os.Remove(probe); err != nil {
		return "", err
	}
	_ = os.Remove(root) // made again with the first cell; fails while cells of a crashed daemon are left
	return root, nil
}

// cgroup2Mount returns where the cgroup v2 hierarchy is mounted (unified
// or hybrid) and the mount's root within it, from /proc/self/mountinfo.
func cgroup2Mount() (mountPoint, root string, err error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// id parent maj:min root mountpoint options... - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			return unescapeMount(f[4]), unescapeMount(f[3]), nil
		}
	}
	return "", "", errNoCgroup2
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// ownCgroup is the daemon's cgroup v2 path ("0::<path>" in /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p, nil
		}
	}
	return "", errNoCgroup2
}

// cgroupPIDs lists the processes in dir and every cgroup below it.
func cgroupPIDs(dir string) []int {
	var pids []int
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err == nil {
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			pids = append(pids, cgroupPIDs(filepath.Join(dir, e.Name()))...)
		}
	}
	return pids
}

// cgroupEmpty reports whether no live process is in dir or below it.
func cgroupEmpty(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "populated "); ok {
				return v == "0"
			}
		}
	}
	if _, err := os.Stat(dir); err != nil {
		return true
	}
	return len(cgroupPIDs(dir)) == 0
}

// killCgroup kills every process in dir and below with cgroup.kill (Linux
// 5.14), or else SIGKILL to each listed pid until none is left, and waits
// up to wait for the cgroup to be empty.
func killCgroup(dir string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	useKill := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil
	for !cgroupEmpty(dir) && time.Now().Before(deadline) {
		if !useKill {
			for _, pid := range cgroupPIDs(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeCgroup removes dir and the cgroups below it, deepest first,
// retrying while the kernel still counts exiting processes.
func removeCgroup(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	for i := 0; i < 100; i++ {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readSmall(path string) ([]byte, error) { return safefile.Read(path, 4096) }

func writeRecord(path, root string) error {
	return safefile.WriteAtomic(path, []byte(root+"\n"), 0o600)
}
