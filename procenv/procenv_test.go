package procenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  []string
		dir  string
		want []string
	}{
		{"replaces PWD and drops OLDPWD", []string{"A=1", "PWD=/home/u/repo", "OLDPWD=/x", "B=2"}, "/w/t1", []string{"A=1", "B=2", "PWD=/w/t1"}},
		{"adds PWD when missing", []string{"A=1"}, "/w", []string{"A=1", "PWD=/w"}},
		{"no dir drops PWD", []string{"PWD=/home/u/repo"}, "", []string{}},
		{"a variable named like PWD is kept", []string{"PWDX=1", "MYPWD=2"}, "/w", []string{"PWDX=1", "MYPWD=2", "PWD=/w"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]string(nil), tc.env...)
			got := InDir(tc.env, tc.dir)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InDir() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(in, tc.env); diff != "" {
				t.Errorf("InDir() modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

// TestChildSeesDir runs a real process the way loopr starts its children: an
// explicit environment carrying the parent's PWD, and cmd.Dir set. printenv
// shows the variable as a program that trusts PWD (opencode, node's
// process.env.PWD) reads it; a POSIX shell would quietly repair it.
func TestChildSeesDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := t.TempDir()
	env := append(os.Environ(), "PWD="+other)

	run := func(env []string) string {
		cmd := exec.Command("printenv", "PWD")
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(env); got != other {
		t.Fatalf("without InDir the child's PWD = %q, want the parent's %q (Go no longer leaks it?)", got, other)
	}
	got := run(InDir(env, dir))
	want, _ := filepath.EvalSymlinks(dir)
	if got != dir && got != want {
		t.Errorf("with InDir the child's PWD = %q, want %q", got, dir)
	}
	if strings.Contains(got, other) {
		t.Errorf("the child still sees the parent's directory %q", other)
	}
}
