package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/loop"
)

// fanoutConfig is a loopr.yml whose agent is testdata/fanoutagent.sh
// (stream-json, $0.10 a run); extra is appended.
func fanoutConfig(t *testing.T, mode, extra string) string {
	t.Helper()
	argv, _ := json.Marshal([]string{"sh", abs(t, "testdata/fanoutagent.sh"), mode})
	return fastRetries + fmt.Sprintf(`concurrency:
  max_loops: 20
  max_api_calls: 8
agent:
  preset: claude
  command: %s
  timeout_secs: 150
loops:
  plan: {require_approval: false, max_iterations: 5}
  ralph: {validate: ["test ! -e out/bad"], max_iterations: 10%s}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, argv, extra)
}

// waitFanoutTree waits until fanoutagent.sh's tree settled with its 5
// loops complete (plan, spec, phase, the winner, After), and returns every
// loop and the candidates by index.
func waitFanoutTree(t *testing.T, r repo, d *daemonProc) ([]loop.Loop, map[int]loop.Loop) {
	t.Helper()
	waitEvery(t, 180*time.Second, slowPoll, "the tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] == 5
	})
	loops := list(t, r)
	return loops, candidatesOf(loops)
}

// candidatesOf returns the candidates of the one best-of-N group among
// loops, by index.
func candidatesOf(loops []loop.Loop) map[int]loop.Loop {
	out := map[int]loop.Loop{}
	for _, l := range loops {
		if l.Fanout != nil {
			out[l.Fanout.Index] = l
		}
	}
	return out
}

// TestFanoutWinnerMerges: a phase's task with **Fanout:** 3 runs as three
// candidates in their own worktrees. Candidate 2 passes (after the others
// each failed an iteration); only it merges into the plan branch, the
// other two are cancelled (their agents stopped) and their worktrees and
// branches removed, the task that depends on the group starts only after
// the winner merged, and all three candidates' costs are in the tree's
// usage.
func TestFanoutWinnerMerges(t *testing.T) {
	t.Parallel()
	r := newRepo(t, fanoutConfig(t, "first", ""))
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Pick the best of three", "--json"), &plan)
	loops, cands := waitFanoutTree(t, r, d)
	if len(cands) != 3 {
		t.Fatalf("%d candidates, want 3:\n%s", len(cands), describe(loops))
	}
	win := cands[2]
	if win.Status != loop.Complete || win.Fanout.Winner != win.ID || win.Fanout.Of != 3 {
		t.Errorf("candidate 2: %s %+v, want complete and the winner of 3:\n%s", win.Status, win.Fanout, describe(loops))
	}
	pb := planBranch(t, loops)
	if got := r.git(t, "show", pb+":out/pick.txt"); got != "picked: candidate 2" {
		t.Errorf("the plan branch's out/pick.txt = %q, want the winner's", got)
	}
	var sum loop.Usage
	for _, l := range loops {
		sum = sum.Add(l.Usage)
	}
	for i, c := range cands {
		if c.Usage.CostUSD < 0.1-1e-9 {
			t.Errorf("candidate %d usage %+v: want its runs' cost", i, c.Usage)
		}
		if i == 2 {
			continue
		}
		if c.Status != loop.Cancelled || c.Fanout.Winner != win.ID || !strings.Contains(c.Reason, "lost best-of-3") {
			t.Errorf("candidate %d: %s %+v reason %q, want cancelled, having lost to %s", i, c.Status, c.Fanout, c.Reason, win.ID)
		}
		if _, err := os.Stat(filepath.Join(r.home, "worktrees", c.ID)); !os.IsNotExist(err) {
			t.Errorf("candidate %d's worktree is still there (%v)\n%s", i, err, d.output())
		}
		if c.Branch == "" {
			t.Errorf("candidate %d recorded no branch", i)
		} else if out := r.git(t, "branch", "--list", c.Branch); out != "" {
			t.Errorf("candidate %d's branch %s is still there", i, c.Branch)
		}
		if r.git(t, "branch", "--list", c.Branch) == "" && strings.Contains(r.git(t, "log", "--format=%H", pb), c.Commit+"\n") && c.Commit != "" {
			t.Errorf("candidate %d's commit %s reached the plan branch", i, c.Commit)
		}
	}
	if tu := treeUsage(t, r, plan.ID); math.Abs(tu.CostUSD-sum.CostUSD) > 1e-9 || tu.CostUSD < 0.6-1e-9 {
		t.Errorf("tree usage %+v, want the sum of every loop's, losers included (%+v), at least $0.60", tu, sum)
	}
	var after loop.Loop
	for _, l := range loops {
		if l.Title == "After" {
			after = l
		}
	}
	if after.Status != loop.Complete || len(after.DependsOn) != 3 || after.StartedAt.Before(win.FinishedAt) {
		t.Errorf("task After: %s depends on %v, started %s; want complete, after all 3 candidates, once the winner merged (%s)",
			after.Status, after.DependsOn, after.StartedAt, win.FinishedAt)
	}
	if out := ok(t, r.dir, "events", cands[1].ID); !strings.Contains(out, "best-of-3 decided") {
		t.Errorf("loopr events of a loser does not journal the decision:\n%s", out)
	}
	if out := ok(t, r.dir, "why", win.ID); !strings.Contains(out, "best-of-3") || !strings.Contains(out, "winner") {
		t.Errorf("loopr why on the winner does not show the group:\n%s", out)
	}
	d.stop()
}

// TestFanoutBudgetStartsTwo: the same task under a tree budget of $2.50,
// with loops.ralph.budget $1.00 a candidate and $0.30 spent when the phase
// passes: room for two candidates, so two start, and the journal says
// why.
func TestFanoutBudgetStartsTwo(t *testing.T) {
	t.Parallel()
	r := newRepo(t, fanoutConfig(t, "first", ", budget: {usd: 1}"))
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Pick the best within budget", "--budget-usd", "2.5", "--json"), &plan)
	loops, cands := waitFanoutTree(t, r, d)
	if len(cands) != 2 || cands[1].Fanout.Of != 2 {
		t.Fatalf("%d candidates, want 2 of 2:\n%s", len(cands), describe(loops))
	}
	runs, err := os.ReadFile(filepath.Join(r.home, "e2e-runs.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(runs), "Pick [3/"); n != 0 || !strings.Contains(string(runs), "Pick [2/2]") {
		t.Errorf("runs of the candidates: want only candidates 1 and 2 of 2:\n%s", runs)
	}
	if out := ok(t, r.dir, "events", cands[1].ID, "--json"); !strings.Contains(out, "only 2 of the 3 asked started: the tree's budget ($2.50") {
		t.Errorf("loopr events does not say why only 2 started:\n%s", out)
	}
	d.stop()
}

// TestFanoutSmallestDiffOnlyWinnerMerges: with fanout_pick: smallest_diff,
// candidate 1 passes first with a 40-line change and waits in the merge
// queue, which must not merge it while candidates 2 (a one-line change)
// and 3 (which fails) run. Once all ended, candidate 2 wins: only its
// change reaches the plan branch, and candidate 1 is cancelled from
// merging, its branch removed.
func TestFanoutSmallestDiffOnlyWinnerMerges(t *testing.T) {
	t.Parallel()
	r := newRepo(t, strings.Replace(fanoutConfig(t, "diff", ", fanout_pick: smallest_diff"), "max_iterations: 10", "max_iterations: 1", 1))
	d := startDaemon(t, r)
	ok(t, r.dir, "plan", "Pick the smallest of three")
	loops, cands := waitFanoutTree(t, r, d)
	if len(cands) != 3 {
		t.Fatalf("%d candidates, want 3:\n%s", len(cands), describe(loops))
	}
	pb := planBranch(t, loops)
	if got := r.git(t, "show", pb+":out/pick.txt"); got != "picked: candidate 2" {
		t.Errorf("the plan branch's out/pick.txt = %q, want the winner's", got)
	}
	if files := r.git(t, "ls-tree", "-r", "--name-only", pb); strings.Contains(files, "out/big.txt") {
		t.Errorf("candidate 1's change reached the plan branch:\n%s", files)
	}
	c1, c2, c3 := cands[1], cands[2], cands[3]
	if c2.Status != loop.Complete || c2.Fanout.Winner != c2.ID {
		t.Errorf("candidate 2: %s %+v, want the complete winner:\n%s", c2.Status, c2.Fanout, describe(loops))
	}
	if c1.Status != loop.Cancelled || c3.Status != loop.Cancelled {
		t.Errorf("candidates 1 and 3: %s and %s, want cancelled:\n%s", c1.Status, c3.Status, describe(loops))
	}
	if c1.Commit == "" || !strings.Contains(ok(t, r.dir, "events", c1.ID), "merging") {
		t.Errorf("candidate 1 never waited in the merge queue (commit %q): the test proves nothing", c1.Commit)
	}
	if out := r.git(t, "branch", "--list", c1.Branch); c1.Branch == "" || out != "" {
		t.Errorf("candidate 1's branch %q: %q, want removed", c1.Branch, out)
	}
	if out := ok(t, r.dir, "events", c1.ID, "--json"); !strings.Contains(out, "smallest diff of the 2 that passed (1 lines") {
		t.Errorf("the journal does not say why candidate 2 won:\n%s", out)
	}
	d.stop()
}

// TestFanoutJudgeChooses: with fanout_pick: judge, candidates 1 and 2 pass
// and 3 fails; the judge command finds the two passing diffs (and only
// those) in $LOOPR_FANOUT_DIR and names candidate 2, with a reason. Were
// the judge to fail, candidate 1, the first to pass, would win.
func TestFanoutJudgeChooses(t *testing.T) {
	t.Parallel()
	judge := `test -s "$LOOPR_FANOUT_DIR/1.diff" && test -s "$LOOPR_FANOUT_DIR/2.diff" && test ! -e "$LOOPR_FANOUT_DIR/3.diff" && ` +
		`test -s "$LOOPR_FANOUT_DIR/task.md" && test "$LOOPR_FANOUT_CANDIDATES" = "1 2" && grep -q big.txt "$LOOPR_FANOUT_DIR/1.diff" && echo "2 the judge read both diffs"`
	cfg, _ := json.Marshal([]string{"sh", "-c", judge})
	r := newRepo(t, strings.Replace(fanoutConfig(t, "diff", ", fanout_pick: judge, fanout_judge: "+string(cfg)), "max_iterations: 10", "max_iterations: 1", 1))
	d := startDaemon(t, r)
	ok(t, r.dir, "plan", "Let a judge pick")
	loops, cands := waitFanoutTree(t, r, d)
	if len(cands) != 3 || cands[2].Status != loop.Complete || cands[2].Fanout.Winner != cands[2].ID {
		t.Fatalf("want candidate 2 of 3 the complete winner:\n%s", describe(loops))
	}
	if out := ok(t, r.dir, "events", cands[1].ID, "--json"); !strings.Contains(out, "the judge chose candidate 2 of 3 among the 2 that passed: the judge read both diffs") {
		t.Errorf("the journal does not carry the judge's choice:\n%s\n%s", out, d.output())
	}
	if files := r.git(t, "ls-tree", "-r", "--name-only", planBranch(t, loops)); strings.Contains(files, "out/big.txt") || !strings.Contains(files, "out/pick.txt") {
		t.Errorf("the plan branch holds:\n%s\nwant candidate 2's out/pick.txt only", files)
	}
	d.stop()
}
