package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Landing (issue 22): `loopr land PLAN` merges a done plan's branch into
// the branch it started from, never touching uncommitted work.

// landAgent plans one phase of one task, which appends a line to README.md
// and adds feature.txt.
const landAgent = `#!/bin/sh
cat >/dev/null
case "$LOOPR_LOOP_TYPE" in
` + onePhase + `
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: Feature\nDo it.\n' >"$LOOPR_ARTIFACT" ;;
*)
	grep -q 'the feature' README.md || echo 'the feature' >>README.md
	echo feature >feature.txt
	;;
esac
`

// landRepo runs a plan tree to its end in a new repository whose main
// also holds other.txt, stops the daemon unless keep, and returns the repo
// and the plan. merge.validate, when given, is the configuration's.
func landRepo(t *testing.T, validate string, keep bool) (repo, loop.Loop, *daemonProc) {
	t.Helper()
	script := writeScript(t, "agent.sh", landAgent)
	extra := "git:\n  worktrees: true\n"
	if validate != "" {
		extra += fmt.Sprintf("merge:\n  validate: [%q]\n", validate)
	}
	r := newRepo(t, freshConfig(t, script, "{max_iterations: 3, validate: []}", extra))
	writeFile(t, filepath.Join(r.dir, "other.txt"), "other\n")
	r.git(t, "add", "other.txt")
	commit(t, r, "other.txt")
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "Add the feature", "--task", "add the feature")
	waitEvery(t, 120*time.Second, slowPoll, "the tree to be done", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		st := status(t, r)
		return len(st.ReadyToLand) == 1
	})
	plan := planOf(t, r)
	if plan.Base.Branch != "main" || plan.Branch == "" {
		t.Fatalf("plan branch %q base %+v; want a branch made from main", plan.Branch, plan.Base)
	}
	if !keep {
		d.stop()
	}
	return r, plan, d
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func commit(t *testing.T, r repo, msg string) {
	t.Helper()
	r.git(t, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", msg)
}

// refs is every ref of r and its commit, for "nothing moved".
func refs(t *testing.T, r repo) string {
	t.Helper()
	return r.git(t, "for-each-ref", "--format=%(refname) %(objectname)")
}

// refused checks that res is a refusal: exit 2, exactly one line on
// stderr containing want.
func refused(t *testing.T, res result, want string) {
	t.Helper()
	t.Logf("refused: %s", res.stderr)
	if res.code != 2 || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("land: exit %d, stderr %q; want exit 2 and one line naming %q\nstdout: %s", res.code, res.stderr, want, res.stdout)
	}
}

// TestLandFastForward: with the daemon running, --dry-run says fast
// forward and changes nothing; land fast-forwards main in the user's
// checkout and leaves an unrelated uncommitted change, a staged file and
// an untracked file exactly as they were; the plan records the landing and status
// stops listing it.
func TestLandFastForward(t *testing.T) {
	t.Parallel()
	r, plan, _ := landRepo(t, "", true)
	writeFile(t, filepath.Join(r.dir, "other.txt"), "my uncommitted edit\n")
	writeFile(t, filepath.Join(r.dir, "scratch.txt"), "untracked\n")
	writeFile(t, filepath.Join(r.dir, "staged.txt"), "staged\n")
	r.git(t, "add", "staged.txt")
	before, refsBefore := r.checkout(t), refs(t, r)
	readme := readFile(t, filepath.Join(r.dir, "README.md"))

	out := ok(t, r.dir, "land", loop.ShortID(plan.ID), "--dry-run")
	if !strings.Contains(out, "fast-forward") || !strings.Contains(out, "feature.txt") || !strings.Contains(out, "README.md") {
		t.Errorf("land --dry-run does not say fast-forward and name the files:\n%s", out)
	}
	if after := r.checkout(t); after != before || refs(t, r) != refsBefore || readFile(t, filepath.Join(r.dir, "README.md")) != readme {
		t.Fatalf("land --dry-run changed something: checkout %+v → %+v", before, after)
	}

	t.Logf("land --dry-run:\n%s", out)
	planTip := r.git(t, "rev-parse", plan.Branch)
	out = ok(t, r.dir, "land", plan.ID)
	t.Logf("land:\n%s", out)
	if got := r.git(t, "rev-parse", "main"); got != planTip {
		t.Fatalf("main = %s after land, want the plan tip %s (a fast forward)\n%s", got, planTip, out)
	}
	if got := readFile(t, filepath.Join(r.dir, "other.txt")); got != "my uncommitted edit\n" {
		t.Errorf("other.txt = %q after land, want the uncommitted edit kept", got)
	}
	if got := readFile(t, filepath.Join(r.dir, "scratch.txt")); got != "untracked\n" {
		t.Errorf("scratch.txt = %q after land", got)
	}
	if got := r.git(t, "status", "--porcelain"); got != before.status {
		t.Errorf("git status after land:\n%s\nwant as before:\n%s", got, before.status)
	}
	if !strings.Contains(readFile(t, filepath.Join(r.dir, "README.md")), "the feature") {
		t.Errorf("README.md in the checkout lacks the plan's change after a fast forward")
	}
	l := show(t, r, plan.ID)
	if l.Landed.Into != "main" || l.Landed.Commit != planTip || l.Landed.Mode != loop.LandFastForward {
		t.Errorf("plan's landed = %+v; want into main at %s, fast-forward", l.Landed, planTip)
	}
	text := ok(t, r.dir, "show", loop.ShortID(plan.ID))
	for _, want := range []string{plan.Branch, "main@" + plan.Base.Commit[:12], "landed", "fast-forward"} {
		if !strings.Contains(text, want) {
			t.Errorf("loopr show of the landed plan lacks %q:\n%s", want, text)
		}
	}
	for _, task := range list(t, r) {
		if task.Type == loop.Ralph {
			var js map[string]any
			mustJSON(t, ok(t, r.dir, "show", task.ID, "--json"), &js)
			if js["workdir_removed"] != true || js["branch"] != task.Branch || task.Branch == "" {
				t.Errorf("show --json of the complete task: workdir_removed %v, branch %v; want its removed worktree said and its branch", js["workdir_removed"], js["branch"])
			}
		}
	}
	if st := status(t, r); len(st.ReadyToLand) != 0 {
		t.Errorf("status lists %+v as ready to land after the landing", st.ReadyToLand)
	}
	if ev := ok(t, r.dir, "events", plan.ID); !strings.Contains(ev, "landed") {
		t.Errorf("the plan's journal has no landed event:\n%s", ev)
	}
}

// TestLandRefusesDirtyFile: an uncommitted change to a file the plan
// changed: land refuses (exit 2, one line), nothing moves, the change is
// kept.
func TestLandRefusesDirtyFile(t *testing.T) {
	t.Parallel()
	r, plan, _ := landRepo(t, "", false)
	writeFile(t, filepath.Join(r.dir, "README.md"), "# mine\n")
	before, refsBefore := r.checkout(t), refs(t, r)
	refused(t, run(t, r.dir, "", "land", plan.ID), "README.md")
	if after := r.checkout(t); after != before || refs(t, r) != refsBefore {
		t.Errorf("a refused land changed something: %+v → %+v", before, after)
	}
	if got := readFile(t, filepath.Join(r.dir, "README.md")); got != "# mine\n" {
		t.Errorf("README.md = %q, want the uncommitted change kept", got)
	}
	if l := show(t, r, plan.ID); l.Landed != (loop.Landed{}) {
		t.Errorf("a refused land recorded %+v", l.Landed)
	}
}

// TestLandMergeCommit: main moved without conflict and is not checked out
// anywhere: land validates the merge in a temporary worktree (merge.validate
// sees both sides; the merge queue's runs see only the plan's side) and moves main to a merge commit of the old main and the
// plan branch.
func TestLandMergeCommit(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "validated")
	r, plan, _ := landRepo(t, fmt.Sprintf("if test -f feature.txt && test -f later.txt; then pwd >%s; fi", marker), false)
	writeFile(t, filepath.Join(r.dir, "later.txt"), "later\n")
	r.git(t, "add", "later.txt")
	commit(t, r, "later on main")
	oldMain, planTip := r.git(t, "rev-parse", "main"), r.git(t, "rev-parse", plan.Branch)
	r.git(t, "checkout", "-q", "-b", "elsewhere")

	res := run(t, r.dir, "", "land", plan.ID)
	if res.code != 0 {
		t.Fatalf("land: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	parents := strings.Fields(r.git(t, "rev-list", "--parents", "-n", "1", "main"))
	if len(parents) != 3 || parents[1] != oldMain || parents[2] != planTip {
		t.Errorf("main's commit and parents = %v; want a merge of %s and %s\n%s", parents, oldMain, planTip, res.stdout)
	}
	dir := strings.TrimSpace(readFile(t, marker))
	if !strings.HasPrefix(dir, r.home) {
		t.Errorf("merge.validate ran in %s, want a temporary worktree under %s", dir, r.home)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the validation worktree %s is still there", dir)
	}
	if l := show(t, r, plan.ID); l.Landed.Mode != loop.LandMerge || l.Landed.Commit != parents[0] {
		t.Errorf("landed = %+v, want a merge at %s", l.Landed, parents[0])
	}
	if got := r.git(t, "symbolic-ref", "--short", "HEAD"); got != "elsewhere" {
		t.Errorf("HEAD = %s, want the user's branch untouched", got)
	}
}

// TestLandRefusesConflict: main moved and conflicts with the plan branch:
// land refuses (exit 2, one line naming the file), and so does its dry run;
// nothing moves.
func TestLandRefusesConflict(t *testing.T) {
	t.Parallel()
	r, plan, _ := landRepo(t, "", false)
	writeFile(t, filepath.Join(r.dir, "README.md"), "# rewritten on main\n")
	r.git(t, "add", "README.md")
	commit(t, r, "rewrite README on main")
	before, refsBefore := r.checkout(t), refs(t, r)
	refused(t, run(t, r.dir, "", "land", plan.ID, "--dry-run"), "README.md")
	refused(t, run(t, r.dir, "", "land", plan.ID), "conflicts")
	if after := r.checkout(t); after != before || refs(t, r) != refsBefore {
		t.Errorf("a refused land changed something: %+v → %+v", before, after)
	}
}

// TestUncommittedWarning: `loopr plan` and `loopr add` of a root loop warn,
// one line on stderr and exit 0, when the working tree has uncommitted
// changes (the agents start from the last commit); a clean tree, or a
// child loop, gets no warning. (Without git.worktrees the agents work in
// the workspace itself and see everything: no warning then.)
func TestUncommittedWarning(t *testing.T) {
	t.Parallel()
	r := newRepo(t, strings.Replace(cliConfig(t), "worktrees: false", "worktrees: true", 1))
	res := run(t, r.dir, "", "add", "--no-start", "--type", "plan", "--title", "Clean", "--task", "x")
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("add on a clean tree: exit %d, stderr %q; want no warning", res.code, res.stderr)
	}
	parent := planOf(t, r)
	writeFile(t, filepath.Join(r.dir, "README.md"), "# edited\n")
	writeFile(t, filepath.Join(r.dir, "new.txt"), "new\n")
	for _, args := range [][]string{{"plan", "--no-start", "Add a thing"}, {"add", "--no-start", "--type", "ralph", "--task", "y"}} {
		res = run(t, r.dir, "", args...)
		if res.code != 0 || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, "2 files") || !strings.Contains(res.stderr, "git stash") {
			t.Errorf("loopr %s with 2 uncommitted files: exit %d, stderr %q; want exit 0 and one warning line", strings.Join(args, " "), res.code, res.stderr)
		}
	}
	res = run(t, r.dir, "", "add", "--no-start", "--type", "spec", "--parent", parent.ID, "--task", "z")
	if res.code != 0 || res.stderr != "" {
		t.Errorf("add --parent: exit %d, stderr %q; want no warning (a child starts from its plan's branch)", res.code, res.stderr)
	}
}
