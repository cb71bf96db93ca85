package e2e

import (
	"github.com/go-json-experiment/json/v1"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeanthropic"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// The real Claude Code CLI (npm @anthropic-ai/claude-code, installed by
// .ci/run) driven by loopr with the claude preset against
// internal/fakeanthropic, offline: the whole test re-executes itself in a
// fresh network namespace (unshare -n, loopback only) where the fake API,
// the daemon and every claude process live; without unshare it binds
// 127.0.0.1 only and says so.
//
// It is skipped only when no claude binary is found outside CI; with
// CI set (.ci/run sets CI=true) a missing binary fails.

// agentCLI finds the named agent CLI ($<env>, else PATH) and logs its
// version. Without one it skips the test, but under CI (.ci/run sets
// CI=true and installs the pinned npm package pkg@version) it fails.
func agentCLI(t *testing.T, name, env, pkg, version string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		var err error
		if p, err = exec.LookPath(name); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s not found on PATH: .ci/run installs %s; CI must run this test", name, pkg)
			}
			t.Skipf("%s not found on PATH (npm install -g %s@%s, or set %s, to run this test)", name, pkg, version, env)
		}
	}
	return p
}

// logVersion logs what `cli --version` prints; it fails the test when the
// CLI does not run.
func logVersion(t *testing.T, cli string) {
	t.Helper()
	out, err := exec.Command(cli, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", cli, err, out)
	}
	t.Logf("%s: %s", filepath.Base(cli), strings.TrimSpace(string(out)))
}

// serveAPI serves a fake provider API on 127.0.0.1 until the test ends and
// returns its address.
func serveAPI(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// claudePath finds the claude binary: $LOOPR_E2E_CLAUDE, else PATH.
func claudePath(t *testing.T) string {
	t.Helper()
	return agentCLI(t, "claude", "LOOPR_E2E_CLAUDE", "@anthropic-ai/claude-code", "2.1.332")
}

// inNetns re-executes the calling test in a new network namespace with only
// loopback up, and reports whether it did (the caller then returns). Inside
// the namespace, or where unshare is not allowed, it returns false.
func inNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv("LOOPR_E2E_NETNS") != "" {
		return false
	}
	if err := exec.Command("unshare", "-n", "sh", "-c", "ip link set lo up").Run(); err != nil {
		t.Logf("unshare -n unavailable (%v): the fake API binds 127.0.0.1 only, and claude's connectivity probes may reach the network", err)
		return false
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c", `ip link set lo up && exec "$0" "$@"`,
		os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v", "-test.timeout", "14m")
	cmd.Env = append(os.Environ(), "LOOPR_E2E_NETNS=1", "E2E_LOOPR_BIN="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("in a network namespace (unshare -n):\n%s", out)
	if err != nil {
		t.Fatalf("the test in the network namespace failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test in the network namespace did not pass (skipped?)")
	}
	return true
}

// agentTreeConfig runs a small tree on the claude preset (the codex test
// swaps the preset): short backoffs, ralph validated by limiter.txt.
const agentTreeConfig = `scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 4
  max_api_calls: 2
rate_limit:
  initial_backoff_secs: 1
  max_backoff_secs: 2
  recovery_period_secs: 0
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  preset: claude
  timeout_secs: 120
loops:
  plan: {require_approval: false, max_iterations: 3}
  spec: {max_iterations: 3}
  phase: {max_iterations: 3}
  ralph: {max_iterations: 3, validate: ["test -s limiter.txt"]}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`

// claudeRig is one daemon running the real claude against a fake API.
type claudeRig struct {
	api  *fakeanthropic.Server
	repo repo
	d    *daemonProc

	mu     sync.Mutex
	marks  map[string]time.Time // named instants the script recorded
	events []string
}

func (c *claudeRig) mark(name string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.marks[name]; !ok {
		c.marks[name] = at
	}
}

func (c *claudeRig) at(name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.marks[name]
	return t, ok
}

// loopTypeRe finds the loop type in the first line of loopr's prompts.
var (
	loopTypeRe = regexp.MustCompile(`for (plan|spec|phase|task) loop (\w+)`)
	artifactRe = regexp.MustCompile("named by `\\$LOOPR_ARTIFACT`:\\s*`([^`]+)`")
)

// Each loop writes a small artifact: a tree of one spec, one phase, one
// task (4 loops).
var claudeArtifacts = map[string]string{
	"plan":  "# Plan: Rate limiter\n\nAdd a token-bucket rate limiter.\n\n## Specs\n\n### Spec 1: Token bucket\n\nThe bucket and its refill.\n",
	"spec":  "# Spec: Token bucket\n\nA bucket per client.\n\n## Phases\n\n### Phase 1: Bucket\n\nThe type and its tests.\n",
	"phase": "# Phase: Bucket\n\nOne task.\n\n## Tasks\n\n### Task 1: Implement the bucket\n\nWrite limiter.txt.\n",
}

// treeTurn is what a scripted model does at one turn of a loop of the
// agent tree: the first writes the loop's artifact to the path its prompt
// names (a task: limiter.txt, through the shell), the next answers in text
// (a task: passingAnswer).
type treeTurn struct {
	text          string // the answer, when command and path are ""
	command       string // a shell command to run
	path, content string // a file to write
}

func nextTurn(prompt, typ string, turn int) treeTurn {
	switch {
	case turn > 0 && typ == "task":
		return treeTurn{text: passingAnswer}
	case turn > 0:
		return treeTurn{text: "Wrote the " + typ + "."}
	case typ == "task":
		return treeTurn{command: "printf 'token bucket\\n' > limiter.txt"}
	}
	path := artifactRe.FindStringSubmatch(prompt)
	if path == nil {
		return treeTurn{text: "no artifact path in the prompt"}
	}
	return treeTurn{path: path[1], content: claudeArtifacts[typ]}
}

// passingAnswer is the final answer of the ralph loop: it talks about rate
// limiting and HTTP 429 and must pass, not be taken for a limit.
const passingAnswer = "Implemented the token-bucket rate limiter (answers HTTP 429 when the bucket is empty)."

// usagePerTurn is what each main-loop answer reports consuming.
var usagePerTurn = fakeanthropic.Usage{InputTokens: 1200, OutputTokens: 40, CacheReadTokens: 300, CacheCreationTokens: 50}

// script answers like a model doing the tree's work: the first turn of a
// plan, spec or phase loop writes the artifact with the Write tool, of the
// task loop writes limiter.txt with Bash; the second turn answers in text.
// limit, when set, may answer a request with an error instead.
func (c *claudeRig) script(limit func(r *fakeanthropic.Request, typ string) (fakeanthropic.Reply, bool)) fakeanthropic.Script {
	return func(r *fakeanthropic.Request) fakeanthropic.Reply {
		prompt := r.Prompt()
		m := loopTypeRe.FindStringSubmatch(prompt)
		typ := ""
		if m != nil {
			typ = m[1]
		}
		if limit != nil {
			if rep, ok := limit(r, typ); ok {
				return rep
			}
		}
		if !r.HasTool("Bash") || m == nil {
			return fakeanthropic.Text("Rate limiter", fakeanthropic.Usage{InputTokens: 20, OutputTokens: 3})
		}
		if r.Turn() > 0 {
			if typ == "task" {
				return fakeanthropic.Text(passingAnswer, usagePerTurn)
			}
			return fakeanthropic.Text("Wrote the "+typ+".", usagePerTurn)
		}
		if typ == "task" {
			return fakeanthropic.Tool("Bash", map[string]any{"command": "printf 'token bucket\\n' > limiter.txt", "description": "write the limiter"}, usagePerTurn)
		}
		path := artifactRe.FindStringSubmatch(prompt)
		if path == nil {
			return fakeanthropic.Text("no artifact path in the prompt", usagePerTurn)
		}
		return fakeanthropic.Tool("Write", map[string]any{"file_path": path[1], "content": claudeArtifacts[typ]}, usagePerTurn)
	}
}

// startClaudeRig starts the fake API and a daemon whose agent profile is
// the claude preset; auth is the environment naming the credential
// (ANTHROPIC_API_KEY=… for an API key, CLAUDE_CODE_OAUTH_TOKEN=… for a
// subscriber).
func startClaudeRig(t *testing.T, claude, auth string, limit func(r *fakeanthropic.Request, typ string) (fakeanthropic.Reply, bool), extraConfig ...string) *claudeRig {
	t.Helper()
	c := &claudeRig{marks: map[string]time.Time{}}
	c.api = &fakeanthropic.Server{}
	c.api.Script = c.script(limit)
	addr := serveAPI(t, c.api)

	home := t.TempDir() // claude's own settings and sessions
	key, val, _ := strings.Cut(auth, "=")
	for k, v := range map[string]string{
		"ANTHROPIC_BASE_URL":      "http://" + addr,
		"ANTHROPIC_API_KEY":       "",
		"CLAUDE_CODE_OAUTH_TOKEN": "",
		"IS_SANDBOX":              "1", // --dangerously-skip-permissions as root
		"HOME":                    home,
		"DISABLE_TELEMETRY":       "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"PATH": filepath.Dir(claude) + string(os.PathListSeparator) + os.Getenv("PATH"),
	} {
		t.Setenv(k, v)
	}
	t.Setenv(key, val)

	c.repo = newRepo(t, claudeConfig(agentTreeConfig+strings.Join(extraConfig, "")))
	c.d = startDaemon(t, c.repo)
	return c
}

// claudeConfig edits the loopr.yml of startClaudeRig; a test may replace
// it before (not in parallel tests: it is one variable).
var claudeConfig = func(cfg string) string { return cfg }

// runTree queues the plan and waits for the tree to settle; it returns
// every loop.
func (c *claudeRig) runTree(t *testing.T) []loop.Loop {
	t.Helper()
	return runAgentTree(t, c.repo, c.d)
}

// runAgentTree queues the plan on the daemon d of r and waits for the tree
// to settle; it returns every loop.
func runAgentTree(t *testing.T, r repo, d *daemonProc) []loop.Loop {
	t.Helper()
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Add a rate limiter", "--json"), &plan)
	waitEvery(t, 5*time.Minute, slowPoll, "the tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		st := status(t, r)
		return st.Counts[loop.Complete] > 0 && settled(st)
	})
	return list(t, r)
}

// checkClaudeTree asserts a complete tree of 4 loops, each with the usage
// and cost claude reported, in its record and in usage.json.
func checkClaudeTree(t *testing.T, c *claudeRig, loops []loop.Loop) {
	t.Helper()
	checkAgentTree(t, c.repo, loops, loop.Usage{InputTokens: usagePerTurn.InputTokens, OutputTokens: usagePerTurn.OutputTokens,
		CacheReadTokens: usagePerTurn.CacheReadTokens}, true)
}

// checkAgentTree asserts a complete tree of 4 loops, each with at least
// the usage min (and a cost when withCost) in its record and in
// usage.json, and the plan's tree_usage their sum.
func checkAgentTree(t *testing.T, r repo, loops []loop.Loop, min loop.Usage, withCost bool) {
	t.Helper()
	if len(loops) != 4 {
		t.Fatalf("want a tree of 4 loops, got %d:\n%s", len(loops), describe(loops))
	}
	var total loop.Usage
	for _, l := range loops {
		if l.Status != loop.Complete {
			t.Errorf("loop %s (%s) is %s, want complete (reason %q)\nagent.log:\n%s", l.ID, l.Type, l.Status, l.Reason,
				tail(iterFile(r, string(l.ID), l.Iteration, "agent.log"), 5))
			continue
		}
		got := show(t, r, string(l.ID))
		if got.Usage.InputTokens < min.InputTokens || got.Usage.OutputTokens < min.OutputTokens ||
			got.Usage.CacheReadTokens < min.CacheReadTokens || withCost && got.Usage.CostUSD <= 0 || got.Usage.AgentSeconds <= 0 {
			t.Errorf("loop %s (%s): usage %+v, want at least the tokens the agent reported %+v (and a cost: %v)", l.ID, l.Type, got.Usage, min, withCost)
		}
		total = total.Add(got.Usage)
		var file loop.Usage
		raw := iterFile(r, string(l.ID), l.Iteration, "usage.json")
		if err := json.Unmarshal([]byte(raw), &file); err != nil {
			t.Errorf("loop %s: usage.json %q: %v", l.ID, raw, err)
		} else if withCost && file.CostUSD <= 0 || file.InputTokens < min.InputTokens {
			t.Errorf("loop %s: usage.json %+v, want at least %+v", l.ID, file, min)
		}
	}
	t.Logf("the 4 loops' usage: %d input, %d output, %d cache read, %d cache creation tokens, $%.4f, %.1f agent seconds",
		total.InputTokens, total.OutputTokens, total.CacheReadTokens, total.CacheCreationTokens, total.CostUSD, total.AgentSeconds)
	// The plan's tree usage is the sum of its loops'.
	for _, l := range loops {
		if l.Type != loop.Plan {
			continue
		}
		var res struct {
			TreeUsage *loop.Usage `json:"tree_usage"`
		}
		mustJSON(t, ok(t, r.dir, "show", string(l.ID), "--json"), &res)
		if res.TreeUsage == nil {
			t.Errorf("plan %s: show --json has no tree_usage", l.ID)
			continue
		}
		if d := res.TreeUsage.CostUSD - total.CostUSD; d > 1e-9 || d < -1e-9 || res.TreeUsage.InputTokens != total.InputTokens {
			t.Errorf("plan tree_usage %+v, want the sum of its loops %+v", res.TreeUsage, total)
		}
		t.Logf("tree usage: %d input, %d output, %d cache read, %d cache creation tokens, $%.4f, %.1f agent seconds",
			res.TreeUsage.InputTokens, res.TreeUsage.OutputTokens, res.TreeUsage.CacheReadTokens, res.TreeUsage.CacheCreationTokens,
			res.TreeUsage.CostUSD, res.TreeUsage.AgentSeconds)
	}
}

// TestClaudeCode: a tree completes with the claude preset and the real
// CLI; usage and cost land on every loop; an API-key 429 is detected in
// seconds and waited out, a 529 is retried at the same iteration, a
// subscriber session limit is waited out until its reset, none spending an
// iteration; the task whose answer talks about HTTP 429 passes.
func TestClaudeCode(t *testing.T) {
	claude := claudePath(t)
	if inNetns(t) {
		return
	}
	logVersion(t, claude)

	t.Run("api key 429", func(t *testing.T) {
		// The first spec call and everything in the next 3 s answer 429;
		// the first phase call answers 529.
		var c *claudeRig
		var until time.Time
		c = startClaudeRig(t, claude, "ANTHROPIC_API_KEY=test-key", func(r *fakeanthropic.Request, typ string) (fakeanthropic.Reply, bool) {
			if typ == "phase" && r.HasTool("Bash") {
				if _, ok := c.at("529"); !ok {
					// The provider is overloaded once: a transient error,
					// retried at the same iteration.
					c.mark("529", r.Received)
					return fakeanthropic.Overloaded(), true
				}
			}
			if typ == "spec" && r.HasTool("Bash") && until.IsZero() {
				until = r.Received.Add(3 * time.Second)
				c.mark("first 429", r.Received)
			}
			if r.Received.Before(until) {
				return fakeanthropic.RateLimited(3 * time.Second), true
			}
			return fakeanthropic.Reply{}, false
		})
		loops := c.runTree(t)
		checkClaudeTree(t, c, loops)
		first, ok := c.at("first 429")
		if !ok {
			t.Fatal("the fake API never answered 429")
		}
		if _, ok := c.at("529"); !ok {
			t.Error("the fake API never answered 529")
		}
		for _, l := range loops {
			if l.Type == loop.Phase && (l.Iteration != 1 || iterFile(c.repo, string(l.ID), 1, "attempt-1/agent.log") == "") {
				t.Errorf("phase after a 529: iteration %d, attempt-1 kept: %v; want iteration 1 and the overloaded attempt kept",
					l.Iteration, iterFile(c.repo, string(l.ID), 1, "attempt-1/agent.log") != "")
			}
		}
		s := stopCleanly(t, c.repo, c.d)
		checkLimitWaited(t, c, loops, s, loop.Spec, first, time.Time{})
	})

	t.Run("subscriber session limit", func(t *testing.T) {
		// The first phase call hits a five-hour limit that resets 6 s
		// later; every call until then is refused the same way.
		var c *claudeRig
		var reset time.Time
		c = startClaudeRig(t, claude, "CLAUDE_CODE_OAUTH_TOKEN=test-oauth", func(r *fakeanthropic.Request, typ string) (fakeanthropic.Reply, bool) {
			if typ == "phase" && r.HasTool("Bash") && reset.IsZero() {
				reset = r.Received.Add(6 * time.Second).Truncate(time.Second).Add(time.Second)
				c.mark("first 429", r.Received)
			}
			if !reset.IsZero() && r.Received.Before(reset) {
				return fakeanthropic.SessionLimited("five_hour", reset), true
			}
			return fakeanthropic.Reply{}, false
		})
		loops := c.runTree(t)
		checkClaudeTree(t, c, loops)
		first, ok := c.at("first 429")
		if !ok {
			t.Fatal("the fake API never refused a call")
		}
		s := stopCleanly(t, c.repo, c.d)
		checkLimitWaited(t, c, loops, s, loop.Phase, first, reset)
		for _, l := range loops {
			if l.Type == loop.Phase {
				// 2.1.332 names the five_hour claim "5-hour limit"
				// (2.1.197 said "session limit").
				if log := iterFile(c.repo, string(l.ID), 1, "attempt-1/agent.log"); !strings.Contains(log, "You've hit your 5-hour limit · resets") || !strings.Contains(log, `"status":"rejected"`) {
					t.Errorf("phase attempt-1/agent.log lacks the subscriber limit:\n%s", tail(log, 5))
				}
			}
		}
	})
}

// TestClaudeCodeBudget: a tree budget of $0.02 stops the tree once the
// real CLI's reported cost reaches it: the next loop waits in needs_human
// (budget) and no task reaches the provider.
func TestClaudeCodeBudget(t *testing.T) {
	claude := claudePath(t)
	if inNetns(t) {
		return
	}
	c := startClaudeRig(t, claude, "ANTHROPIC_API_KEY=test-key", nil, "budget: {usd: 0.02}\n")
	var plan loop.Loop
	mustJSON(t, ok(t, c.repo.dir, "plan", "Add a rate limiter", "--json"), &plan)
	var held loop.Loop
	waitEvery(t, 3*time.Minute, slowPoll, "a loop to wait for the budget", func() bool {
		for _, l := range list(t, c.repo) {
			if l.Status == loop.NeedsHuman {
				held = l
				return true
			}
		}
		return false
	})
	if held.Needs == nil || held.Needs.Reason != loop.NeedsBudget || !strings.Contains(held.Needs.Detail, "$") {
		t.Fatalf("loop %s (%s) needs %+v, want reason budget with the dollars", held.ID, held.Type, held.Needs)
	}
	var res struct {
		TreeUsage loop.Usage `json:"tree_usage"`
	}
	mustJSON(t, ok(t, c.repo.dir, "show", string(plan.ID), "--json"), &res)
	if res.TreeUsage.CostUSD < 0.02 {
		t.Errorf("tree spent $%.4f, want at least the $0.02 budget before it stopped", res.TreeUsage.CostUSD)
	}
	for _, r := range c.api.Requests() {
		if m := loopTypeRe.FindStringSubmatch(r.Prompt()); m != nil && m[1] == "task" {
			t.Errorf("a task call reached the provider after the budget was spent")
			break
		}
	}
	t.Logf("budget $0.02: %s loop %s waits (%s) after the tree spent $%.4f", held.Type, held.ID, held.Needs.Detail, res.TreeUsage.CostUSD)
}

// checkLimitWaited asserts that the loop of type typ was rate limited once
// at iteration 1 and completed at iteration 1 (no iteration spent), that
// loopr saw the limit within 15 s of the provider's first refusal, and,
// when reset is set, that no main call of that loop reached the API again
// before it.
func checkLimitWaited(t *testing.T, c *claudeRig, loops []loop.Loop, s *store.Store, typ string, first, reset time.Time) {
	t.Helper()
	limited := checkLimitSeen(t, "claude", loops, s, typ, first)
	if reset.IsZero() {
		return
	}
	for _, r := range c.api.Requests() {
		if r.HasTool("Bash") && strings.Contains(r.Prompt(), string(limited.ID)) && r.Received.After(first) && r.Received.Before(reset.Add(-time.Second)) {
			t.Errorf("a call of the limited loop reached the API at %s, before the reset %s", r.Received.Format(time.TimeOnly), reset.Format(time.TimeOnly))
		}
	}
}

// checkLimitSeen asserts that the loop of type typ was rate limited at
// iteration 1 and completed at iteration 1 (no iteration spent), within
// 15 s of the provider's first refusal (first), and that the task loop
// whose answer talks about HTTP 429 passed at once. It returns that loop.
func checkLimitSeen(t *testing.T, cli string, loops []loop.Loop, s *store.Store, typ string, first time.Time) loop.Loop {
	t.Helper()
	var limited loop.Loop
	for _, l := range loops {
		if l.Type == typ {
			limited = l
		}
		if l.Type == loop.Ralph && l.Iteration != 1 {
			t.Errorf("the task loop whose answer talks about HTTP 429 took %d iterations, want 1", l.Iteration)
		}
	}
	if limited.Iteration != 1 {
		t.Errorf("the rate-limited %s loop completed at iteration %d, want 1 (a limit spends no iteration)", typ, limited.Iteration)
	}
	var seen time.Time
	for _, ev := range journal(t, s) {
		if ev.Kind == loop.EventRateLimit && ev.Loop == limited.ID {
			seen = ev.Time
			if !strings.Contains(ev.Message, "limit") && !strings.Contains(ev.Message, "429") {
				t.Errorf("rate_limit event message %q names no limit", ev.Message)
			}
			break
		}
	}
	if seen.IsZero() {
		t.Fatalf("no rate_limit event for the %s loop %s", typ, limited.ID)
	}
	took := seen.Sub(first)
	t.Logf("%s: first 429 at the API → rate limit recorded by loopr: %s (target ≤ 15 s)", cli, took.Round(time.Millisecond))
	if took > 15*time.Second || took < 0 {
		t.Errorf("loopr recorded the limit %s after the provider's first 429, want ≤ 15 s", took)
	}
	return limited
}
