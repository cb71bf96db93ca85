package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Fresh bases (merge.refresh): before each iteration, a task's branch gets
// its plan branch's current tip.

// appendAgent plans one phase of two tasks that both append to NOTES.md.
// At iteration 1 each task waits for the other to start, so both branches
// are made before either merges: the second to merge conflicts. A task
// that finds conflict markers keeps the prompt's section about them in
// $LOOPR_HOME/conflict-<id>-<iteration> and resolves them by keeping both
// sides.
const appendAgent = `#!/bin/sh
cat >/dev/null
case "$LOOPR_LOOP_TYPE" in
` + onePhase + `
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: One\nDo it.\n\n### Task 2: Two\nDo it too.\n' >"$LOOPR_ARTIFACT" ;;
*)
	if [ "$LOOPR_ITERATION" = 1 ]; then
		touch "$LOOPR_HOME/started-$LOOPR_LOOP_ID"
		n=0
		while [ "$(ls "$LOOPR_HOME" | grep -c '^started-')" -lt 2 ] && [ $n -lt 600 ]; do
			sleep 0.1
			n=$((n + 1))
		done
	fi
	if grep -q '^<<<<<<<' NOTES.md 2>/dev/null; then
		sed -n '/^## First: finish the merge/,/^## How to work/p' "$LOOPR_PROMPT_FILE" >"$LOOPR_HOME/conflict-$LOOPR_LOOP_ID-$LOOPR_ITERATION"
		grep -vE '^(<<<<<<<|=======|>>>>>>>)' NOTES.md >NOTES.tmp && mv NOTES.tmp NOTES.md
	fi
	grep -qx "work of $LOOPR_LOOP_ID" NOTES.md 2>/dev/null || echo "work of $LOOPR_LOOP_ID" >>NOTES.md
	;;
esac
`

// freshConfig is a loopr.yml for the scripted agent at script: ralph's
// settings (a YAML flow mapping), short backoffs, and extra YAML at the end.
func freshConfig(t *testing.T, script, ralph string, extra ...string) string {
	t.Helper()
	agent, _ := json.Marshal([]string{"sh", script})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
  no_progress_limit: 3
agent:
  preset: command
  command: %s
loops:
  plan: {require_approval: false}
  ralph: %s
storage:
  disk_quota_min_gb: 0
%s`, agent, ralph, strings.Join(extra, ""))
}

func writeScript(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFreshBaseTwoTasksAppend: two tasks append to one file. The second
// to merge conflicts; its next iteration starts with the plan branch merged
// in and the conflict left to resolve, its prompt names the file, and both
// complete with no person involved, at most one extra iteration each. On a
// stale base the second conflicted at every iteration (needs_human).
func TestFreshBaseTwoTasksAppend(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", appendAgent)
	check := writeScript(t, "check.sh", "#!/bin/sh\n! grep -qE '^(<<<<<<<|=======|>>>>>>>)' NOTES.md\n")
	r := newRepo(t, freshConfig(t, script, fmt.Sprintf("{max_iterations: 5, validate: [\"sh %s\"]}", check)))
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "notes", "--task", "write notes")
	var tasks []loop.Loop
	waitEvery(t, 120*time.Second, slowPoll, "both tasks complete", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		tasks = tasks[:0]
		done := 0
		for _, l := range list(t, r) {
			if l.Type != loop.Ralph {
				continue
			}
			tasks = append(tasks, l)
			switch l.Status {
			case loop.Complete:
				done++
			case loop.NeedsHuman, loop.Failed:
				t.Fatalf("task %s is %s (%s); want it to resolve the conflict itself\n%s", l.ID, l.Status, l.Reason, describe(list(t, r)))
			}
		}
		return len(tasks) == 2 && done == 2
	})
	extra := 0
	for _, l := range tasks {
		if l.Iteration > 2 {
			t.Errorf("task %s completed at iteration %d, want at most 2", l.ID, l.Iteration)
		}
		extra += l.Iteration - 1
	}
	if extra != 1 {
		t.Errorf("extra iterations = %d, want 1 (the second to merge conflicts once)\n%s", extra, describe(list(t, r)))
	}
	seen, _ := filepath.Glob(filepath.Join(r.home, "conflict-*"))
	if len(seen) != 1 {
		t.Fatalf("prompts with a conflict section: %v, want exactly 1", seen)
	}
	b, err := os.ReadFile(seen[0])
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "- NOTES.md") || !strings.Contains(s, "concludes the merge") {
		t.Errorf("the conflict section of the prompt does not name NOTES.md or say loopr concludes the merge:\n%s", s)
	}
	plan := planOf(t, r)
	notes := r.git(t, "show", plan.Branch+":NOTES.md")
	for _, l := range tasks {
		if !strings.Contains(notes, "work of "+l.ID) {
			t.Errorf("NOTES.md on %s lacks the work of %s:\n%s", plan.Branch, l.ID, notes)
		}
	}
	if strings.Contains(notes, "<<<<<<<") {
		t.Errorf("NOTES.md on %s holds conflict markers:\n%s", plan.Branch, notes)
	}
}

// planOf returns the plan loop of r's only tree.
func planOf(t *testing.T, r repo) loop.Loop {
	t.Helper()
	for _, l := range list(t, r) {
		if l.Type == loop.Plan {
			return l
		}
	}
	t.Fatalf("no plan loop\n%s", describe(list(t, r)))
	return loop.Loop{}
}

// waitAgent plans one phase of two tasks, "Ask" and "Fail", that pass only
// once BASE.txt (which the test commits on the plan branch while they wait)
// is in their worktree: until then Ask asks a question and Fail fails.
const waitAgent = `#!/bin/sh
cat >/dev/null
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case "$LOOPR_LOOP_TYPE" in
` + onePhase + `
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: Ask\nDo it.\n\n### Task 2: Fail\nDo it too.\n' >"$LOOPR_ARTIFACT" ;;
*)
	if [ -f BASE.txt ]; then
		echo "$title saw BASE.txt" >"out-$title.txt"
		exit 0
	fi
	case "$title" in
	Ask) echo "is the base there yet?" >"$LOOPR_QUESTION_FILE" ;;
	*) echo "BASE.txt is missing"; exit 1 ;;
	esac
	;;
esac
`

// TestFreshBaseAfterAnswerAndReset: the plan branch gains a commit while
// one task waits for an answer and another is parked failed; `loopr answer`
// and `loopr reset` run their next iteration on the refreshed base, which
// has it.
func TestFreshBaseAfterAnswerAndReset(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", waitAgent)
	r := newRepo(t, freshConfig(t, script, "{max_iterations: 1, validate: []}"))
	d := startDaemon(t, r)
	ok(t, r.dir, "add", "--type", "plan", "--title", "wait", "--task", "wait for the base")
	byTitle := map[string]loop.Loop{}
	waitEvery(t, 120*time.Second, slowPoll, "Ask needs you and Fail failed", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		for _, l := range list(t, r) {
			if l.Type == loop.Ralph {
				byTitle[l.Title] = l
			}
		}
		return byTitle["Ask"].Status == loop.NeedsHuman && byTitle["Fail"].Status == loop.Failed
	})
	plan := planOf(t, r)
	wt := filepath.Join(t.TempDir(), "plan")
	r.git(t, "worktree", "add", "-q", wt, plan.Branch)
	if err := os.WriteFile(filepath.Join(wt, "BASE.txt"), []byte("merged meanwhile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git(t, "-C", wt, "add", "BASE.txt")
	r.git(t, "-C", wt, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "-m", "the module the tasks need")
	r.git(t, "worktree", "remove", wt)

	ok(t, r.dir, "answer", byTitle["Ask"].ID, "it is merged now, retry")
	ok(t, r.dir, "reset", byTitle["Fail"].ID)
	waitEvery(t, 120*time.Second, slowPoll, "both tasks complete", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		done := 0
		for _, l := range list(t, r) {
			if l.Type != loop.Ralph {
				continue
			}
			switch l.Status {
			case loop.Complete:
				done++
			case loop.NeedsHuman, loop.Failed:
				if l.UpdatedAt.After(byTitle[l.Title].UpdatedAt) {
					t.Fatalf("task %s (%s) is %s again (%s): its retry did not see the plan branch's new commit", l.Title, l.ID, l.Status, l.Reason)
				}
			}
		}
		return done == 2
	})
	for _, title := range []string{"Ask", "Fail"} {
		if got := r.git(t, "show", plan.Branch+":out-"+title+".txt"); got != title+" saw BASE.txt" {
			t.Errorf("out-%s.txt on %s = %q", title, plan.Branch, got)
		}
	}
}
