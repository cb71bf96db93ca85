package gitflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// Who wrote a line (line comments, package review).
//
// Every commit loopr makes of a loop's work carries the trailer
// "Loopr-Loop: <full id>" (CommitMessage), so the commit that last touched
// a line of a plan branch (git blame) names the loop that wrote it. A
// commit without the trailer (the agent committed itself) is traced to the
// merge that brought it onto the branch's first-parent line, and the loop
// whose commits that merge brought in.

// LoopTrailer is the trailer key that names the loop a commit is the work of.
const LoopTrailer = "Loopr-Loop"

// MaxBlameFile bounds the size of a file a line comment reads.
const MaxBlameFile = 8 << 20

// ErrNoLine reports a path that is not a file at the commit, or a line
// past its end; the message says which.
var ErrNoLine = errors.New("no such line")

// checkPath accepts a relative, clean path inside the repository.
func checkPath(p string) error {
	switch {
	case p == "" || len(p) > 1024:
		return fmt.Errorf("%w: path %q: must be 1-1024 characters", ErrNoLine, p)
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, "-") || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == "..":
		return fmt.Errorf("%w: path %q: give a clean path relative to the repository's root (e.g. cmd/main.go)", ErrNoLine, p)
	case strings.ContainsAny(p, "\x00\n:"):
		return fmt.Errorf("%w: path %q: holds a character git paths here may not", ErrNoLine, p)
	}
	return nil
}

// FileAt returns the content of the file at path in commit, at most
// MaxBlameFile bytes; ErrNoLine when commit holds no such file.
func (r *Repo) FileAt(ctx context.Context, commit, p string) ([]byte, error) {
	if err := checkObject(commit); err != nil {
		return nil, err
	}
	if err := checkPath(p); err != nil {
		return nil, err
	}
	obj := commit + ":" + p
	out, err := r.git(ctx, r.Root, "cat-file", "-t", obj)
	if err != nil || strings.TrimSpace(out) != "blob" {
		return nil, fmt.Errorf("%w: %s is not a file at %s", ErrNoLine, p, loop.ShortCommit(commit))
	}
	out, err = r.git(ctx, r.Root, "cat-file", "-s", obj)
	if err != nil {
		return nil, err
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(out)); n > MaxBlameFile {
		return nil, fmt.Errorf("%w: %s is %d bytes at %s, more than the %d a comment reads", ErrNoLine, p, n, loop.ShortCommit(commit), MaxBlameFile)
	}
	out, err = r.git(ctx, r.Root, "cat-file", "blob", obj)
	return []byte(out), err
}

// Binary reports whether content is binary as git decides it: a NUL byte
// in its first 8000 bytes.
func Binary(content []byte) bool {
	return bytes.IndexByte(content[:min(len(content), 8000)], 0) >= 0
}

// LineCount is the number of lines of content (a last line without a
// newline counts).
func LineCount(content []byte) int {
	n := bytes.Count(content, []byte("\n"))
	if len(content) > 0 && content[len(content)-1] != '\n' {
		n++
	}
	return n
}

// BlameLine returns the commit that last touched line (1-based) of path
// in commit (`git blame --porcelain`).
func (r *Repo) BlameLine(ctx context.Context, commit, p string, line int) (string, error) {
	if err := checkObject(commit); err != nil {
		return "", err
	}
	if err := checkPath(p); err != nil {
		return "", err
	}
	if line < 1 {
		return "", fmt.Errorf("%w: line %d: lines count from 1", ErrNoLine, line)
	}
	l := strconv.Itoa(line)
	out, err := r.git(ctx, r.Root, "blame", "--porcelain", "-L", l+","+l, commit, "--", p)
	if err != nil {
		return "", fmt.Errorf("%w: %s:%d at %s: %v", ErrNoLine, p, line, loop.ShortCommit(commit), err)
	}
	first, _, _ := strings.Cut(out, " ")
	if checkObject(first) != nil {
		return "", fmt.Errorf("blame %s:%d: unexpected output %q", p, line, clipLines(out, 1))
	}
	return first, nil
}

// LoopsOf returns the loop ids the LoopTrailer of commit names (usually
// one; none for a commit loopr did not make).
func (r *Repo) LoopsOf(ctx context.Context, commit string) ([]string, error) {
	if err := checkObject(commit); err != nil {
		return nil, err
	}
	out, err := r.git(ctx, r.Root, "log", "-1", "--format=%(trailers:key="+LoopTrailer+",valueonly)", commit)
	if err != nil {
		return nil, err
	}
	return uniqueLines(out), nil
}

// LoopOfLine returns the loop that wrote commit, the commit blame named
// for a line of the branch at tip: the commit's trailer, else the loops
// whose trailers the merge that brought commit onto tip's first-parent
// line carries (when they name one loop). "" when nothing names a loop.
func (r *Repo) LoopOfLine(ctx context.Context, commit, tip string) (string, error) {
	ids, err := r.LoopsOf(ctx, commit)
	if err != nil || len(ids) > 0 {
		return first(ids), err
	}
	if err := checkObject(tip); err != nil {
		return "", err
	}
	// The oldest commit of tip's first-parent line that descends from
	// commit is the merge that brought it in; when its first parent is
	// commit itself, commit is on that line (the base's, say).
	out, err := r.git(ctx, r.Root, "rev-list", "--first-parent", commit+".."+tip)
	if err != nil {
		return "", err
	}
	line := uniqueLines(out)
	out, err = r.git(ctx, r.Root, "rev-list", "--ancestry-path", commit+".."+tip)
	if err != nil {
		return "", err
	}
	desc := map[string]bool{}
	for _, c := range uniqueLines(out) {
		desc[c] = true
	}
	merge := ""
	for i := len(line) - 1; i >= 0 && merge == ""; i-- {
		if desc[line[i]] {
			merge = line[i]
		}
	}
	if merge == "" {
		return "", nil
	}
	if p, err := r.git(ctx, r.Root, "rev-parse", "--verify", "--quiet", merge+"^1"); err != nil || strings.TrimSpace(p) == commit {
		return "", nil
	}
	out, err = r.git(ctx, r.Root, "log", "--format=%(trailers:key="+LoopTrailer+",valueonly)", merge+"^1.."+merge)
	if err != nil {
		return "", err
	}
	if ids := uniqueLines(out); len(ids) == 1 {
		return ids[0], nil
	}
	return "", nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// uniqueLines returns the non-empty lines of s, trimmed, each once, in order.
func uniqueLines(s string) []string {
	var out []string
	seen := map[string]bool{}
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}
