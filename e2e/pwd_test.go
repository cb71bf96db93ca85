package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// TestAgentPWDIsItsWorktree (issue 20.1): the daemon runs from the user's
// checkout, so its PWD names that checkout. An agent, and its validate
// command, must see PWD name their own worktree: opencode takes its project
// directory from PWD and edited the user's checkout.
func TestAgentPWDIsItsWorktree(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	// The agent writes what it sees outside any worktree, then a file to commit.
	// /proc/$$/environ is the environment exactly as loopr passed it: a
	// POSIX shell repairs its own $PWD, node's process.env.PWD does not.
	const seen = `printf '%s\n%s\n' "$(pwd -L)" "$(tr '\0' '\n' < /proc/$$/environ | sed -n 's/^PWD=//p')"`
	agent := seen + ` > "` + out + `/agent-$LOOPR_ITERATION"; echo work > work.txt`
	validate := seen + ` > "` + out + `/validate"`
	r := newRepo(t, `scheduler: {poll_interval_secs: 1}
agent:
  command: ["sh", "-c", `+quoteYAML(agent)+`]
  timeout_secs: 60
loops:
  ralph: {max_iterations: 2, validate: [`+quoteYAML(validate)+`]}
git: {worktrees: true}
storage: {disk_quota_min_gb: 0}
`)
	startDaemonEnv(t, r, "PWD="+r.dir, "OLDPWD="+r.dir)
	var created struct{ ID string }
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "pwd", "--task", "write work.txt", "--json"), &created)
	waitFor(t, 120*time.Second, "the ralph loop to complete", func() bool {
		l := show(t, r, created.ID)
		if l.Status == loop.Failed || l.Status == loop.NeedsHuman {
			t.Fatalf("loop %s: %s (%s)", l.ID, l.Status, l.Reason)
		}
		return l.Status == loop.Complete
	})
	for _, name := range []string{"agent-1", "validate"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s wrote %q, want two lines", name, b)
		}
		for i, what := range []string{"pwd -L", "PWD as passed"} {
			got := lines[i]
			if got == r.dir || !strings.Contains(got, string(filepath.Separator)+"worktrees"+string(filepath.Separator)) {
				t.Errorf("%s: %s = %q, want the loop's worktree (not the daemon's directory %q)", name, what, got, r.dir)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "work.txt")); err == nil {
		t.Errorf("the agent's file landed in the user's checkout")
	}
}

// quoteYAML quotes s as a YAML double-quoted scalar.
func quoteYAML(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
