package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// needsConfig is a loopr.yml for testdata/needsagent.sh: stalls after 2 s,
// no progress after 3 identical failures in a budget of 10, webhooks and
// a notify command that appends to notifyLog.
func needsConfig(t *testing.T, hook, notifyLog string) string {
	t.Helper()
	agent, _ := json.Marshal([]string{"sh", abs(t, "testdata/needsagent.sh")})
	notify, _ := json.Marshal([]string{"sh", "-c",
		`printf '%s %s %s|%s\n' "$LOOPR_EVENT" "$LOOPR_LOOP_ID" "$LOOPR_ACTION" "$LOOPR_REASON" >>` + notifyLog})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 10
  max_api_calls: 8
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
  no_progress_limit: 3
agent:
  command: %s
  timeout_secs: 30
  stall_timeout_secs: 2
loops:
  plan: {require_approval: false}
  ralph: {max_iterations: 10, validate: []}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
webhooks:
  - url: %s
    events: [needs_human, tree_complete]
notify:
  command: %s
`, agent, hook, notify)
}

// TestNeedsYou drives the real daemon with scripted agents: a silent agent
// is killed after the stall timeout and its second stall parks it in
// needs_human; an agent failing identically lands there after 3 of its 10
// iterations; an agent that exits 0 having changed nothing never
// completes; a question shows in `loopr show` and `loopr answer` puts the
// answer in the next prompt; a plan's finished tree sends tree_complete.
// The webhook receiver gets needs_human and tree_complete, and the notify
// command runs once per event.
func TestNeedsYou(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hooks []api.WebhookPayload
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p api.WebhookPayload
		if err := json.NewDecoder(req.Body).Decode(&p); err == nil {
			mu.Lock()
			hooks = append(hooks, p)
			mu.Unlock()
		}
	}))
	t.Cleanup(srv.Close)
	notifyLog := filepath.Join(t.TempDir(), "notify.log")
	r := newRepo(t, needsConfig(t, srv.URL+"/loopr", notifyLog))
	d := startDaemon(t, r)

	add := func(typ, title string) loop.Loop {
		var l loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", typ, "--title", title, "--task", "behave: "+title, "--json"), &l)
		return l
	}
	silent, same, ask, lazy := add(loop.Ralph, "silent"), add(loop.Ralph, "same"), add(loop.Ralph, "ask"), add(loop.Ralph, "lazy")
	plan := add(loop.Plan, "tree")

	waitEvery(t, 90*time.Second, slowPoll, "four loops in needs_human and the plan's tree complete", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", d.output())
		}
		st := status(t, r)
		return st.Counts[loop.NeedsHuman] == 4 && st.Counts[loop.Complete] == 4
	})

	for _, tc := range []struct {
		l         loop.Loop
		reason    loop.NeedsReason
		iteration int
		detail    string
	}{
		{silent, loop.NeedsStalled, 2, "stalled: no output or file change for 2s"},
		{same, loop.NeedsNoProgress, 3, "3 iterations in a row failed the same way: agent exited 1"},
		{lazy, loop.NeedsNoProgress, 3, "no changes were made"},
		{ask, loop.NeedsQuestion, 1, "Which port should the server listen on?\n(8080 is taken by the proxy.)"},
	} {
		l := show(t, r, tc.l.ID)
		if l.Status != loop.NeedsHuman || l.Needs == nil || l.Needs.Reason != tc.reason || l.Iteration != tc.iteration || l.MaxIterations != 10 {
			t.Errorf("%s (%s): status %s needs %+v iteration %d/%d; want needs_human (%s) at iteration %d/10",
				tc.l.Title, l.ID, l.Status, l.Needs, l.Iteration, l.MaxIterations, tc.reason, tc.iteration)
			continue
		}
		if !strings.Contains(l.Needs.Detail, tc.detail) {
			t.Errorf("%s: needs.detail %q lacks %q", tc.l.Title, l.Needs.Detail, tc.detail)
		}
	}
	if log := iterFile(r, silent.ID, 1, "agent.log"); log != "" {
		t.Errorf("the silent agent wrote %q", log)
	}
	if res := run(t, r.dir, "", "logs", silent.ID); res.code != 0 || res.stdout != "" ||
		!strings.Contains(res.stderr, "iteration 2 of "+silent.ID+": the agent wrote no output") {
		t.Errorf("loopr logs of a silent agent: exit %d stdout %q stderr %q; want a line saying it wrote nothing", res.code, res.stdout, res.stderr)
	}

	// Where a person looks: show, status (first), list --status, why.
	out := ok(t, r.dir, "show", ask.ID)
	if !strings.Contains(out, "question:\n  Which port should the server listen on?\n  (8080 is taken by the proxy.)") ||
		!strings.Contains(out, "loopr answer "+ask.ID) {
		t.Errorf("loopr show %s lacks the question and the answer command:\n%s", ask.ID, out)
	}
	out = ok(t, r.dir, "status")
	if !strings.HasPrefix(out, "NEEDS YOU (4)\n") || !strings.Contains(out, `loopr answer `+loop.ShortID(same.ID)+` "…"`) {
		t.Errorf("loopr status does not list the 4 loops that need you first:\n%s", out)
	}
	var nh []loop.Loop
	mustJSON(t, ok(t, r.dir, "list", "--status", "needs_human", "--json"), &nh)
	var ids []string
	for _, l := range nh {
		ids = append(ids, l.ID)
	}
	if want := []string{silent.ID, same.ID, ask.ID, lazy.ID}; !slices.Equal(ids, want) {
		t.Errorf("list --status needs_human = %v; want %v", ids, want)
	}
	if out := ok(t, r.dir, "why", same.ID); !strings.Contains(out, "needs_human") || !strings.Contains(out, "needs you (no_progress)") {
		t.Errorf("loopr why %s does not explain needs_human:\n%s", same.ID, out)
	}
	if out := ok(t, r.dir, "debug", "scheduler", "--json"); !strings.Contains(out, `"needs_human"`) {
		t.Errorf("debug scheduler --json has no needs_human reason:\n%s", tail(out, 20))
	}

	// The answer resumes the same iteration and is in its prompt.
	out = ok(t, r.dir, "answer", ask.ID, "Use port 9090.")
	if !strings.Contains(out, "now pending at iteration 1/10") {
		t.Errorf("loopr answer = %q", out)
	}
	waitEvery(t, 30*time.Second, slowPoll, "the answered loop to complete", func() bool {
		return show(t, r, ask.ID).Status == loop.Complete
	})
	if p := iterFile(r, ask.ID, 1, "prompt.md"); !strings.Contains(p, "## Answer from the user") || !strings.Contains(p, "Use port 9090.") {
		t.Errorf("the prompt after the answer lacks it:\n%s", tail(p, 15))
	}
	if l := show(t, r, ask.ID); l.Answer != "" || l.Needs != nil {
		t.Errorf("after the answered iteration: answer %q needs %+v; want both cleared", l.Answer, l.Needs)
	}
	if res := run(t, r.dir, "", "answer", lazy.ID+"x"); res.code == 0 {
		t.Errorf("answer to an unknown loop exited 0")
	}
	if res := run(t, r.dir, "", "answer", ask.ID, "again"); res.code == 0 || !strings.Contains(res.stderr, "needs_human") {
		t.Errorf("answer to a complete loop = exit %d %q; want an error naming needs_human", res.code, res.stderr)
	}
	// cancel works as usual.
	ok(t, r.dir, "cancel", silent.ID)
	if l := show(t, r, silent.ID); l.Status != loop.Cancelled {
		t.Errorf("cancel of a needs_human loop: %s", l.Status)
	}

	// Webhooks and the notify command: once per event.
	want := map[string]int{
		"needs_human " + silent.ID: 1, "needs_human " + same.ID: 1, "needs_human " + ask.ID: 1,
		"needs_human " + lazy.ID: 1, "tree_complete " + plan.ID: 1,
	}
	waitFor(t, 15*time.Second, "five webhook deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(hooks) >= 5
	})
	time.Sleep(500 * time.Millisecond) // a duplicate would come now
	mu.Lock()
	got := map[string]int{}
	for _, h := range hooks {
		got[h.Event+" "+h.Loop.ID]++
		if h.Event == "needs_human" && (h.Action != `loopr answer `+h.Loop.ID+` "…"` || h.Loop.Needs == nil) {
			t.Errorf("needs_human delivery for %s: action %q needs %+v", h.Loop.ID, h.Action, h.Loop.Needs)
		}
		if h.Event == "tree_complete" && (!strings.Contains(h.Message, "ready to land: loopr land "+loop.ShortID(plan.ID)) || h.Action != "loopr land "+plan.ID) {
			t.Errorf("tree_complete delivery: message %q action %q", h.Message, h.Action)
		}
	}
	mu.Unlock()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("webhook deliveries %v; want %v", got, want)
	}
	var lines []string
	waitFor(t, 15*time.Second, "five notifications", func() bool {
		b, _ := os.ReadFile(notifyLog)
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(lines) >= 5
	})
	notes := map[string]int{}
	for _, ln := range lines {
		f := strings.Fields(ln)
		notes[f[0]+" "+f[1]]++
	}
	if fmt.Sprint(notes) != fmt.Sprint(want) {
		t.Errorf("notify command ran %v; want once per event %v\n%s", notes, want, strings.Join(lines, "\n"))
	}
	if !slices.ContainsFunc(lines, func(s string) bool {
		return strings.HasPrefix(s, "needs_human "+ask.ID+` loopr answer `+ask.ID+` "…"|question: Which port`)
	}) {
		t.Errorf("the question's notification lacks the action or the reason:\n%s", strings.Join(lines, "\n"))
	}
	stopCleanly(t, r, d)
}

// TestTUINeedsYouUnderTmux: in a real terminal, the dashboard heads the
// tree with the "Needs you" group and counts it in the header; n jumps
// from loop to loop of the group, and A answers the selected one: the
// daemon resumes it with the answer in its prompt.
func TestTUINeedsYouUnderTmux(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	agent, _ := json.Marshal([]string{"sh", abs(t, "testdata/needsagent.sh")})
	r := newRepo(t, fmt.Sprintf("agent:\n  command: %s\nloops:\n  ralph: {validate: []}\nstorage: {disk_quota_min_gb: 0}\ngit: {worktrees: false}\nscheduler: {poll_interval_secs: 1}\n", agent))
	startDaemon(t, r)
	var port, name loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "ask port", "--task", "which port", "--json"), &port)
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "ask name", "--task", "which name", "--json"), &name)
	waitEvery(t, 30*time.Second, slowPoll, "both loops to need you", func() bool {
		return status(t, r).Counts[loop.NeedsHuman] == 2
	})

	script := fmt.Sprintf("cd %q && %q tui --no-start; echo TUI-EXITED $?; sleep 30", r.dir, bin)
	tm.run("new-session", "-d", "-s", "tui", "-x", "140", "-y", "30", "-e", "NO_COLOR=1", "sh", "-c", script)
	s := tm.waitScreen("the Needs you group", "NEEDS YOU (2)", "needs you 2", "ALL LOOPS", "question: Which port should the server")
	if i, j := strings.Index(s, "NEEDS YOU (2)"), strings.Index(s, "ALL LOOPS"); i > j {
		t.Errorf("the group is not above the tree:\n%s", s)
	}
	selected := func() string {
		for _, ln := range strings.Split(tm.screen(), "\n") {
			if strings.Contains(ln, "›") {
				return ln
			}
		}
		return ""
	}
	// Both loops asked at about the same time; the group lists them longest
	// waiting first. n steps to the other one, then back.
	first := selected()
	tm.keys("n")
	deadline := time.Now().Add(testslack.Scale(10 * time.Second))
	for selected() == first {
		if time.Now().After(deadline) {
			t.Fatalf("n did not move the selection from %q:\n%s", first, tm.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	target, other := name, port
	if !strings.Contains(selected(), "ask name") {
		target, other = port, name
	}
	tm.keys("A")
	tm.waitScreen("the answer prompt", `answer ralph "`+target.Title+`": `)
	tm.keys("-l", "Use 9090.")
	tm.keys("Enter")
	waitEvery(t, 30*time.Second, slowPoll, "the answered loop to complete", func() bool {
		return show(t, r, target.ID).Status == loop.Complete
	})
	if p := iterFile(r, target.ID, 1, "prompt.md"); !strings.Contains(p, "Use 9090.") {
		t.Errorf("the answer given in the TUI is not in the next prompt:\n%s", tail(p, 10))
	}
	if l := show(t, r, other.ID); l.Status != loop.NeedsHuman {
		t.Errorf("the other loop is %s; want it still waiting for you", l.Status)
	}
	tm.waitScreen("the group after the answer", "NEEDS YOU (1)", "needs you 1")
	tm.keys("q")
	tm.waitScreen("exit", "TUI-EXITED 0")
}

// TestAnswerWithoutDaemon: `loopr answer` works on the store when no daemon
// runs, like every other action; status and list show the loop first.
func TestAnswerWithoutDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte("storage: {disk_quota_min_gb: 0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "loops.jsonl")
	rec := `{"id":"q1","type":"ralph","status":"needs_human","iteration":2,"max_iterations":5,"created_at":"2026-01-25T09:00:00Z","updated_at":"2026-01-25T09:00:00Z","title":"Pick a port","needs":{"reason":"stalled","detail":"2 iterations in a row stalled","since":"2026-01-25T09:00:00Z"},"stalls":2}` + "\n" +
		`{"id":"p1","type":"ralph","status":"pending","iteration":1,"max_iterations":5,"created_at":"2026-01-25T09:00:00Z","updated_at":"2026-01-25T09:00:00Z","title":"Other"}` + "\n"
	if err := os.WriteFile(file, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "import", file)
	if out := ok(t, dir, "status"); !regexp.MustCompile(`^NEEDS YOU \(1\)\n  q1  stalled  \S+ ago  Pick a port\n    2 iterations in a row stalled\n    → loopr answer q1 "…"\n`).MatchString(out) {
		t.Errorf("status without a daemon does not list the loop that needs you first:\n%s", out)
	}
	out := ok(t, dir, "answer", "q1", "Add logging, then retry.")
	if !strings.Contains(out, "answer q1: now pending at iteration 3/5") {
		t.Errorf("answer = %q; want pending at the next iteration (a stall spent one)", out)
	}
	l := show(t, repo{dir: dir}, "q1")
	if l.Status != loop.Pending || l.Answer != "Add logging, then retry." || l.Needs != nil || l.Stalls != 0 {
		t.Errorf("after answer: %s answer %q needs %+v stalls %d", l.Status, l.Answer, l.Needs, l.Stalls)
	}
	res := run(t, dir, "", "answer", "p1", "x")
	if res.code == 0 || !strings.Contains(res.stderr, "needs_human") {
		t.Errorf("answer to a pending loop = exit %d %q; want an error naming needs_human", res.code, res.stderr)
	}
	if res := run(t, dir, "", "answer"); res.code != 2 {
		t.Errorf("answer without an id = exit %d %q; want a usage error (2)", res.code, res.stderr)
	}
}
