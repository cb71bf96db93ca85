package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// The usage ledger and the rate limits against agents that report garbage
// (issue 20): an absurd or millisecond reset time, a cost of 1e308, token
// counts of 5e18. testdata/ledgeragent.sh behaves as each loop's title says.

// ledgerConfig is a loopr.yml whose agent is testdata/ledgeragent.sh
// (claude preset): short backoffs, ralph loops of 3 iterations. extra is
// appended.
func ledgerConfig(t *testing.T, extra string) string {
	t.Helper()
	argv, _ := json.Marshal([]string{"sh", abs(t, "testdata/ledgeragent.sh")})
	return fastRetries + fmt.Sprintf(`agent:
  preset: claude
  command: %s
  timeout_secs: 20
loops:
  ralph: {validate: ["true"], max_iterations: 3}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
%s`, argv, extra)
}

// addLoop adds a ralph loop titled title (the agent's behaviour) with
// extra flags and returns it.
func addLoop(t *testing.T, r repo, title string, flags ...string) loop.Loop {
	t.Helper()
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, append([]string{"add", "--type", "ralph", "--title", title, "--task", "Do " + title, "--json"}, flags...)...), &l)
	return l
}

// limitsOf runs `loopr limits --json` and returns the profile agent's row.
func limitsOf(t *testing.T, r repo, agent string) api.AgentLimit {
	t.Helper()
	var rows []api.AgentLimit
	mustJSON(t, ok(t, r.dir, "limits", "--json"), &rows)
	for _, row := range rows {
		if row.Agent == agent {
			return row
		}
	}
	t.Fatalf("loopr limits --json has no profile %s: %+v", agent, rows)
	return api.AgentLimit{}
}

// TestAbsurdResetsDoNotFreezeTheProfile: a rejected rate_limit_event whose
// resetsAt is 99999999999 (the year 5138) is not believed: the profile
// backs off a second, is probed again, and the loop completes. One whose
// resetsAt is in milliseconds is read as an hour ahead, not as the year
// 58865. The loop it holds in needs_human takes no answer while the limit
// runs (the refusal names `loopr limits clear`); `loopr limits` shows the
// limit, and `loopr limits clear default` ends it: the loop completes.
func TestAbsurdResetsDoNotFreezeTheProfile(t *testing.T) {
	t.Parallel()
	// A limit held for a second puts its loops in needs_human.
	r := newRepo(t, strings.Replace(ledgerConfig(t, ""), "  recovery_period_secs: 0\n", "  recovery_period_secs: 0\n  notify_after_secs: 1\n", 1))
	startDaemon(t, r)

	absurd := addLoop(t, r, "absurd")
	waitEvery(t, 60*time.Second, slowPoll, "the absurd loop to finish", func() bool {
		l := show(t, r, absurd.ID)
		return l.Status.Terminal() || l.Status == loop.NeedsHuman
	})
	if l := show(t, r, absurd.ID); l.Status != loop.Complete || starts(r, absurd.ID) != 2 {
		t.Fatalf("absurd: %s after %d runs (%s); want complete after 2: the reset of the year 5138 not believed", l.Status, starts(r, absurd.ID), l.Reason)
	}
	if events := ok(t, r.dir, "events", absurd.ID, "--json"); !strings.Contains(events, "announced reset 5138-11-16T09:46:39Z more than 7 days away, not believed: re-probe") {
		t.Errorf("the journal does not say the reset was not believed:\n%s", events)
	}
	if row := limitsOf(t, r, "default"); row.Limited {
		t.Errorf("default is still limited after the probe passed: %+v", row)
	}

	millis := addLoop(t, r, "millis")
	waitEvery(t, 60*time.Second, slowPoll, "the millis loop to wait for its limit", func() bool {
		return show(t, r, millis.ID).Status == loop.NeedsHuman
	})
	row := limitsOf(t, r, "default")
	if left := time.Until(row.ResumeAt); !row.Limited || left < 50*time.Minute || left > 61*time.Minute || row.Held != 1 || !row.Configured {
		t.Fatalf("limits: %+v; want default limited for about an hour (resetsAt in milliseconds), holding 1 loop", row)
	}
	if out := ok(t, r.dir, "limits"); !regexp.MustCompile(`(?m)^default +limited until \S+ \S+ \(in (\d+m|1h0m)\) +1 +1$`).MatchString(out) ||
		!strings.Contains(out, "loopr limits clear default") {
		t.Errorf("loopr limits:\n%s", out)
	}
	l := show(t, r, millis.ID)
	if l.Needs == nil || l.Needs.Reason != loop.NeedsLimit {
		t.Fatalf("millis needs %+v, want limit", l.Needs)
	}
	if out := ok(t, r.dir, "status"); !strings.Contains(out, "→ loopr limits clear default") {
		t.Errorf("loopr status does not say how to end the limit:\n%s", out)
	}
	res := run(t, r.dir, "", "answer", millis.ID, "go on")
	if res.code != 2 || !strings.Contains(res.stderr, "agent default is rate limited until") || !strings.Contains(res.stderr, "loopr limits clear default") {
		t.Errorf("loopr answer on a loop held by a running limit: exit %d, stderr %q; want 2 naming loopr limits clear default", res.code, res.stderr)
	}
	if l := show(t, r, millis.ID); l.Status != loop.NeedsHuman {
		t.Fatalf("after the refused answer: %s, want still needs_human", l.Status)
	}

	if res := run(t, r.dir, "", "limits", "clear", "nope"); res.code != 2 || !strings.Contains(res.stderr, `unknown agent profile "nope"`) {
		t.Errorf("limits clear nope: exit %d, stderr %q; want 2 naming the profile", res.code, res.stderr)
	}
	out := ok(t, r.dir, "limits", "clear", "default")
	if !strings.Contains(out, "agent default: rate limit cleared (it was limited until") || !strings.Contains(out, "resumed 1 loop that waited for it: "+millis.ID) {
		t.Errorf("loopr limits clear default:\n%s", out)
	}
	waitEvery(t, 60*time.Second, slowPoll, "the millis loop to complete", func() bool {
		return show(t, r, millis.ID).Status.Terminal()
	})
	if l := show(t, r, millis.ID); l.Status != loop.Complete || l.Iteration != 1 {
		t.Errorf("millis: %s at iteration %d, want complete at 1 (a limit spends none)", l.Status, l.Iteration)
	}
}

// TestGarbageUsageIsBoundedAndNotRerun: an agent that reports a cost of
// 1e308 on every run is charged a bounded amount and its loop spends its
// 3 iterations, 3 agent starts, instead of being requeued at the same
// iteration forever when the sum would be +Inf. One that reports 5e18
// input and 5e18 output tokens does not wrap its token count below its
// token budget: it waits for the budget after its first run.
func TestGarbageUsageIsBoundedAndNotRerun(t *testing.T) {
	t.Parallel()
	r := newRepo(t, ledgerConfig(t, ""))
	startDaemon(t, r)
	huge := addLoop(t, r, "huge")
	tokens := addLoop(t, r, "tokens", "--budget-tokens", "1000")
	start := time.Now()
	for {
		h, k := show(t, r, huge.ID), show(t, r, tokens.ID)
		if n := starts(r, huge.ID); n > 3 {
			t.Fatalf("%d agent starts of a loop of max_iterations 3 (now %s at iteration %d): rerun at the same iteration", n, h.Status, h.Iteration)
		}
		if h.Status.Terminal() && k.Status == loop.NeedsHuman {
			break
		}
		if time.Since(start) > testslack.Scale(60*time.Second) {
			t.Fatalf("timed out: huge %s at iteration %d after %d starts; tokens %s after %d starts",
				h.Status, h.Iteration, starts(r, huge.ID), k.Status, starts(r, tokens.ID))
		}
		time.Sleep(slowPoll())
	}
	time.Sleep(3 * time.Second) // three retry backoffs: nothing starts again
	h := show(t, r, huge.ID)
	if n := starts(r, huge.ID); n != 3 || h.Status != loop.Failed || h.Iteration != 3 {
		t.Errorf("huge: %d starts, %s at iteration %d; want 3 starts and failed at max_iterations", n, h.Status, h.Iteration)
	}
	if h.Usage.CostUSD != 3*loop.MaxRunUSD || h.Usage.InputTokens != 3000 {
		t.Errorf("huge usage %+v; want 3 runs of at most $%g each", h.Usage, loop.MaxRunUSD)
	}
	k := show(t, r, tokens.ID)
	if n := starts(r, tokens.ID); n != 1 || k.Needs == nil || k.Needs.Reason != loop.NeedsBudget {
		t.Errorf("tokens: %d starts, %s, needs %+v; want its token budget spent after 1 run", n, k.Status, k.Needs)
	}
	if want := 2 * loop.MaxRunTokens; k.Usage.Tokens() != want || k.Usage.InputTokens != loop.MaxRunTokens {
		t.Errorf("tokens usage %+v (%d tokens); want each kind bounded, %d in all", k.Usage, k.Usage.Tokens(), want)
	}
	long := regexp.MustCompile(`\d{16,}`)
	for _, args := range [][]string{{"status"}, {"list"}, {"show", huge.ID}, {"stats"}} {
		if out := ok(t, r.dir, args...); long.MatchString(out) {
			t.Errorf("loopr %s prints a %d-digit number:\n%s", args[0], len(long.FindString(out)), out)
		}
	}
}

// TestAgentSecondsIsTheSumOfTheIterations: a loop's agent_seconds is the
// sum of the agent_seconds of its runs' usage.json files (a rate-limited
// attempt's included), not twice it.
func TestAgentSecondsIsTheSumOfTheIterations(t *testing.T) {
	t.Parallel()
	r := newRepo(t, ledgerConfig(t, ""))
	startDaemon(t, r)
	flaky := addLoop(t, r, "flaky")
	brief := addLoop(t, r, "brief")
	waitEvery(t, 60*time.Second, slowPoll, "both loops to complete", func() bool {
		return show(t, r, flaky.ID).Status.Terminal() && show(t, r, brief.ID).Status.Terminal()
	})
	for _, id := range []string{flaky.ID, brief.ID} {
		l := show(t, r, id)
		var sum float64
		files := 0
		err := filepath.WalkDir(filepath.Join(r.home, "loops", id, "iterations"), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != "usage.json" {
				return err
			}
			var u loop.Usage
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &u); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			sum += u.AgentSeconds
			files++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if l.Status != loop.Complete || files != 2 || starts(r, id) != 2 {
			t.Fatalf("loop %s (%s): %s with %d usage.json files after %d runs; want complete, 2 and 2", id, l.Title, l.Status, files, starts(r, id))
		}
		if math.Abs(l.Usage.AgentSeconds-sum) > 1e-6 || sum < 0.3 {
			t.Errorf("loop %s (%s): agent_seconds %.3f, want the sum of its usage.json files %.3f", id, l.Title, l.Usage.AgentSeconds, sum)
		}
	}
}

// TestAnswersAndBudgets: an answer to a loop that asked a question is
// refused while its budget is spent (answered, it would wait behind the
// budget gate, out of "Needs you"), naming `loopr budget`; once raised,
// the answer is taken and the loop completes. `loopr budget` lists the
// loops it resumed by id; `--usd Inf` and `--budget-usd Inf` are usage
// errors (exit 2), with the daemon running too.
func TestAnswersAndBudgets(t *testing.T) {
	t.Parallel()
	r := newRepo(t, ledgerConfig(t, ""))
	startDaemon(t, r)
	ask := addLoop(t, r, "ask", "--budget-usd", "0.25")
	flaky := addLoop(t, r, "flaky", "--budget-usd", "0.05")
	waitEvery(t, 60*time.Second, slowPoll, "both loops to need a person", func() bool {
		return show(t, r, ask.ID).Status == loop.NeedsHuman && show(t, r, flaky.ID).Status == loop.NeedsHuman
	})
	if l := show(t, r, ask.ID); l.Needs == nil || l.Needs.Reason != loop.NeedsQuestion || l.Usage.CostUSD < 0.3-1e-9 {
		t.Fatalf("ask: needs %+v, usage %+v; want a question and $0.30 spent", l.Needs, l.Usage)
	}
	res := run(t, r.dir, "", "answer", ask.ID, "8080")
	want := ask.ID + ": budget spent: $0.30 of $0.25; answered, this ralph would wait behind the budget gate, out of Needs you — raise the budget with loopr budget " + ask.ID + " --usd N first, then answer"
	if res.code != 2 || res.stderr != "loopr: "+want+"\n" {
		t.Errorf("loopr answer while the budget is spent: exit %d, stderr %q; want 2 and %q", res.code, res.stderr, want)
	}
	if l := show(t, r, ask.ID); l.Status != loop.NeedsHuman || l.Answer != "" {
		t.Fatalf("after the refused answer: %s, answer %q; want still needs_human without it", l.Status, l.Answer)
	}

	for _, args := range [][]string{{"budget", ask.ID, "--usd", "Inf"}, {"budget", ask.ID, "--usd", "NaN"}, {"add", "--type", "ralph", "--task", "x", "--budget-usd", "+Inf"}} {
		if res := run(t, r.dir, "", args...); res.code != 2 || !strings.Contains(res.stderr, "must be a finite number >= 0") || strings.Contains(res.stderr, "json") {
			t.Errorf("loopr %s: exit %d, stderr %q; want 2 and the flag's rule", strings.Join(args, " "), res.code, res.stderr)
		}
	}

	out := ok(t, r.dir, "budget", flaky.ID, "--usd", "1")
	if !strings.Contains(out, "resumed 1 loop(s) waiting for the budget: "+flaky.ID+"\n") || strings.Contains(out, "[") {
		t.Errorf("loopr budget: %q; want the resumed loop's id, not a Go slice", out)
	}
	ok(t, r.dir, "budget", ask.ID, "--usd", "1")
	if out := ok(t, r.dir, "answer", ask.ID, "8080"); !strings.Contains(out, "now pending") {
		t.Errorf("loopr answer after the raise: %q", out)
	}
	waitEvery(t, 60*time.Second, slowPoll, "both loops to complete", func() bool {
		return show(t, r, ask.ID).Status == loop.Complete && show(t, r, flaky.ID).Status == loop.Complete
	})
}
