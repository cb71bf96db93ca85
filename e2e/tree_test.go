package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/loop"
)

// treeAgent is the scripted agent of the tree-term test (issue 25): a plan
// titled T makes one spec T, one phase T, and the phase makes six tasks
// "T 1" … "T 6" when T is big, one task "T 1" otherwise. Task "big 1" runs
// until the file $1 exists, so the test holds the first plan at a known
// point: one task running, five pending.
const treeAgent = `#!/bin/sh
release=$1
cat >/dev/null
title=$(head -n 1 "$LOOPR_PROMPT_FILE" | sed -n 's/.*, "\(.*\)"\.$/\1/p')
case "$LOOPR_LOOP_TYPE" in
plan) printf '# Plan: p\n\n## Specs\n\n### Spec 1: %s\nDo it.\n' "$title" >"$LOOPR_ARTIFACT" ;;
spec) printf '# Spec: s\n\n## Phases\n\n### Phase 1: %s\nDo it.\n' "$title" >"$LOOPR_ARTIFACT" ;;
phase)
	n=1
	[ "$title" = big ] && n=6
	{
		printf '# Phase: %s\n\n## Tasks\n' "$title"
		i=1
		while [ $i -le $n ]; do printf '\n### Task %d: %s %d\nDo it.\n' $i "$title" $i; i=$((i+1)); done
	} >"$LOOPR_ARTIFACT" ;;
*)
	if [ "$title" = "big 1" ]; then
		while [ ! -f "$release" ]; do sleep 0.2; done
	fi
	echo "$title" >"$(echo "$title" | tr ' ' _).txt" ;;
esac
`

// TestTreeTermFinishesTheSmallPlanFirst: a big plan is held with one task
// running and five pending (one task at a time: per_type.ralph 1) when a
// small plan is submitted, at least 30 s after it. With the tree term (the default) the small
// plan's task starts before the big plan's pending ones, and `loopr why` on
// one of those names the tree term as what put the other first. With the
// tree weights at 0 (seed 004's order) it waits for all of them: the test
// fails without the tree term.
func TestTreeTermFinishesTheSmallPlanFirst(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			agent, release := filepath.Join(dir, "agent.sh"), filepath.Join(dir, "release")
			if err := os.WriteFile(agent, []byte(treeAgent), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd, _ := json.Marshal([]string{"sh", agent, release})
			weights := ""
			if !on {
				weights = "  priority: {tree_boost_max: 0, tree_age_boost_max: 0}\n"
			}
			r := newRepo(t, fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
%sconcurrency:
  max_loops: 4
  per_type: {ralph: 1}
agent:
  preset: command
  command: %s
  timeout_secs: 600
loops:
  plan: {require_approval: false}
  ralph: {max_iterations: 3, validate: []}
storage:
  disk_quota_min_gb: 0
`, weights, cmd))
			d := startDaemon(t, r)
			byTitle := func() map[string]loop.Loop {
				m := map[string]loop.Loop{}
				for _, l := range list(t, r) {
					m[l.Title] = l
				}
				return m
			}
			alive := func() {
				if d.exited() {
					t.Fatalf("daemon exited:\n%s", d.output())
				}
			}
			submitted := time.Now()
			ok(t, r.dir, "add", "--type", "plan", "--title", "big", "--task", "a big plan")
			waitEvery(t, 120*time.Second, slowPoll, "the big plan's first task to run, five pending", func() bool {
				alive()
				m := byTitle()
				return m["big 1"].Status == loop.Running && m["big 6"].Status == loop.Pending
			})
			// The case: the second plan comes 30 s after the first.
			if wait := 30*time.Second - time.Since(submitted); wait > 0 {
				time.Sleep(wait)
			}
			ok(t, r.dir, "add", "--type", "plan", "--title", "small", "--task", "a small plan")
			waitEvery(t, 120*time.Second, slowPoll, "the small plan's task to wait", func() bool {
				alive()
				return byTitle()["small 1"].Status == loop.Pending
			})
			why := ok(t, r.dir, "why", byTitle()["big 2"].ID)
			const named = `the tree term put 1 loop of other trees first: `
			if on && (!strings.Contains(why, named) || !strings.Contains(why, `"small 1" (tree `)) {
				t.Errorf("loopr why on big 2 does not name the tree term putting small 1 first:\n%s", why)
			}
			if on && !strings.Contains(why, "+ tree ") {
				t.Errorf("loopr why on big 2 has no tree term in its formula:\n%s", why)
			}
			if !on && strings.Contains(why, "tree") {
				t.Errorf("tree term off: loopr why on big 2 mentions it:\n%s", why)
			}

			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			waitEvery(t, 180*time.Second, slowPoll, "both plans to settle", func() bool {
				alive()
				return settled(status(t, r))
			})
			m := byTitle()
			small := m["small 1"]
			after := 0 // the big plan's tasks that started after the small plan's
			for i := 2; i <= 6; i++ {
				b := m[fmt.Sprintf("big %d", i)]
				if b.Status != loop.Complete || small.Status != loop.Complete {
					t.Fatalf("big %d %s, small 1 %s; want both complete:\n%s", i, b.Status, small.Status, describe(list(t, r)))
				}
				if b.StartedAt.After(small.StartedAt) {
					after++
				}
			}
			if on && after != 5 {
				t.Errorf("tree term on: %d of the big plan's 5 pending tasks started after the small plan's task, want all 5", after)
			}
			if !on && after != 0 {
				t.Errorf("tree term off: %d of the big plan's tasks started after the small plan's task, want 0 (seed order)", after)
			}
		})
	}
}
