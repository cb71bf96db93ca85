package e2e

import (
	"context"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// usageConfig is a loopr.yml whose agent profiles run
// testdata/usageagent.sh (Claude Code's stream-json, the claude preset's
// parser): main, the default, falls back to backup. extra is appended.
func usageConfig(t *testing.T, mode, extra string) string {
	t.Helper()
	argv := func(profile string) string {
		b, _ := json.Marshal([]string{"sh", abs(t, "testdata/usageagent.sh"), profile, mode})
		return string(b)
	}
	return fastRetries + fmt.Sprintf(`agent:
  preset: claude
  command: %s
  timeout_secs: 20
  fallback: [backup]
agents:
  backup: {preset: claude, command: %s, timeout_secs: 20}
loops:
  plan: {require_approval: false, max_iterations: 10}
  ralph: {validate: ["true"]}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
%s`, argv("main"), argv("backup"), extra)
}

// treeUsage is `loopr show ID --json`'s tree_usage.
func treeUsage(t *testing.T, r repo, id string) loop.Usage {
	t.Helper()
	var v struct {
		TreeUsage *loop.Usage `json:"tree_usage"`
	}
	mustJSON(t, ok(t, r.dir, "show", id, "--json"), &v)
	if v.TreeUsage == nil {
		t.Fatalf("loopr show %s --json has no tree_usage", id)
	}
	return *v.TreeUsage
}

// runs reads the agent's log of runs: "<profile> <id> <iteration> <type>".
func runs(t *testing.T, r repo) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.home, "e2e-runs.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestUsageRollsUpAndFallbackTakesOver: a plan tree on a scripted Claude
// Code agent. Every loop records what its runs cost, and `show --json`
// of the plan sums the whole tree. The first ralph run on the profile
// main is refused with a five-hour limit: main is limited for an hour,
// the refusal spends no iteration, and that loop's next iteration, like
// every later run, goes to the fallback profile backup.
func TestUsageRollsUpAndFallbackTakesOver(t *testing.T) {
	t.Parallel()
	r := newRepo(t, usageConfig(t, "limit", ""))
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Add a cache", "--json"), &plan)
	waitEvery(t, 60*time.Second, slowPoll, "the tree to complete", func() bool {
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] == 5
	})
	loops := list(t, r)
	var sum loop.Usage
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("loop %s %s is %s", l.Type, l.ID, l.Status)
		}
		if l.Usage.CostUSD < 0.1-1e-9 || l.Usage.InputTokens < 1000 || l.Usage.CacheReadTokens < 3000 || l.Usage.AgentSeconds <= 0 {
			t.Errorf("loop %s %s usage %+v: want every run's tokens, cost and agent time", l.Type, l.ID, l.Usage)
		}
		sum = sum.Add(l.Usage)
	}
	got := treeUsage(t, r, plan.ID)
	if math.Abs(got.CostUSD-sum.CostUSD) > 1e-9 || got.Tokens() != sum.Tokens() || math.Abs(got.CostUSD-0.5) > 1e-9 {
		t.Errorf("tree_usage %+v, want the sum of the 5 loops %+v ($0.50: one paid run each)", got, sum)
	}
	if out := ok(t, r.dir, "show", plan.ID); !strings.Contains(out, "tree usage") || !strings.Contains(out, "$0.50") {
		t.Errorf("loopr show lacks the tree usage:\n%s", out)
	}
	if out := ok(t, r.dir, "list"); !strings.Contains(out, "COST") || !strings.Contains(out, "$0.50") {
		t.Errorf("loopr list lacks the rolled-up COST:\n%s", out)
	}

	// The refused run and what came after it.
	all := runs(t, r)
	limited := -1
	for i, line := range all {
		if strings.HasPrefix(line, "main ") && strings.HasSuffix(line, " ralph") {
			limited = i
			break
		}
	}
	if limited < 0 {
		t.Fatalf("no ralph run on main:\n%s", strings.Join(all, "\n"))
	}
	f := strings.Fields(all[limited])
	id := f[1]
	next := -1
	for i := limited + 1; i < len(all); i++ {
		if strings.Fields(all[i])[1] == id {
			next = i
			break
		}
	}
	if want := "backup " + id + " 1 ralph"; next < 0 || all[next] != want {
		t.Fatalf("after the limit, %s ran again as line %d, want %q (same iteration, on the fallback):\n%s", id, next, want, strings.Join(all, "\n"))
	}
	// Its sibling may have started on main before the refusal was
	// recorded; nothing starts on main after (the daemon's log orders
	// the starts and the refusal: one goroutine writes both).
	logged := d.output()
	hit := strings.Index(logged, `msg="rate limited"`)
	if hit < 0 {
		t.Fatalf("the daemon did not log the limit:\n%s", logged)
	}
	for _, line := range strings.Split(logged[hit:], "\n") {
		if strings.Contains(line, `msg="loop started"`) && strings.Contains(line, "agent=default") {
			t.Errorf("a start on the limited profile after the limit: %s", line)
		}
	}
	if !strings.Contains(logged[hit:], "agent=backup") {
		t.Errorf("no start on backup after the limit:\n%s", logged[hit:])
	}
	// How long the refused loop waited for its fallback.
	limitAt, startAt := logTime(logged[strings.LastIndex(logged[:hit], "\n")+1:]), time.Time{}
	for _, line := range strings.Split(logged[hit:], "\n") {
		if strings.Contains(line, `msg="loop started"`) && strings.Contains(line, "loop="+id) {
			startAt = logTime(line)
			break
		}
	}
	t.Logf("the limit was recorded at %s; the refused loop restarted on the fallback %s later", limitAt.Format(time.TimeOnly), startAt.Sub(limitAt))
	st := status(t, r)
	var mainLimit *api.ProfileLimit
	for i := range st.Profiles {
		if st.Profiles[i].Agent == "default" {
			mainLimit = &st.Profiles[i]
		}
	}
	if mainLimit == nil || !mainLimit.Limited || mainLimit.ResumeAt.Sub(time.Now()) < 50*time.Minute {
		t.Errorf("status profiles %+v: want default limited for about an hour", st.Profiles)
	}
	if out := ok(t, r.dir, "status"); !strings.Contains(out, "agent default: backing off") {
		t.Errorf("loopr status does not list the limited profile:\n%s", out)
	}
	if l := show(t, r, id); l.Iteration != 1 {
		t.Errorf("the refused loop is at iteration %d, want 1 (a limit spends none)", l.Iteration)
	}

	// The metrics count the same spend, by type and profile.
	m := scrapeMetrics(t, r)
	var cost, input float64
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "loopr_cost_usd_total{"):
			cost += v
		case strings.HasPrefix(k, "loopr_tokens_total{") && strings.Contains(k, `kind="input"`):
			input += v
		}
	}
	if math.Abs(cost-0.5) > 1e-9 || input != 5000 {
		t.Errorf("metrics: cost $%v, input tokens %v; want $0.5 and 5000", cost, input)
	}
	if v := m[`loopr_cost_usd_total{agent="backup",type="ralph"}`]; v < 0.1-1e-9 {
		t.Errorf("loopr_cost_usd_total{agent=backup,type=ralph} = %v, want the fallback's ralph runs", v)
	}
	d.stop()
}

// TestBudgetStopsTheTreeAndRaisingResumes: a plan tree with a $0.25 budget
// whose plan fails its first three iterations ($0.10 each): after the
// third, the tree's budget is spent and the plan waits in needs_human
// (reason budget) instead of running again. `loopr budget` raises it; the
// plan runs again, passes, and the tree completes within the new budget.
// The budget survives a daemon restart.
func TestBudgetStopsTheTreeAndRaisingResumes(t *testing.T) {
	t.Parallel()
	r := newRepo(t, usageConfig(t, "late", "budget: {usd: 0.25}\n"))
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Add a cache", "--json"), &plan)
	if plan.Budget.USD != 0.25 {
		t.Fatalf("plan budget %+v, want the tree default $0.25", plan.Budget)
	}
	waitEvery(t, 60*time.Second, slowPoll, "the plan to wait for its budget", func() bool {
		return show(t, r, plan.ID).Status == loop.NeedsHuman
	})
	l := show(t, r, plan.ID)
	if l.Needs == nil || l.Needs.Reason != loop.NeedsBudget || !strings.Contains(l.Needs.Detail, "$0.30 of $0.25") {
		t.Fatalf("needs %+v, want budget: $0.30 of $0.25", l.Needs)
	}
	if n := len(runs(t, r)); n != 3 || l.Iteration != 4 {
		t.Fatalf("%d runs, iteration %d: want 3 runs and no fourth start", n, l.Iteration)
	}
	// The command that resumes it raises the budget: answering would only
	// put it back behind the same gate.
	if out := ok(t, r.dir, "status"); !strings.Contains(out, "→ loopr budget "+loop.ShortID(plan.ID)+" --usd N") || strings.Contains(out, "loopr answer") {
		t.Errorf("loopr status does not say to raise the budget:\n%s", out)
	}
	if out := ok(t, r.dir, "show", plan.ID); !strings.Contains(out, "loopr budget "+plan.ID+" --usd N") {
		t.Errorf("loopr show does not say to raise the budget:\n%s", out)
	}
	why := ok(t, r.dir, "why", plan.ID)
	// The budget text is in the needs_human reason and the budget gate:
	// the human output says it once; --json keeps both reasons.
	const spent = "budget spent: $0.30 of $0.25"
	for _, line := range strings.Split(why, "\n") {
		if n := strings.Count(line, spent); n > 1 || n == 1 && strings.Contains(line, "✗") && !strings.Contains(line, "needs you (budget)") {
			t.Errorf("loopr why says %q again: %q\n%s", spent, line, why)
		}
	}
	if sched := ok(t, r.dir, "debug", "scheduler"); strings.Count(sched, spent) != 1 {
		t.Errorf("loopr debug scheduler says %q %d times, want once:\n%s", spent, strings.Count(sched, spent), sched)
	}
	var rows []api.SchedRow
	mustJSON(t, ok(t, r.dir, "debug", "scheduler", "--json"), &rows)
	if len(rows) != 1 || !slices.Contains(rows[0].Reasons, "needs_human") || !slices.Contains(rows[0].Reasons, "budget") || !slices.Contains(rows[0].ReasonText, spent) {
		t.Errorf("debug scheduler --json rows %+v; want the needs_human and budget reasons, both texts", rows)
	}
	if !strings.Contains(why, "needs you (budget)") {
		t.Errorf("loopr why does not say budget:\n%s", why)
	}
	// An answer is refused (accepted, the gate held it pending, out of
	// "Needs you"): the CLI exits 2 and the API answers 409, both saying
	// what to do instead; the plan still waits for its budget.
	refusal := plan.ID + ": budget spent: $0.30 of $0.25; an answer would leave this plan behind the same gate — raise the budget with loopr budget " + plan.ID + " --usd N and it resumes"
	if res := run(t, r.dir, "", "answer", plan.ID, "go on"); res.code != 2 || res.stderr != "loopr: "+refusal+"\n" {
		t.Errorf("loopr answer: exit %d, stderr %q; want 2 and %q", res.code, res.stderr, refusal)
	}
	if code, body := postSocket(t, r, "/v1/loops/"+plan.ID+"/answer", `{"answer":"go on"}`); code != 409 ||
		!strings.Contains(body, `"code":"conflict"`) || !strings.Contains(body, "loopr budget "+plan.ID+" --usd N") {
		t.Errorf("POST answer = %d %s; want 409 conflict naming loopr budget", code, body)
	}
	if l := show(t, r, plan.ID); l.Status != loop.NeedsHuman || l.Needs == nil || l.Needs.Reason != loop.NeedsBudget {
		t.Fatalf("after the refused answer: %s, needs %+v; want still needs_human (budget)", l.Status, l.Needs)
	}

	// Restart: still waiting, nothing runs.
	d.stop()
	d = startDaemon(t, r)
	time.Sleep(2 * time.Second)
	if l := show(t, r, plan.ID); l.Status != loop.NeedsHuman || len(runs(t, r)) != 3 {
		t.Fatalf("after a restart: %s with %d runs, want still needs_human after 3", l.Status, len(runs(t, r)))
	}

	res := run(t, r.dir, "", "budget", plan.ID, "--usd", "-1")
	if res.code != 2 || !strings.Contains(res.stderr, "--usd") {
		t.Errorf("budget --usd -1: exit %d, stderr %q; want 2 naming --usd", res.code, res.stderr)
	}
	out := ok(t, r.dir, "budget", plan.ID, "--usd", "1")
	if !strings.Contains(out, "resumed 1 loop") {
		t.Errorf("loopr budget: %q, want the plan resumed", out)
	}
	waitEvery(t, 60*time.Second, slowPoll, "the tree to complete", func() bool {
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] == 5
	})
	if got := treeUsage(t, r, plan.ID); math.Abs(got.CostUSD-0.8) > 1e-9 {
		t.Errorf("tree_usage cost $%.2f, want $0.80 (4 plan runs and 4 more loops)", got.CostUSD)
	}
	d.stop()
}

// logTime reads the time= of a daemon log line (slog's text format).
func logTime(line string) time.Time {
	_, rest, ok := strings.Cut(line, "time=")
	if !ok {
		return time.Time{}
	}
	v, _, _ := strings.Cut(rest, " ")
	t, _ := time.Parse(time.RFC3339Nano, v)
	return t
}

// postSocket POSTs body to path over the daemon's socket and returns the
// status code and the response body.
func postSocket(t *testing.T, r repo, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(r.home, "loopr.sock"))
	}}, Timeout: 10 * time.Second}
	resp, err := hc.Post("http://loopr"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read: %v", path, err)
	}
	return resp.StatusCode, string(b)
}
