package procenv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// Secret is one entry of a profile's secrets: the variable the agent gets
// and where the daemon reads its value. Exactly one of File and Env is set.
type Secret struct {
	Name string
	File string // an absolute path: a regular file, its content the value
	Env  string // a variable of the daemon's environment
}

// MaxSecretBytes bounds a secret file: a token or a key, not a data set.
const MaxSecretBytes = 64 << 10

// Value is a secret read: the variable and its value.
type Value struct{ Name, Value string }

// ReadSecrets reads each of p's secrets, in order: a file (its content
// without one final newline) or a variable of lookup (the daemon's
// environment, os.LookupEnv). The first that cannot be read is an error
// naming its key (agent.secrets.NAME), why and what to do; no error says a
// value, read or not.
func (p Profile) ReadSecrets(lookup func(string) (string, bool)) ([]Value, error) {
	key := p.Key
	if key == "" {
		key = "agent"
	}
	out := make([]Value, 0, len(p.Secrets))
	for _, s := range p.Secrets {
		v, err := s.read(lookup)
		if err != nil {
			return nil, fmt.Errorf("%s.secrets.%s: %w", key, s.Name, err)
		}
		out = append(out, Value{s.Name, v})
	}
	return out, nil
}

// Known returns the values of p's secrets that can be read now, leaving
// out those that cannot (ReadSecrets says why when an agent starts). The
// daemon gives them to its Redactor ahead of any agent: an agent of another
// profile may print a secret file it finds in the workspace.
func (p Profile) Known(lookup func(string) (string, bool)) []Value {
	var out []Value
	for _, s := range p.Secrets {
		if v, err := s.read(lookup); err == nil {
			out = append(out, Value{s.Name, v})
		}
	}
	return out
}

func (s Secret) read(lookup func(string) (string, bool)) (string, error) {
	if s.File == "" {
		v, ok := lookup(s.Env)
		switch {
		case !ok:
			return "", fmt.Errorf("%s is not set in the daemon's environment: export it where the daemon starts (then `loopr daemon restart`), or change the secret's source in loopr.yml", s.Env)
		case v == "":
			return "", fmt.Errorf("%s is empty in the daemon's environment: set it to the secret's value (then `loopr daemon restart`)", s.Env)
		case strings.ContainsRune(v, 0):
			return "", fmt.Errorf("%s contains a NUL byte, which no environment can carry", s.Env)
		}
		return v, nil
	}
	v, err := readSecretFile(s.File)
	if err != nil {
		return "", err
	}
	switch {
	case v == "":
		return "", fmt.Errorf("%s is empty: write the secret's value into it (one line)", s.File)
	case strings.ContainsRune(v, 0):
		return "", fmt.Errorf("%s contains a NUL byte, which no environment can carry: a secret file holds text", s.File)
	}
	return v, nil
}

// readSecretFile reads a regular file of at most MaxSecretBytes. Anything
// else is refused before it is read, and without blocking: a repository
// may hold a FIFO (a read would wait for a writer forever), a device, a
// directory or a huge file at the path loopr.yml names.
func readSecretFile(path string) (string, error) {
	const fix = "a secret file must be a regular file of at most 64 KiB holding the value"
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: write the secret's value into it (one line, readable by you only: chmod 600), or change the secret's source in loopr.yml", err)
	} else if err != nil {
		return "", err
	}
	if err := regular(path, fi, fix); err != nil {
		return "", err
	}
	// O_NONBLOCK: should the path become a FIFO after the Stat, the open
	// does not wait for a writer, and the check below refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return "", err
	}
	if err := regular(path, fi, fix); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxSecretBytes {
		return "", fmt.Errorf("%s is larger than 64 KiB: %s", path, fix)
	}
	v := string(data) // without one final newline, \n or \r\n
	if t, ok := strings.CutSuffix(v, "\r\n"); ok {
		return t, nil
	}
	return strings.TrimSuffix(v, "\n"), nil
}

// regular refuses what is not a regular file of at most MaxSecretBytes.
func regular(path string, fi fs.FileInfo, fix string) error {
	m := fi.Mode()
	switch {
	case m.IsRegular() && fi.Size() > MaxSecretBytes:
		return fmt.Errorf("%s is larger than 64 KiB (%d bytes): %s", path, fi.Size(), fix)
	case m.IsRegular():
		return nil
	case m.IsDir():
		return fmt.Errorf("%s is a directory: %s", path, fix)
	case m&fs.ModeNamedPipe != 0:
		return fmt.Errorf("%s is a named pipe (FIFO), not a regular file: %s", path, fix)
	case m&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return fmt.Errorf("%s is a device, not a regular file: %s", path, fix)
	case m&fs.ModeSocket != 0:
		return fmt.Errorf("%s is a socket, not a regular file: %s", path, fix)
	}
	return fmt.Errorf("%s is not a regular file (%s): %s", path, m.Type(), fix)
}
