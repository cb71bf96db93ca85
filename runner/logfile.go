package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/internal/safefile"
)

// logFile writes a stream to a file but keeps at most about limit bytes of
// it: the first half goes to the file as it arrives (so a live view sees
// it), the last half is held in memory and written on Close, after a line
// that says how much was cut between them. An agent that prints 20 GiB
// costs limit bytes of disk and at most limit bytes of memory.
//
// Write never fails: a full disk must not make the copy from the agent's pipe
// stop, which would block the agent. The first write error is returned by Close.
type logFile struct {
	f       *os.File
	head    int64  // bytes that may still go straight to the file
	tail    []byte // the most recent bytes past the head
	tailMax int
	cut     int64 // bytes dropped between head and tail
	headMax int64
	err     error
}

func createLog(path string, limit int64) (*logFile, error) {
	f, err := createFresh(path)
	if err != nil {
		return nil, err
	}
	head := limit / 2
	return &logFile{f: f, head: head, headMax: head, tailMax: int(limit - head)}, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	n := len(p)
	if l.head > 0 {
		k := min(int64(len(p)), l.head)
		if _, err := l.f.Write(p[:k]); err != nil && l.err == nil {
			l.err = err
		}
		l.head -= k
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= l.tailMax {
		l.cut += int64(len(l.tail) + len(p) - l.tailMax)
		l.tail = append(l.tail[:0], p[len(p)-l.tailMax:]...)
		return n, nil
	}
	// Let the buffer grow to twice the tail before compacting it, so the
	// copying is amortized over tailMax bytes of writes.
	if len(l.tail)+len(p) > 2*l.tailMax {
		drop := len(l.tail) + len(p) - l.tailMax
		l.cut += int64(drop)
		l.tail = l.tail[:copy(l.tail, l.tail[drop:])]
	}
	l.tail = append(l.tail, p...)
	return n, nil
}

// Close writes the kept tail, preceded by the cut notice when something was
// cut, and closes the file.
func (l *logFile) Close() error {
	tail := l.tail
	if extra := len(tail) - l.tailMax; extra > 0 {
		l.cut += int64(extra)
		tail = tail[extra:]
	}
	if l.cut > 0 {
		notice := fmt.Sprintf("\n\n[loopr: %d bytes of output cut here; this log keeps the first %d and the last %d bytes]\n\n",
			l.cut, l.headMax, len(tail))
		if _, err := io.WriteString(l.f, notice); err != nil && l.err == nil {
			l.err = err
		}
	}
	if _, err := l.f.Write(tail); err != nil && l.err == nil {
		l.err = err
	}
	l.tail = nil
	if err := l.f.Close(); err != nil && l.err == nil {
		l.err = err
	}
	return l.err
}

// createFresh creates the file at path for writing, replacing whatever an
// agent may have left there. Opening an existing name would follow a
// symlink the agent planted (loopr would write into the file it points to)
// or block on a FIFO until someone reads it; so the name is removed and
// created exclusively, which follows nothing and fails instead of blocking
// if something takes the name again in between.
func createFresh(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
}

// readTail returns at most n bytes from the end of the file at path, as
// valid UTF-8 and starting at a line boundary when one is near. A missing
// file, or anything but a regular file (an agent may have replaced its log
// with a FIFO or a symlink to a secret), reads as "".
func readTail(path string, n int) string {
	if n <= 0 {
		return ""
	}
	f, err := safefile.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-int64(n), 0)
	buf := make([]byte, fi.Size()-off)
	k, _ := f.ReadAt(buf, off)
	buf = buf[:k]
	if off > 0 {
		// Drop the partial first line if a line break is close, else just
		// the partial first rune.
		if i := strings.IndexByte(string(buf[:min(len(buf), 256)]), '\n'); i >= 0 {
			buf = buf[i+1:]
		} else {
			for len(buf) > 0 && !utf8.RuneStart(buf[0]) {
				buf = buf[1:]
			}
		}
	}
	return strings.ToValidUTF8(string(buf), "\uFFFD")
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const dots = "..."
	if n <= len(dots) {
		return s[:0]
	}
	cut := n - len(dots)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + dots
}
