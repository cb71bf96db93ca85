package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// radarAgent plans one phase of two tasks. At iteration 1 each task writes
// its own SHARED.txt, commits it on its branch, says so in
// $LOOPR_HOME/committed-<id> and holds until the test creates
// $LOOPR_HOME/release: both branches conflict while neither has merged.
const radarAgent = `#!/bin/sh
cat >/dev/null
case "$LOOPR_LOOP_TYPE" in
` + onePhase + `
phase) printf '# Phase: f\n\n## Tasks\n\n### Task 1: One\nDo it.\n\n### Task 2: Two\nDo it too.\n' >"$LOOPR_ARTIFACT" ;;
*)
	if [ "$LOOPR_ITERATION" = 1 ]; then
		echo "the shared line, as $LOOPR_LOOP_ID writes it" >SHARED.txt
		git add SHARED.txt && git -c user.name=agent -c user.email=agent@example.com commit -q -m "work of $LOOPR_LOOP_ID" 2>"$LOOPR_HOME/git-$LOOPR_LOOP_ID.err" &&
		touch "$LOOPR_HOME/committed-$LOOPR_LOOP_ID"
		n=0
		while [ ! -e "$LOOPR_HOME/release" ] && [ $n -lt 3000 ]; do
			sleep 0.1
			n=$((n + 1))
		done
	fi
	;;
esac
`

// TestConflictRadar: two running tasks whose branches write the same file
// differently. While both hold, before either merges, `loopr conflicts
// PLAN --json` names both loops and the file, and `loopr why` of each task
// names the other.
func TestConflictRadar(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "agent.sh", radarAgent)
	r := newRepo(t, freshConfig(t, script, `{max_iterations: 3, validate: ["true"]}`))
	d := startDaemon(t, r)
	t.Cleanup(func() { os.WriteFile(filepath.Join(r.home, "release"), nil, 0o644) })
	ok(t, r.dir, "add", "--type", "plan", "--title", "radar", "--task", "two tasks that collide")
	waitEvery(t, 120*time.Second, slowPoll, "both tasks to commit and hold", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		for _, l := range list(t, r) {
			if l.Type == loop.Ralph && l.Status != loop.Running && l.Status != loop.Pending {
				out, _ := os.ReadFile(filepath.Join(r.home, "git-"+l.ID+".err"))
				t.Fatalf("task %s is %s (%s) before it was released; git said: %s\n%s", l.ID, l.Status, l.Reason, out, describe(list(t, r)))
			}
		}
		held, _ := filepath.Glob(filepath.Join(r.home, "committed-*"))
		return len(held) == 2
	})
	var tasks []string
	for _, l := range list(t, r) {
		if l.Type == loop.Ralph {
			if l.Status != loop.Running {
				t.Fatalf("task %s is %s while its agent holds; want running\n%s", l.ID, l.Status, describe(list(t, r)))
			}
			tasks = append(tasks, l.ID)
		}
	}
	slices.Sort(tasks)
	if len(tasks) != 2 {
		t.Fatalf("tasks = %v, want 2\n%s", tasks, describe(list(t, r)))
	}
	plan := planOf(t, r)

	var c api.Conflicts
	mustJSON(t, ok(t, r.dir, "conflicts", plan.ID, "--json"), &c)
	if c.Plan != plan.ID || c.Branch != plan.Branch || c.Live != 2 || c.Checked != 2 {
		t.Errorf("conflicts: plan %s branch %s live %d checked %d; want %s %s 2 2", c.Plan, c.Branch, c.Live, c.Checked, plan.ID, plan.Branch)
	}
	var between []api.Conflict
	for _, x := range c.Conflicts {
		if x.With == api.ConflictWithLoop {
			between = append(between, x)
		}
	}
	if len(between) != 1 || between[0].Loop != tasks[0] || between[0].Other != tasks[1] ||
		!slices.Equal(between[0].Files, []string{"SHARED.txt"}) {
		t.Fatalf("conflicts between loops = %+v; want %s against %s in SHARED.txt", between, tasks[0], tasks[1])
	}
	text := ok(t, r.dir, "conflicts", loop.ShortID(tasks[1]))
	for _, want := range []string{"LOOP", "OTHER", "FILES", loop.ShortID(tasks[0]), loop.ShortID(tasks[1]), "SHARED.txt"} {
		if !strings.Contains(text, want) {
			t.Errorf("loopr conflicts (text) lacks %q:\n%s", want, text)
		}
	}
	why := ok(t, r.dir, "why", tasks[1])
	if want := fmt.Sprintf("predicted merge conflict with %s", loop.ShortID(tasks[0])); !strings.Contains(why, want) || !strings.Contains(why, "SHARED.txt") {
		t.Errorf("loopr why %s lacks %q and SHARED.txt:\n%s", tasks[1], want, why)
	}
	for _, l := range list(t, r) {
		if l.Type == loop.Ralph && l.Status == loop.Complete {
			t.Fatalf("task %s merged before the radar was read; the test proves nothing\n%s", l.ID, describe(list(t, r)))
		}
	}
}

// TestConflictsWithoutDaemon: with no daemon, `loopr conflicts` opens the
// store and the repository itself; a plan not started yet has no branch to
// compare, and an unknown id is the user's error.
func TestConflictsWithoutDaemon(t *testing.T) {
	t.Parallel()
	r := newRepo(t, freshConfig(t, "/bin/true", `{validate: ["true"]}`))
	ok(t, r.dir, "add", "--type", "plan", "--title", "queued", "--task", "later")
	plan := planOf(t, r)
	var c api.Conflicts
	mustJSON(t, ok(t, r.dir, "conflicts", plan.ID, "--json"), &c)
	if c.Plan != plan.ID || c.Branch != "" || c.Conflicts == nil || len(c.Conflicts) != 0 {
		t.Errorf("conflicts of an unstarted plan = %+v; want its id, no branch, an empty list", c)
	}
	if out := ok(t, r.dir, "conflicts", loop.ShortID(plan.ID)); !strings.Contains(out, "has no branch yet") {
		t.Errorf("loopr conflicts (text) = %q; want it to say the plan has no branch yet", out)
	}
	if res := run(t, r.dir, "", "conflicts", "zzzzzzzz"); res.code != 2 {
		t.Errorf("loopr conflicts zzzzzzzz: exit %d, want 2\n%s", res.code, res.stderr)
	}
}
