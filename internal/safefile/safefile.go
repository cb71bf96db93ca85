// Package safefile opens and reads files that someone other than loopr may
// have put in place: an agent's artifact and the logs in its iteration
// directory, a parent's artifact, a prompt template, loopr.yml, a pid file.
//
// Whatever sits at the path, these functions never block and never read more
// than asked:
//
//   - the file is opened with O_NONBLOCK, so a FIFO with no writer does not
//     hang the open, and anything but a regular file is refused once opened
//     (fstat on the descriptor, so it cannot change between check and read);
//   - Open and Read refuse a symlink as the last component (O_NOFOLLOW): an
//     artifact linked to /proc/self/environ is refused, not read;
//     OpenBeneath also refuses a symlink at any directory below its root;
//   - OpenFollow and ReadFollow follow symlinks (the user may keep loopr.yml
//     in a dotfiles repository) but still want a regular file at the end;
//   - every function refuses the pseudo-files of /proc and /sys (Linux),
//     which stat as regular files of size 0 yet read the daemon's
//     environment or endless data;
//   - the Read functions read at most limit bytes and fail with a
//     *TooLargeError past it, whatever the file claims its size is.
//
// Refusals are a *NotRegularError or *TooLargeError that name the path and
// what was found there, never the file's contents.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// NotRegularError says the path holds something other than a regular file.
type NotRegularError struct {
	Path string
	// Kind is what was found: "a symlink", "a named pipe (FIFO)", "a
	// directory", "a character device", "a block device", "a socket", "a
	// /proc pseudo-file"…
	Kind string
	// Target is the symlink's target when Kind is "a symlink".
	Target string
}

func (e *NotRegularError) Error() string {
	if e.Target != "" {
		return fmt.Sprintf("%s is %s to %s, not a regular file", e.Path, e.Kind, e.Target)
	}
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Kind)
}

// Is makes errors.Is(err, fs.ErrInvalid) true for every refusal.
func (e *NotRegularError) Is(target error) bool { return target == fs.ErrInvalid }

// Describe says what was found without the path, for messages that name
// the file their own way: "a symlink to /proc/self/environ".
func (e *NotRegularError) Describe() string {
	if e.Target != "" {
		return e.Kind + " to " + e.Target
	}
	return e.Kind
}

// TooLargeError says the file holds more than the caller's limit. Size is
// the size fstat reported, or 0 when the file grew (or reported a size of 0)
// and only the read found it too long.
type TooLargeError struct {
	Path  string
	Size  int64
	Limit int64
}

func (e *TooLargeError) Error() string {
	if e.Size <= e.Limit {
		return fmt.Sprintf("%s is larger than %d bytes, the limit", e.Path, e.Limit)
	}
	return fmt.Sprintf("%s is %d bytes; the limit is %d", e.Path, e.Size, e.Limit)
}

// Open opens the regular file at path for reading. A symlink as the last
// component, or anything but a regular file, is refused with a
// *NotRegularError; directories above it may be symlinks.
func Open(path string) (*os.File, error) {
	return OpenBeneath(filepath.Dir(path), filepath.Base(path))
}

// Read reads the regular file at path (as Open) if it holds at most limit bytes.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, limit)
}

// OpenBeneath opens the regular file root/rel for reading, refusing a
// symlink at rel's last component or at any directory between root and it,
// so nothing under root can lead the read outside root. root itself is
// trusted (it is loopr's own directory, which may sit behind a symlink).
// rel must be local (filepath.IsLocal).
func OpenBeneath(root, rel string) (*os.File, error) {
	if !filepath.IsLocal(rel) {
		return nil, &fs.PathError{Op: "open", Path: filepath.Join(root, rel), Err: errors.New("path is not below " + root)}
	}
	full := filepath.Join(root, rel)
	dir, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	sofar := root
	for i, name := range parts {
		sofar = filepath.Join(sofar, name)
		last := i == len(parts)-1
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOCTTY
		if !last {
			flags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_DIRECTORY
		}
		fd, err := openat(dir, name, flags)
		if err != nil {
			err = explain(dir, name, sofar, err)
			unix.Close(dir)
			return nil, err
		}
		unix.Close(dir)
		dir = fd
	}
	return regular(dir, full)
}

// ReadBeneath reads root/rel (as OpenBeneath) if it holds at most limit bytes.
func ReadBeneath(root, rel string, limit int64) ([]byte, error) {
	f, err := OpenBeneath(root, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, filepath.Join(root, rel), limit)
}

// OpenFollow opens path for reading, following symlinks, and refuses what
// is at the end unless it is a regular file outside /proc and /sys.
func OpenFollow(path string) (*os.File, error) {
	fd, err := openat(unix.AT_FDCWD, path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return regular(fd, path)
}

// ReadFollow reads path (as OpenFollow) if it holds at most limit bytes.
func ReadFollow(path string, limit int64) ([]byte, error) {
	f, err := OpenFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f, path, limit)
}

// openat retries on EINTR, which a signal to the daemon can cause.
func openat(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// explain turns a failed open of name in dir into a *NotRegularError when a
// symlink was the cause (O_NOFOLLOW reports ELOOP on Linux and macOS,
// EMLINK on FreeBSD; with O_DIRECTORY some systems say ENOTDIR), else into
// a *fs.PathError.
func explain(dir int, name, path string, err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) || errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return &NotRegularError{Path: path, Kind: "a symlink", Target: linkTarget(dir, name)}
		}
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// linkTarget reads a symlink's target for a message: clipped, and quoted
// when it holds anything but printable UTF-8 (an agent chose it).
func linkTarget(dir int, name string) string {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "(unreadable)"
	}
	t := string(buf[:n])
	if len(t) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(t[cut]) {
			cut--
		}
		t = t[:cut] + "..."
	}
	for _, r := range t {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return fmt.Sprintf("%q", t)
		}
	}
	return t
}

// regular wraps fd as a blocking *os.File when fstat says it is a regular
// file, not on /proc or /sys; else it closes fd and says what it is.
func regular(fd int, path string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if kind := kindOf(uint32(st.Mode)); kind != "" { // Mode is uint16 on the BSDs
		unix.Close(fd)
		return nil, &NotRegularError{Path: path, Kind: kind}
	}
	if kind := pseudoFS(fd); kind != "" {
		unix.Close(fd)
		return nil, &NotRegularError{Path: path, Kind: kind}
	}
	// O_NONBLOCK only mattered for the open; clear it so *os.File treats
	// the descriptor as the ordinary blocking file it is.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// kindOf names a file type other than regular; "" for a regular file.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return ""
	case unix.S_IFIFO:
		return "a named pipe (FIFO)"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "not a regular file"
}

// readAll reads f to the end, at most limit bytes. The size from fstat is
// checked first so a big file is refused without reading it; the bounded
// read then catches a file that grows, or lies about its size.
func readAll(f *os.File, path string, limit int64) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Size: fi.Size(), Limit: limit}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return b, nil
}

// ReadIn reads path as ReadBeneath(root, …) when path lies below root, so no
// symlink under root can redirect it, and else as Read.
func ReadIn(root, path string, limit int64) ([]byte, error) {
	if root != "" {
		if rel, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(rel) {
			return ReadBeneath(root, rel, limit)
		}
	}
	return Read(path, limit)
}

// WriteAtomic writes data to path through a temporary file in the same
// directory, synced, and a rename, then syncs the directory: a reader sees
// the old file or the new one, and after a crash the new one is whole if
// the rename was durable. The temporary name is created exclusively, so
// nothing planted in the directory is followed or opened.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
