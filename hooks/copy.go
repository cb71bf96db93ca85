package hooks

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxCopy bounds one file worktree.copy copies.
const maxCopy = 64 << 20

// CopyReport says what Copy did: the files copied, and the ones refused
// with why, each as "PATH: why".
type CopyReport struct {
	Copied  []string
	Refused []string
}

// String words the report in one line for the journal; "" when nothing
// was listed.
func (r CopyReport) String() string {
	var parts []string
	if len(r.Copied) > 0 {
		parts = append(parts, "copied "+strings.Join(r.Copied, ", "))
	}
	if len(r.Refused) > 0 {
		parts = append(parts, "not copied: "+strings.Join(r.Refused, "; "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "worktree.copy: " + strings.Join(parts, "; ")
}

// Copy copies the files of workspace that patterns name (paths relative to
// it, or globs) into dst, a new worktree, at the same relative paths. It
// refuses, and reports, what is not a regular file inside the workspace:
// a path or symlink that leads out of it, a FIFO, socket or device (never
// opened, so a FIFO cannot block it), a directory; and a destination
// whose directories lead out of dst (a symlink the checkout holds). A
// pattern that matches nothing is reported too. Copy itself never fails:
// the caller journals the report and goes on.
func Copy(workspace, dst string, patterns []string) CopyReport {
	var r CopyReport
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		r.Refused = append(r.Refused, fmt.Sprintf("%s: %v", workspace, err))
		return r
	}
	for _, p := range patterns {
		if filepath.IsAbs(p) || !inside(".", filepath.Clean(p)) {
			r.Refused = append(r.Refused, p+": outside the workspace")
			continue
		}
		matches, err := filepath.Glob(filepath.Join(workspace, p))
		if err != nil || len(matches) == 0 {
			r.Refused = append(r.Refused, p+": no such file in the workspace")
			continue
		}
		for _, m := range matches {
			rel, err := filepath.Rel(workspace, m)
			if err != nil || !inside(".", rel) {
				r.Refused = append(r.Refused, m+": outside the workspace")
				continue
			}
			if why := copyOne(ws, m, dst, rel); why != "" {
				r.Refused = append(r.Refused, rel+": "+why)
				continue
			}
			r.Copied = append(r.Copied, rel)
		}
	}
	return r
}

// copyOne copies src (rel below the workspace ws) to dst/rel, or says why not.
func copyOne(ws, src, dst, rel string) string {
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return err.Error()
	}
	if !inside(ws, real) {
		return "leads out of the workspace (to " + real + ")"
	}
	fi, err := os.Stat(real)
	switch {
	case err != nil:
		return err.Error()
	case fi.IsDir():
		return "a directory: list its files, or a glob (dir/*)"
	case !fi.Mode().IsRegular():
		return "not a regular file (" + fi.Mode().Type().String() + ")"
	case fi.Size() > maxCopy:
		return fmt.Sprintf("larger than %d MiB", maxCopy>>20)
	}
	target := filepath.Join(dst, rel)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err.Error()
	}
	realDst, err := filepath.EvalSymlinks(dst)
	if err != nil {
		return err.Error()
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(target)); err != nil || !inside(realDst, dir) {
		return "its directory in the worktree leads out of it"
	}
	// O_NONBLOCK: a FIFO swapped in since the Stat does not block the
	// open; the fstat below refuses it.
	in, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err.Error()
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "not a regular file"
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".loopr-copy-*")
	if err != nil {
		return err.Error()
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, io.LimitReader(in, maxCopy))
	if err == nil {
		err = tmp.Chmod(fi.Mode().Perm())
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// rename replaces whatever is at target, a symlink included,
		// rather than writing through it.
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// inside reports whether path p is dir or below it (both clean).
func inside(dir, p string) bool {
	if dir == "." {
		return p != ".." && !strings.HasPrefix(p, "../")
	}
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}
