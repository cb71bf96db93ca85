package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// diffFiles is a diff's files as "status path +added -removed".
func diffFiles(d api.Diff) []string {
	var out []string
	for _, f := range d.Files {
		out = append(out, fmt.Sprintf("%s %s +%d -%d", f.Status, f.Path, f.Added, f.Removed))
	}
	return out
}

// TestDiff: a scripted agent writes known files in three tasks; two merge,
// one fails validation and keeps its branch. `loopr diff --json` lists
// exactly each task's files with their counts (merged or not, whatever
// the plan branch did meanwhile), --stat and --name-only agree, the plan's
// diff against its base holds the merged work only and is a patch git
// applies to the base, and a loop without a branch is refused with exit 2.
func TestDiff(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(treeConfig(t, 1, validateCmd(t)), abs(t, "testdata/agent.sh"), abs(t, "testdata/diffagent.sh"), 1)
	r := newRepo(t, cfg)
	base := r.git(t, "rev-parse", "HEAD")
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "diffs", "--task", "three tasks")
	waitEvery(t, 120*time.Second, slowPoll, "Alpha and Beta complete, Gamma failed", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		tasks := ralphs(list(t, r))
		return tasks["Alpha"].Status == loop.Complete && tasks["Beta"].Status == loop.Complete && tasks["Gamma"].Status == loop.Failed
	})
	loops := list(t, r)
	tasks := ralphs(loops)
	diffJSON := func(id string) api.Diff {
		t.Helper()
		var out api.Diff
		mustJSON(t, ok(t, r.dir, "diff", "--json", id), &out)
		return out
	}
	for _, tc := range []struct {
		title, kind string
		want        []string
	}{
		{"Alpha", api.DiffMerged, []string{"modified README.md +1 -0", "added alpha.go +3 -0"}},
		{"Beta", api.DiffMerged, []string{"added beta notes.txt +2 -0"}},
		{"Gamma", api.DiffTask, []string{"added gamma.go +1 -0", "added out/gamma.txt +1 -0"}},
	} {
		got := diffJSON(tasks[tc.title].ID)
		if diff := cmp.Diff(tc.want, diffFiles(got)); diff != "" || got.Kind != tc.kind {
			t.Errorf("diff --json %s: kind %s, files mismatch (-want +got):\n%s", tc.title, got.Kind, diff)
		}
	}

	// --stat, aligned as git's; --name-only.
	stat := ok(t, r.dir, "diff", "--stat", tasks["Alpha"].ID)
	wantStat := " README.md | 1 +\n alpha.go  | 3 +++\n 2 files changed, 4 insertions(+)\n"
	if stat != wantStat {
		t.Errorf("diff --stat Alpha =\n%s\nwant\n%s", stat, wantStat)
	}
	if got := ok(t, r.dir, "diff", "--name-only", tasks["Beta"].ID); got != "beta notes.txt\n" {
		t.Errorf("diff --name-only Beta = %q", got)
	}

	// The plan against its base: the merged work, not Gamma's.
	var plan loop.Loop
	for _, l := range loops {
		if l.Type == loop.Plan {
			plan = l
		}
	}
	pd := diffJSON(plan.ID)
	want := []string{"modified README.md +1 -0", "added alpha.go +3 -0", "added beta notes.txt +2 -0"}
	if diff := cmp.Diff(want, diffFiles(pd)); diff != "" || pd.Kind != api.DiffPlan || pd.From.Commit != base || pd.To.Branch != plan.Branch {
		t.Errorf("diff --json plan: kind %s from %+v to %+v; files mismatch (-want +got):\n%s", pd.Kind, pd.From, pd.To, diff)
	}
	// Its patch (no colour: not a terminal) is one git applies to the base.
	patch := ok(t, r.dir, "diff", plan.ID)
	if strings.Contains(patch, "\x1b[") || !strings.Contains(patch, "diff --git a/alpha.go b/alpha.go") {
		t.Errorf("diff plan: colour escapes or no alpha.go header:\n%s", patch)
	}
	wt := filepath.Join(t.TempDir(), "base")
	r.git(t, "worktree", "add", "--detach", wt, base)
	apply := exec.Command("git", "apply", "--check", "-")
	apply.Dir, apply.Stdin = wt, strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Errorf("git apply --check of loopr diff's patch on the base: %v\n%s\n%s", err, out, patch)
	}

	// Loops with no diff: one line, exit 2.
	for _, l := range loops {
		if l.Type != loop.Spec {
			continue
		}
		res := run(t, r.dir, "", "diff", l.ID)
		if res.code != 2 || !strings.Contains(res.stderr, "no branch of its own") || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("diff of a spec: exit %d, stderr %q; want 2 and one line saying it has no branch", res.code, res.stderr)
		}
	}
	if res := run(t, r.dir, "", "diff", "--stat", "--json", plan.ID); res.code != 2 {
		t.Errorf("diff --stat --json: exit %d, want 2", res.code)
	}
	diffTUI(t, r, tasks["Alpha"])

	// Without the daemon, from the store and the repository.
	stopCleanly(t, r, d).Close()
	if got := diffJSON(tasks["Beta"].ID); !cmp.Equal(diffFiles(got), []string{"added beta notes.txt +2 -0"}) {
		t.Errorf("diff --json Beta without a daemon: %v", diffFiles(got))
	}
}

// diffTUI opens the diff view of task in `loopr tui` in a real 80×24
// terminal against the daemon: the files with their counts, the code with
// its line numbers, tab to the next file, a line cut rather than wrapped,
// and c on a line sending a comment that reaches the task, esc back to
// the tree.
func diffTUI(t *testing.T, r repo, task loop.Loop) {
	t.Helper()
	tm := newTmux(t)
	script := fmt.Sprintf("cd %q && %q tui --no-start; echo TUI-EXITED $?; sleep 30", r.dir, bin)
	tm.run("new-session", "-d", "-s", "tui", "-x", "80", "-y", "24", "-e", "NO_COLOR=1", "-e", "LOOPR_HOME=", "sh", "-c", script)
	tm.waitScreen("tree", "diffs", "? help")
	tm.keys("/")
	tm.keys("-l", "Alpha")
	tm.keys("Enter")
	tm.waitScreen("filtered", "filter /Alpha")
	tm.keys("d")
	screen := tm.waitScreen("diff view", "DIFF", "M README.md", "+1 −0", "A alpha.go", "+3 −0", "@@ -1 +1,2 @@", "2 + alpha was here")
	for i, l := range strings.Split(screen, "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("line %d wider than 80: %q", i, l)
		}
	}
	tm.keys("Tab")
	tm.waitScreen("next file", "file 2/2", "1 + package alpha", `3 + const Name = "alpha"`)
	tm.keys("j")
	tm.keys("c")
	tm.waitScreen("comment prompt", "comment on alpha.go:1")
	tm.keys("-l", "name it Alpha")
	tm.keys("Enter")
	tm.waitScreen("comment sent", "comment sent on alpha.go:1")
	// It reached the task, on the line the cursor was on.
	var got []api.Comment
	mustJSON(t, ok(t, r.dir, "comments", "--json", task.ID), &got)
	if len(got) != 1 || got[0].Loop != task.ID || got[0].Path != "alpha.go" || got[0].Line != 1 || got[0].Text != "name it Alpha" {
		t.Errorf("comments after c in the diff view: %+v; want one on alpha.go:1 of %s", got, task.ID)
	}
	tm.keys("Escape")
	tm.waitGone("diff closed", "DIFF")
	tm.keys("q")
	tm.waitScreen("quit", "TUI-EXITED 0")
}
