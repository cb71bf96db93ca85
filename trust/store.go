package trust

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/safefile"
)

// Store is the trust file: one line per trusted loopr.yml,
// "<sha256> <absolute path>", the fingerprint of its command-bearing
// values when it was trusted. Trust is for that content at that path: the
// same file elsewhere, or other commands here, are asked again.
type Store struct {
	Path string // $XDG_CONFIG_HOME/loopr/trusted
}

// maxStore bounds the trust file read (a line is about 100 bytes).
const maxStore = 4 << 20

// DefaultPath is the trust file of the user whose environment getenv
// reads: $XDG_CONFIG_HOME/loopr/trusted, XDG_CONFIG_HOME defaulting to
// ~/.config as the XDG base directory specification says (a relative
// value is ignored, as it says too).
func DefaultPath(getenv func(string) string) (string, error) {
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("trust: no $XDG_CONFIG_HOME and no home directory: %w", err)
			}
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "loopr", "trusted"), nil
}

// DefaultStore is the Store at DefaultPath.
func DefaultStore(getenv func(string) string) (Store, error) {
	p, err := DefaultPath(getenv)
	return Store{Path: p}, err
}

// entry is one line of the file.
type entry struct{ sum, path string }

// read returns the file's entries; none when it does not exist. A line
// that is not "<64 hex digits> <absolute path>" is an error naming the
// file and the line.
func (s Store) read() ([]entry, error) {
	data, err := safefile.Read(s.Path, maxStore)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trust file %s: %w", s.Path, err)
	}
	var out []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxStore)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, path, ok := strings.Cut(line, " ")
		path = strings.TrimSpace(path)
		if !ok || !isSum(sum) || !filepath.IsAbs(path) {
			return nil, fmt.Errorf("trust file %s:%d: not \"<sha256> <absolute path of loopr.yml>\": fix or delete the line, then run `loopr trust` again", s.Path, n)
		}
		out = append(out, entry{sum, path})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trust file %s: %w", s.Path, err)
	}
	return out, nil
}

func isSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// Add records sum as the trusted fingerprint of file, replacing what was
// trusted there before. The file is written whole, atomically, mode 0600
// in a directory of mode 0700.
func (s Store) Add(sum, file string) error {
	if !isSum(sum) {
		return fmt.Errorf("trust: %q is not a sha256 fingerprint", sum)
	}
	file, err := Abs(file)
	if err != nil {
		return err
	}
	if strings.ContainsAny(file, "\n\r") {
		return fmt.Errorf("trust: %q: a path with a line break cannot be recorded", file)
	}
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("trust: %w", err)
	}
	// One writer at a time: two `loopr trust` (or init) at once each read
	// the file, and the second rename would drop the first's line.
	unlock, err := lockFile(s.Path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	entries, err := s.read()
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# loopr trust: the sha256 of the commands of each loopr.yml you trusted (`loopr trust`)\n")
	for _, e := range entries {
		if e.path != file {
			fmt.Fprintf(&b, "%s %s\n", e.sum, e.path)
		}
	}
	fmt.Fprintf(&b, "%s %s\n", sum, file)
	if err := safefile.WriteAtomic(s.Path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("trust: write %s: %w", s.Path, err)
	}
	return nil
}

// Abs is the form of a loopr.yml's path the store keeps: absolute, clean,
// with symlinks in its directory resolved when it exists. A link at the
// file's own name is not followed: trust is for the commands run in this
// directory's repository, and a loopr.yml linked to a file trusted for
// another repository must not borrow that trust.
func Abs(file string) (string, error) {
	if file == "" {
		return "", errors.New("trust: no loopr.yml path")
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", fmt.Errorf("trust: %w", err)
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	return abs, nil
}

// WhyBuiltin is State.Why of a file whose commands are loopr's built-in
// ones.
const WhyBuiltin = "built-in commands"

// Recorded reports whether the store holds c's fingerprint for c's file:
// trusted by `loopr trust`, not by being built in or LOOPR_TRUST_ALL.
func (s Store) Recorded(c *config.Config) (bool, error) {
	if c.File == "" {
		return false, nil
	}
	abs, err := Abs(c.File)
	if err != nil {
		return false, err
	}
	entries, err := s.read()
	if err != nil {
		return false, err
	}
	sum := Fingerprint(c)
	return slices.Contains(entries, entry{sum, abs}), nil
}

// State is what Check found.
type State struct {
	// Trusted: the configuration may run its commands.
	Trusted bool
	// Why says how: "no loopr.yml", "built-in commands", "LOOPR_TRUST_ALL=1",
	// "trusted"; or, untrusted, why not ("not trusted", "changed since trusted").
	Why         string
	Fingerprint string
	File        string // the loopr.yml, absolute; "" with none
}

// Check decides whether c may run its commands: it has no file, or only
// the built-in commands, or getenv says LOOPR_TRUST_ALL=1, or the store
// holds its fingerprint for its path. An unreadable or damaged store is an
// error (and c is not trusted).
func (s Store) Check(c *config.Config, getenv func(string) string) (State, error) {
	st := State{Fingerprint: Fingerprint(c), File: c.File}
	switch {
	case c.File == "":
		st.Trusted, st.Why = true, "no loopr.yml"
		return st, nil
	case st.Fingerprint == builtin:
		st.Trusted, st.Why = true, WhyBuiltin
		return st, nil
	case getenv(AllEnv) == "1":
		st.Trusted, st.Why = true, AllEnv+"=1"
		return st, nil
	}
	abs, err := Abs(c.File)
	if err != nil {
		return st, err
	}
	st.File = abs
	entries, err := s.read()
	if err != nil {
		st.Why = "the trust file cannot be read"
		return st, err
	}
	st.Why = "not trusted"
	for _, e := range entries {
		if e.path != abs {
			continue
		}
		if e.sum == st.Fingerprint {
			st.Trusted, st.Why = true, "trusted"
			return st, nil
		}
		st.Why = "its commands changed since they were trusted"
	}
	return st, nil
}

// lockFile takes an exclusive flock on path (created 0600), waiting for
// another holder, and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("trust: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("trust: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
