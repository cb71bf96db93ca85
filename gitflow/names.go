package gitflow

import (
	"context"
	"fmt"
	"strings"
)

// integrationPrefix starts the names of the integration worktrees that Merge
// keeps under <home>/worktrees. Loop ids may not use it.
const integrationPrefix = "_merge-"

// checkID accepts the ids loop.ValidID accepts — 1 to 64 characters of
// [A-Za-z0-9_-], not starting with '-' — minus the reserved integration
// prefix. Such an id is a single, harmless path element and ref component.
func checkID(id string) error {
	switch {
	case id == "" || len(id) > 64:
		return fmt.Errorf("%w: id %q: must be 1-64 characters", ErrInvalidID, id)
	case id[0] == '-':
		return fmt.Errorf("%w: id %q: must not start with '-'", ErrInvalidID, id)
	case strings.HasPrefix(id, integrationPrefix):
		return fmt.Errorf("%w: id %q: prefix %q is reserved for loopr", ErrInvalidID, id, integrationPrefix)
	}
	for i := 0; i < len(id); i++ {
		if !idByte(id[i]) {
			return fmt.Errorf("%w: id %q: only letters, digits, '-' and '_' are allowed", ErrInvalidID, id)
		}
	}
	return nil
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// checkBranch accepts branch names made of '/'-separated components of
// [A-Za-z0-9._-] that git would accept too: no empty component, none starting
// with '.' or '-' or ending in ".lock", no "..". This is stricter than git on
// purpose: the name also becomes an integration worktree's directory name.
func checkBranch(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: branch %q: %s", ErrInvalidID, name, why) }
	if name == "" || len(name) > 200 {
		return bad("must be 1-200 characters")
	}
	if strings.Contains(name, "..") {
		return bad(`must not contain ".."`)
	}
	for comp := range strings.SplitSeq(name, "/") {
		switch {
		case comp == "":
			return bad("empty path component")
		case comp[0] == '.' || comp[0] == '-':
			return bad("a component starts with '.' or '-'")
		case strings.HasSuffix(comp, ".lock"):
			return bad(`a component ends in ".lock"`)
		}
		for i := 0; i < len(comp); i++ {
			if !idByte(comp[i]) && comp[i] != '.' {
				return bad("only letters, digits, '.', '-', '_' and '/' are allowed")
			}
		}
	}
	if strings.HasSuffix(name, ".") {
		return bad("must not end with '.'")
	}
	return nil
}

// integrationName is the directory under <home>/worktrees where merges into
// branch happen. into has passed checkBranch, so the name is one safe path
// element.
func integrationName(into string) string {
	return integrationPrefix + strings.ReplaceAll(into, "/", "-")
}

// branchExists reports whether refs/heads/<branch> exists.
func (r *Repo) branchExists(ctx context.Context, branch string) (bool, error) {
	_, err := r.git(ctx, r.Root, "show-ref", "--verify", "--quiet", "refs/heads/"+branch)
	switch exitCode(err) {
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, err
}

// resolve returns the commit id rev names.
func (r *Repo) resolve(ctx context.Context, rev string) (string, error) {
	if rev == "" || rev[0] == '-' {
		return "", fmt.Errorf("%w: revision %q", ErrInvalidID, rev)
	}
	out, err := r.git(ctx, r.Root, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("revision %q is not a commit: %w", rev, err)
	}
	return strings.TrimSpace(out), nil
}
