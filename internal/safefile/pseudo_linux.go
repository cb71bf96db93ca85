package safefile

import "golang.org/x/sys/unix"

// pseudoFS names the kernel file system fd is on when it is one whose
// "regular" files are views of kernel state (/proc/self/environ,
// /sys/...), and "" otherwise.
func pseudoFS(fd int) string {
	var s unix.Statfs_t
	for {
		err := unix.Fstatfs(fd, &s)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ""
		}
		break
	}
	// Statfs_t.Type is int32, uint32 or int64 by architecture; the magic
	// numbers are 32-bit.
	switch uint32(s.Type) {
	case unix.PROC_SUPER_MAGIC:
		return "a /proc pseudo-file"
	case unix.SYSFS_MAGIC, unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC,
		unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC, unix.BPF_FS_MAGIC, unix.EFIVARFS_MAGIC:
		return "a kernel pseudo-file"
	}
	return ""
}
