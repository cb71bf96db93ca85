package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/loopr-dev/loopr/preset"
)

// Bounds of what PrepareHome copies: a CLI's auth and settings are small,
// its transcripts of other sessions are not, and are not the loop's.
const (
	maxHomeFile  = 4 << 20
	maxHomeTotal = 64 << 20
)

// PrepareHome makes the loop's private home and copies into it, from the
// real home realHome, the files the preset needs (preset.Preset.Home), then
// those under <state>/sandbox-home/ (the user's own additions, e.g. a
// .gitconfig). A file is copied when the private copy is missing or older
// than the source (a refreshed token reaches the next start; a copy is
// given the source's time, so one the agent changed since is newer and
// stays); what the agent made in its home (its sessions) stays. Files over
// 4 MiB, and anything past 64 MiB in all, are left out; so are sockets and
// devices, and the CLI's record of other work (preset.Preset.HomeSkip: its
// transcripts of every project's sessions, its prompt history). It returns
// the private home.
func (p Policy) PrepareHome(loopID, realHome string) (string, error) {
	dst := p.Home(loopID)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return "", fmt.Errorf("sandbox home: %w", err)
	}
	c := &copier{budget: maxHomeTotal, root: dst, skip: map[string]bool{}}
	if ps, ok := preset.Get(p.Preset); ok && realHome != "" {
		for _, rel := range ps.HomeSkip {
			c.skip[filepath.Join(realHome, rel)] = true
		}
		for _, rel := range ps.Home {
			if err := c.tree(filepath.Join(realHome, rel), filepath.Join(dst, rel)); err != nil {
				return "", fmt.Errorf("sandbox home: %w", err)
			}
		}
	}
	extra := filepath.Join(p.State, ExtraHomeDir)
	if err := c.tree(extra, dst); err != nil {
		return "", fmt.Errorf("sandbox home: %s: %w", extra, err)
	}
	return dst, nil
}

type copier struct {
	budget int64
	skip   map[string]bool // source paths not copied (preset.Preset.HomeSkip), with what is under them
	root   string          // the private home: the agent writes in it between copies
}

// mkdir makes dir, below c.root, a real directory: a link or file the
// agent left at any of its components is removed first, so a copy never
// follows one out of the private home.
func (c *copier) mkdir(dir string) error {
	rel, err := filepath.Rel(c.root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s is not below the private home %s", dir, c.root)
	}
	cur := c.root
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		if name == "." {
			continue
		}
		cur = filepath.Join(cur, name)
		fi, err := os.Lstat(cur)
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			if err := os.Remove(cur); err != nil {
				return err
			}
		}
		if err := os.Mkdir(cur, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// tree copies src (a file, a link or a directory) to dst; a missing src is
// nothing to copy.
func (c *copier) tree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil
			}
			return err
		}
		if c.skip[path] {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case d.IsDir():
			return c.mkdir(to)
		case t&fs.ModeSymlink != 0:
			return c.link(path, to)
		case t.IsRegular():
			return c.file(path, to)
		}
		return nil // sockets, FIFOs, devices
	})
}

func (c *copier) link(src, dst string) error {
	target, err := os.Readlink(src)
	if err != nil {
		return nil
	}
	if cur, err := os.Readlink(dst); err == nil && cur == target {
		return nil
	}
	if err := c.mkdir(filepath.Dir(dst)); err != nil {
		return err
	}
	_ = os.Remove(dst)
	return os.Symlink(target, dst)
}

func (c *copier) file(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil || si.Size() > maxHomeFile || si.Size() > c.budget {
		return nil
	}
	if di, err := os.Lstat(dst); err == nil && di.Mode().IsRegular() && !si.ModTime().After(di.ModTime()) {
		return nil
	}
	c.budget -= si.Size()
	in, err := os.Open(src)
	if err != nil {
		return nil // unreadable: the CLI would not read it either
	}
	defer in.Close()
	if err := c.mkdir(filepath.Dir(dst)); err != nil {
		return err
	}
	// A fresh temporary file: whatever the agent left at its name (a
	// link to a file of yours) is removed, not written through.
	tmp := dst + ".loopr-copy"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, si.Mode().Perm()|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(tmp)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	_ = os.Chtimes(tmp, si.ModTime(), si.ModTime())
	return os.Rename(tmp, dst)
}
