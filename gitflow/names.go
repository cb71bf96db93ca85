package gitflow

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
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
	case strings.HasPrefix(id, integrationPrefix), strings.HasPrefix(id, cleanPrefix):
		return fmt.Errorf("%w: id %q: prefixes %q and %q are reserved for loopr", ErrInvalidID, id, integrationPrefix, cleanPrefix)
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

// checkOurs accepts the branch names loopr creates and deletes: checkBranch
// names under loopr/.
func checkOurs(branch string) error {
	if err := checkBranch(branch); err != nil {
		return err
	}
	if !strings.HasPrefix(branch, "loopr/") {
		return fmt.Errorf("%w: branch %q: not under loopr/", ErrInvalidID, branch)
	}
	return nil
}

// integrationName is the directory under <home>/worktrees where merges into
// branch happen. into has passed checkBranch, so the name is one safe path
// element.
func integrationName(into string) string {
	return integrationPrefix + strings.ReplaceAll(into, "/", "-")
}

// HasBranch reports whether the branch exists.
func (r *Repo) HasBranch(ctx context.Context, branch string) (bool, error) {
	if err := checkBranch(branch); err != nil {
		return false, err
	}
	return r.branchExists(ctx, branch)
}

// BaseOf returns where branch, just made from base, starts: base's name
// (for "HEAD", the branch checked out in the repository, "" when HEAD is
// detached) and the commit branch points at. Right after the branch was
// made that is the commit it was made from, whatever base has moved to
// since.
func (r *Repo) BaseOf(ctx context.Context, branch, base string) (loop.Base, error) {
	if err := checkBranch(branch); err != nil {
		return loop.Base{}, err
	}
	commit, err := r.resolve(ctx, "refs/heads/"+branch)
	if err != nil {
		return loop.Base{}, err
	}
	name := base
	if base == "HEAD" {
		out, err := r.git(ctx, r.Root, "symbolic-ref", "--quiet", "--short", "HEAD")
		switch exitCode(err) {
		case 0:
			name = strings.TrimSpace(out)
		case 1:
			name = "" // detached
		default:
			return loop.Base{}, err
		}
	}
	return loop.Base{Branch: name, Commit: commit}, nil
}

// branchExists reports whether refs/heads/<branch> exists.
// OurBranches returns loopr's local branches (refs/heads/loopr/…) by name,
// in one git command.
func (r *Repo) OurBranches(ctx context.Context) (map[string]bool, error) {
	out, err := r.git(ctx, r.Root, "for-each-ref", "--format=%(refname:short)", "refs/heads/loopr/")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, b := range strings.Split(out, "\n") {
		if b = strings.TrimSpace(b); b != "" {
			set[b] = true
		}
	}
	return set, nil
}

func (r *Repo) branchExists(ctx context.Context, branch string) (bool, error) {
	return r.gitTest(ctx, "show-ref", "--verify", "--quiet", "refs/heads/"+branch)
}

// gitTest runs a git command that answers yes (exit 0) or no (exit 1) in
// the repository; any other exit is an error.
func (r *Repo) gitTest(ctx context.Context, args ...string) (bool, error) {
	_, err := r.git(ctx, r.Root, args...)
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

// Branch names.
//
// A plan's integration branch and a ralph loop's working branch are named
// loopr/<slug>-<short-id>: the slug is the loop's title made of lowercase
// ASCII letters, digits and '-' (at most SlugMax characters, no '-' at
// either end; "" when nothing is left, and then the name is
// loopr/<short-id>); the short id is the last 8 characters of a ULID,
// lowercased (its random part: unique in practice), or the whole id when
// the id is not a ULID. A title never changes, so the name is computed
// the same way every time and stored nowhere. Loops created by an older
// loopr have branch loopr/<id>: Branch finds it first.

// SlugMax is the longest slug a branch name carries.
const SlugMax = 40

// BranchName returns loopr/<slug>-<short-id> for a loop's id and title.
func BranchName(id, title string) string {
	short := ShortID(id)
	if s := Slug(title); s != "" {
		return "loopr/" + s + "-" + short
	}
	return "loopr/" + short
}

// LegacyBranch is the branch name of loops created before branch names
// carried titles: loopr/<id>.
func LegacyBranch(id string) string { return "loopr/" + id }

// ShortID is the part of id a branch name carries: loop.ShortID.
func ShortID(id string) string { return loop.ShortID(id) }

// Slug makes a branch-name part of a title: ASCII letters lowercased,
// digits kept, every other run of characters one '-', at most SlugMax
// characters, no '-' at either end.
func Slug(title string) string {
	var b strings.Builder
	dash := false
	for _, c := range title {
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
			fallthrough
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(c)
		default:
			dash = true
		}
		if b.Len() >= SlugMax {
			break
		}
	}
	s := b.String()
	if len(s) > SlugMax {
		s = s[:SlugMax]
	}
	return strings.TrimRight(s, "-")
}

// Branch returns the branch of the loop id with title: its legacy name
// loopr/<id> when a branch of that name exists (a loop created by an older
// loopr) — here or, with Remote, on the remote as last fetched — else
// BranchName(id, title).
func (r *Repo) Branch(ctx context.Context, id, title string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	legacy := LegacyBranch(id)
	ok, err := r.branchExists(ctx, legacy)
	if err == nil && !ok && r.Remote != "" {
		_, ok, err = r.tip(ctx, r.tracking(legacy))
	}
	if err != nil {
		return "", err
	}
	if ok {
		return legacy, nil
	}
	return BranchName(id, title), nil
}

// CommitMessage is the message of the commit that saves an iteration's
// work of loop id: loopr: <type> "<title>" iteration <n>, the title with
// control characters escaped, quotes backslashed and clipped to
// CommitTitleMax characters, and the trailer "Loopr-Loop: <id>" (LoopTrailer:
// blame finds the loop that wrote a line by it) when id is valid.
func CommitMessage(typ, title string, iteration int, id string) string {
	t := termsafe.Line(title)
	t = strings.ReplaceAll(t, `"`, `\"`)
	if r := []rune(t); len(r) > CommitTitleMax {
		t = strings.TrimRight(string(r[:CommitTitleMax-1]), " ") + "…"
	}
	msg := "loopr: " + typ + ` "` + t + `" iteration ` + strconv.Itoa(iteration)
	if checkID(id) == nil {
		msg += "\n\n" + LoopTrailer + ": " + id
	}
	return msg
}

// CommitTitleMax is the most characters of a title a commit message
// carries.
const CommitTitleMax = 60
