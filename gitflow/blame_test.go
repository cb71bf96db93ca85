package gitflow

import (
	"context"
	"errors"
	"testing"

	"github.com/loopr-dev/loopr/loop"
)

// TestLoopOfLine: the loop that wrote a line of the plan branch is found by
// the trailer of loopr's commit, or, for a commit the agent made itself,
// by the trailers of the merge that brought it in; a line of the base
// names no loop; a bad path or line is ErrNoLine.
func TestLoopOfLine(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	root := r.Root
	gitT(t, root, "branch", "plan")
	// Task A: loopr commits its work with the trailer.
	gitT(t, root, "checkout", "-q", "-b", "a", "plan")
	write(t, root, "a.txt", "a1\na2\n")
	gitT(t, root, "add", "-A")
	gitT(t, root, "commit", "-q", "-m", CommitMessage("ralph", "A", 1, "LOOPA"))
	// Task B: the agent commits itself (no trailer); loopr's empty
	// follow-up commit carries it.
	gitT(t, root, "checkout", "-q", "-b", "b", "plan")
	write(t, root, "b.txt", "b1\n")
	gitT(t, root, "add", "-A")
	gitT(t, root, "commit", "-q", "-m", "agent's own commit")
	gitT(t, root, "commit", "-q", "--allow-empty", "-m", CommitMessage("ralph", "B", 1, "LOOPB"))
	gitT(t, root, "checkout", "-q", "plan")
	gitT(t, root, "merge", "-q", "--no-ff", "-m", "merge a", "a")
	gitT(t, root, "merge", "-q", "--no-ff", "-m", "merge b", "b")
	gitT(t, root, "checkout", "-q", "main")
	tip := gitT(t, root, "rev-parse", "plan")

	for _, tt := range []struct {
		path string
		line int
		want string
	}{
		{"a.txt", 2, "LOOPA"},
		{"b.txt", 1, "LOOPB"},
		{"shared.txt", 1, ""}, // the base's
	} {
		c, err := r.BlameLine(ctx, tip, tt.path, tt.line)
		if err != nil {
			t.Fatalf("BlameLine(%s:%d) = %v", tt.path, tt.line, err)
		}
		got, err := r.LoopOfLine(ctx, c, tip)
		if err != nil || got != tt.want {
			t.Errorf("LoopOfLine(%s:%d, commit %s) = %q, %v; want %q", tt.path, tt.line, loop.ShortCommit(c), got, err, tt.want)
		}
	}
	for _, bad := range []struct {
		path string
		line int
	}{{"a.txt", 3}, {"a.txt", 0}, {"nope.txt", 1}, {"../x", 1}, {"/etc/passwd", 1}} {
		if _, err := r.BlameLine(ctx, tip, bad.path, bad.line); !errors.Is(err, ErrNoLine) {
			t.Errorf("BlameLine(%s:%d) = %v; want ErrNoLine", bad.path, bad.line, err)
		}
	}
	content, err := r.FileAt(ctx, tip, "a.txt")
	if err != nil || string(content) != "a1\na2\n" || LineCount(content) != 2 {
		t.Errorf("FileAt(a.txt) = %q, %v; want a1\\na2\\n (2 lines)", content, err)
	}
	if _, err := r.FileAt(ctx, tip, "nope.txt"); !errors.Is(err, ErrNoLine) {
		t.Errorf("FileAt(nope.txt) = %v; want ErrNoLine", err)
	}
}
