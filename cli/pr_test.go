package cli

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/workspace"
)

// TestPushBranchGone: `loopr pr` of a plan whose branch was deleted (by
// hand, after land) and that the remote does not hold says so, as the
// user's error, instead of git's "src refspec does not match any".
func TestPushBranchGone(t *testing.T) {
	t.Parallel()
	dir, bare := t.TempDir(), t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "--bare", bare},
		{"init", "-q", "-b", "main", dir},
		{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "--allow-empty", "-m", "one"},
		{"-C", dir, "remote", "add", "origin", bare},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	var out bytes.Buffer
	e := &env{stdout: &out, paths: workspace.Paths{Workspace: dir}}
	err := e.pushBranch(context.Background(), "origin", "loopr/p-gone0001")
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "loopr/p-gone0001 is gone") {
		t.Errorf("pushBranch(a deleted branch) = %v; want a usage error saying the branch is gone", err)
	}
	if err := e.pushBranch(context.Background(), "origin", "main"); err != nil {
		t.Errorf("pushBranch(main) = %v", err)
	}
}
