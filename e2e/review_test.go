package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// Review and line comments (issue 22): the review gate, and comments that
// reach the loop that wrote the line.

// reviewAgent plans one phase of three tasks, One, Two and Three; each
// writes its own file out-<title>.txt (one line). It keeps every prompt
// as $LOOPR_HOME/prompt-<title>-<iteration>, and an iteration whose prompt
// carries review comments or feedback adds a line to its file (a change to
// commit). With $LOOPR_HOME/hold, One's first iteration waits for
// $LOOPR_HOME/go.
const reviewAgent = `#!/bin/sh
cat >/dev/null
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case "$LOOPR_LOOP_TYPE" in
` + onePhase + `
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: One\nDo it.\n\n### Task 2: Two\nDo it.\n\n### Task 3: Three\nDo it.\n' >"$LOOPR_ARTIFACT" ;;
*)
	cp "$LOOPR_PROMPT_FILE" "$LOOPR_HOME/prompt-$title-$LOOPR_ITERATION"
	if [ "$title" = One ] && [ "$LOOPR_ITERATION" = 1 ] && [ -f "$LOOPR_HOME/hold" ]; then
		n=0
		while [ ! -f "$LOOPR_HOME/go" ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n + 1)); done
	fi
	[ -f "out-$title.txt" ] || echo "line of $title" >"out-$title.txt"
	if grep -q '^## Comments from a review\|^Reviewer feedback' "$LOOPR_PROMPT_FILE"; then
		echo "addressed at iteration $LOOPR_ITERATION" >>"out-$title.txt"
	fi
	;;
esac
`

// tasksByTitle returns r's ralph loops by title.
func tasksByTitle(t *testing.T, r repo) map[string]loop.Loop {
	t.Helper()
	out := map[string]loop.Loop{}
	for _, l := range list(t, r) {
		if l.Type == loop.Ralph {
			out[l.Title] = l
		}
	}
	return out
}

// waitTasks polls until cond holds of the tasks by title, failing on a
// daemon that exited.
func waitTasks(t *testing.T, r repo, d *daemonProc, what string, cond func(map[string]loop.Loop) bool) map[string]loop.Loop {
	t.Helper()
	var ts map[string]loop.Loop
	waitEvery(t, 120*time.Second, slowPoll, what, func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		ts = tasksByTitle(t, r)
		return cond(ts)
	})
	return ts
}

func promptOf(t *testing.T, r repo, title string, iteration int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.home, fmt.Sprintf("prompt-%s-%d", title, iteration)))
	if err != nil {
		t.Fatalf("the prompt of %s iteration %d: %v", title, iteration, err)
	}
	return string(b)
}

// TestReviewGate: with loops.ralph.require_review, each task that passes
// waits in awaiting_review (NEEDS YOU in status) with its commit, not on
// the plan branch; approve merges it, reject fails it, iterate sends it
// back with the feedback in its next prompt.
func TestReviewGate(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", reviewAgent)
	r := newRepo(t, freshConfig(t, script, "{max_iterations: 5, validate: [], require_review: true}"))
	d := startDaemon(t, r)
	ok(t, r.dir, "plan", "review", "these")
	ts := waitTasks(t, r, d, "three tasks awaiting review", func(ts map[string]loop.Loop) bool {
		n := 0
		for _, l := range ts {
			if l.Status == loop.AwaitingReview {
				n++
			}
		}
		return n == 3
	})
	plan := planOf(t, r)
	for title, l := range ts {
		if l.Commit == "" || len(l.Commit) != 40 {
			t.Errorf("task %s awaits review with commit %q; want the commit that passed", title, l.Commit)
		}
	}
	if res := runGit(r, "show", plan.Branch+":out-One.txt"); res == nil {
		t.Errorf("out-One.txt is on %s before anyone approved it", plan.Branch)
	}
	st := status(t, r)
	if len(st.AwaitingReview) != 3 || st.Counts[loop.AwaitingReview] != 3 {
		t.Errorf("status: awaiting_review %d listed, count %d; want 3 and 3", len(st.AwaitingReview), st.Counts[loop.AwaitingReview])
	}
	text := ok(t, r.dir, "status")
	if !strings.Contains(text, "NEEDS YOU (3)") || !strings.Contains(text, "review") || !strings.Contains(text, "loopr approve "+loop.ShortID(ts["One"].ID)) {
		t.Errorf("loopr status does not list the three reviews under NEEDS YOU:\n%s", text)
	}

	passed := ts["One"].Commit
	if runGit(r, "merge-base", "--is-ancestor", passed, plan.Branch) == nil {
		t.Errorf("One's commit %s is on %s before anyone approved it", passed, plan.Branch)
	}
	ok(t, r.dir, "approve", ts["One"].ID)
	ok(t, r.dir, "reject", ts["Two"].ID, "--reason", "not this way")
	ok(t, r.dir, "iterate", ts["Three"].ID, "--feedback", "FEEDBACK-MARKER: say more")
	ts = waitTasks(t, r, d, "One complete, Two failed, Three awaiting review again", func(ts map[string]loop.Loop) bool {
		return ts["One"].Status == loop.Complete && ts["Two"].Status == loop.Failed &&
			ts["Three"].Status == loop.AwaitingReview && ts["Three"].Iteration == 2
	})
	if err := runGit(r, "merge-base", "--is-ancestor", passed, plan.Branch); err != nil {
		t.Errorf("One's approved commit %s is not on %s: %v", passed, plan.Branch, err)
	}
	if got := r.git(t, "show", plan.Branch+":out-One.txt"); got != "line of One" {
		t.Errorf("out-One.txt on %s = %q; want the approved task's line", plan.Branch, got)
	}
	if runGit(r, "show", plan.Branch+":out-Two.txt") == nil || runGit(r, "show", plan.Branch+":out-Three.txt") == nil {
		t.Errorf("a rejected or unapproved task's file is on %s", plan.Branch)
	}
	if ts["Two"].Reason != "not this way" {
		t.Errorf("rejected task's reason = %q; want the --reason", ts["Two"].Reason)
	}
	if p := promptOf(t, r, "Three", 2); !strings.Contains(p, "FEEDBACK-MARKER: say more") {
		t.Errorf("Three's prompt at iteration 2 lacks the feedback:\n%s", p)
	}
	// approve on a task that does not await review says so.
	if res := run(t, r.dir, "", "approve", ts["One"].ID); res.code == 0 || !strings.Contains(res.stderr, "already complete") {
		t.Errorf("approve of a complete task: exit %d, stderr %q; want a refusal", res.code, res.stderr)
	}
}

// runGit runs git in r's workspace and returns its error (nil: exit 0).
func runGit(r repo, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	return cmd.Run()
}

// TestCommentReachesTheWriter: a plan of three tasks, each writing its own
// file, is done. A comment on a line of the plan branch re-opens exactly
// the task that wrote it (the others stay complete), its tree is not done
// until it passes and merges again, its next prompt carries file:line and
// the text, and loopr comments shows it answered by that iteration. A
// comment on a line no task wrote, or past a file's end, is exit 2 and one
// line.
func TestCommentReachesTheWriter(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", reviewAgent)
	r := newRepo(t, freshConfig(t, script, "{max_iterations: 5, validate: []}"))
	d := startDaemon(t, r)
	ok(t, r.dir, "plan", "three", "files")
	waitTasks(t, r, d, "three tasks complete", func(ts map[string]loop.Loop) bool {
		n := 0
		for _, l := range ts {
			if l.Status == loop.Complete {
				n++
			}
		}
		return n == 3
	})
	var plan loop.Loop
	waitEvery(t, 60*time.Second, slowPoll, "the plan's tree done", func() bool {
		plan = planOf(t, r)
		return !plan.SubtreeDoneAt.IsZero()
	})
	before := tasksByTitle(t, r)

	for _, bad := range []struct{ ref, want string }{
		{"README.md:1", "which no loop made"},
		{"out-Two.txt:9", "has 1 lines"},
		{"nope.txt:1", "not a file"},
		{"out-Two.txt", "PATH:LINE"},
	} {
		res := run(t, r.dir, "", "comment", plan.ID, bad.ref, "text")
		if res.code != 2 || !strings.Contains(res.stderr, bad.want) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("comment %s: exit %d, stderr %q; want exit 2 and one line with %q", bad.ref, res.code, res.stderr, bad.want)
		}
	}

	var c api.Comment
	mustJSON(t, ok(t, r.dir, "comment", plan.ID, "out-Two.txt:1", "COMMENT-MARKER: name it better", "--json"), &c)
	two := before["Two"]
	if c.Loop != two.ID || c.On != plan.ID || c.Status != loop.Pending || c.State != "sent" {
		t.Fatalf("comment = %+v; want it sent to Two (%s), now pending", c, two.ID)
	}
	ts := waitTasks(t, r, d, "Two complete again at iteration 2", func(ts map[string]loop.Loop) bool {
		return ts["Two"].Status == loop.Complete && ts["Two"].Iteration == 2
	})
	for _, title := range []string{"One", "Three"} {
		if l := ts[title]; l.Status != loop.Complete || l.Iteration != before[title].Iteration || !l.UpdatedAt.Equal(before[title].UpdatedAt) {
			t.Errorf("task %s = %s at iteration %d (updated %s); want it untouched by the comment", title, l.Status, l.Iteration, l.UpdatedAt)
		}
	}
	p := promptOf(t, r, "Two", 2)
	for _, w := range []string{"out-Two.txt:1", "COMMENT-MARKER: name it better", "> 1 | line of Two"} {
		if !strings.Contains(p, w) {
			t.Errorf("Two's prompt at iteration 2 lacks %q:\n%s", w, p)
		}
	}
	if got := r.git(t, "show", plan.Branch+":out-Two.txt"); !strings.Contains(got, "addressed at iteration 2") {
		t.Errorf("out-Two.txt on %s = %q; want the second iteration's change merged", plan.Branch, got)
	}
	waitEvery(t, 60*time.Second, slowPoll, "the plan's tree done again", func() bool {
		return !planOf(t, r).SubtreeDoneAt.IsZero()
	})
	if n := strings.Count(ok(t, r.dir, "events", plan.ID, "--json"), `"kind":"tree_complete"`); n != 2 {
		t.Errorf("tree_complete events on the plan = %d; want 2 (done, re-opened by the comment, done again)", n)
	}
	out := ok(t, r.dir, "comments", plan.ID)
	if !strings.Contains(out, "answered by iteration 2 (passed)") || !strings.Contains(out, "out-Two.txt:1") {
		t.Errorf("loopr comments:\n%s\nwant the comment answered by iteration 2", out)
	}
}

// TestCommentOnARunningTask: a comment on a running task waits; the
// iteration that was running passes, but the comment was not in its
// prompt, so the task runs once more with it instead of merging.
func TestCommentOnARunningTask(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", reviewAgent)
	r := newRepo(t, freshConfig(t, script, "{max_iterations: 5, validate: []}"))
	if err := os.MkdirAll(r.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.home, "hold"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, r)
	ok(t, r.dir, "plan", "hold", "one")
	ts := waitTasks(t, r, d, "One running", func(ts map[string]loop.Loop) bool {
		_, err := os.Stat(filepath.Join(r.home, "prompt-One-1"))
		return ts["One"].Status == loop.Running && err == nil
	})
	var c api.Comment
	mustJSON(t, ok(t, r.dir, "comment", ts["One"].ID, "README.md:1", "LATE-MARKER", "--json"), &c)
	if c.Loop != ts["One"].ID || c.Status != loop.Running || c.State != "sent" {
		t.Fatalf("comment on a running task = %+v; want it waiting on One, still running", c)
	}
	if err := os.WriteFile(filepath.Join(r.home, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ts = waitTasks(t, r, d, "One complete", func(ts map[string]loop.Loop) bool { return ts["One"].Status == loop.Complete })
	if ts["One"].Iteration != 2 {
		t.Errorf("One completed at iteration %d; want 2 (the comment came while iteration 1 ran)", ts["One"].Iteration)
	}
	if strings.Contains(promptOf(t, r, "One", 1), "LATE-MARKER") || !strings.Contains(promptOf(t, r, "One", 2), "LATE-MARKER") {
		t.Errorf("the comment should be in One's second prompt only")
	}
	if out := ok(t, r.dir, "comments", ts["One"].ID); !strings.Contains(out, "answered by iteration 2 (passed)") {
		t.Errorf("loopr comments:\n%s\nwant it answered by iteration 2", out)
	}
}
