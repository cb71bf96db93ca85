package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/internal/fakeanthropic"
	"github.com/loopr-dev/loopr/internal/fakeresponses"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Sessions (agent.resume) with the real claude against the fake API. Each
// task loop's task names its scenario; the scripted model reads two
// notes files with Bash, then writes limiter.txt, then answers. The first
// run of a scenario is cut at its third call: the fake API hangs (and the
// test kills the daemon with SIGKILL), answers 429, or the model writes a
// question for a person. The run after continues the session when loopr
// resumes it: its first call carries the history and loopr's resume
// prompt, and the model goes straight to writing limiter.txt.

// resumeMarker is in loopr's resume prompt (runner/prompts/resume.md).
const resumeMarker = "You are continuing your own session"

// notes are the files the scripted model reads: what a cold start reads
// again and a resumed session has in its history.
var notes = strings.Repeat("The token bucket refills at a fixed rate; each request takes one token. ", 300)

type sessionRig struct {
	*claudeRig
	mu    sync.Mutex
	cut   map[string]bool   // scenarios whose first run was cut
	seen  map[string]string // scenario → the last user message of its resumed call
	calls chan string       // the scenario of each call cut
}

func (s *sessionRig) script(r *fakeanthropic.Request, _ string) (fakeanthropic.Reply, bool) {
	if !r.HasTool("Bash") {
		return fakeanthropic.Text("Rate limiter", fakeanthropic.Usage{InputTokens: 20, OutputTokens: 3}), true
	}
	scenario := ""
	if m := scenarioRe.FindStringSubmatch(r.Prompt()); m != nil {
		scenario = m[1]
	}
	last := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			last = m.Text()
		}
	}
	bash := func(cmd string) (fakeanthropic.Reply, bool) {
		return fakeanthropic.Tool("Bash", map[string]any{"command": cmd, "description": "work"}, usagePerTurn), true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Contains(last, resumeMarker) {
		s.seen[scenario] = last
		return bash("printf 'token bucket\\n' > limiter.txt")
	}
	switch turn := r.Turn(); {
	case turn == 0:
		return bash("cat notes1.txt")
	case turn == 1:
		return bash("cat notes2.txt")
	case turn == 2 && !s.cut[scenario]:
		s.cut[scenario] = true
		s.calls <- scenario
		switch scenario {
		case "crash":
			return fakeanthropic.Reply{Delay: 10 * time.Minute}, true // the daemon is killed meanwhile
		case "ask":
			return bash(`echo 'Blue or green?' > "$LOOPR_QUESTION_FILE"`)
		}
		return fakeanthropic.RateLimited(map[string]time.Duration{"limit": time.Second, "unknown": 8 * time.Second}[scenario]), true
	case turn == 2:
		return bash("printf 'token bucket\\n' > limiter.txt")
	}
	if scenario == "ask" && !strings.Contains(last, "token bucket") && s.seen["ask"] == "" {
		return fakeanthropic.Text("I asked which colour.", usagePerTurn), true
	}
	return fakeanthropic.Text(passingAnswer, usagePerTurn), true
}

func startSessionRig(t *testing.T, claude, resume string) *sessionRig {
	t.Helper()
	s := &sessionRig{cut: map[string]bool{}, seen: map[string]string{}, calls: make(chan string, 16)}
	cfg := "agent:\n  preset: claude\n  timeout_secs: 120\n  resume: " + resume + "\n"
	s.claudeRig = startClaudeRig(t, claude, "ANTHROPIC_API_KEY=test-key", s.script)
	// The notes files the model reads, committed for the worktrees.
	commitFiles(t, s.repo, map[string]string{
		"notes1.txt": notes + "notes1.txt\n", "notes2.txt": notes + "notes2.txt\n",
		"loopr.yml": strings.Replace(agentTreeConfig, "agent:\n  preset: claude\n  timeout_secs: 120\n", cfg, 1),
	})
	s.d.stop()
	s.d = startDaemon(t, s.repo) // with the configuration just written
	return s
}

// commitFiles writes files (name → content) in r's workspace and commits
// them, for the worktrees made from it.
func commitFiles(t *testing.T, r repo, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, "add", "-A")
	r.git(t, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "files")
}

// journalHas reports whether an event of loop id says every one of parts.
func journalHas(t *testing.T, st *store.Store, id string, parts ...string) bool {
	t.Helper()
	for _, ev := range journal(t, st) {
		if ev.Loop == id && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(ev.Message, p) }) {
			return true
		}
	}
	return false
}

func (s *sessionRig) add(t *testing.T, scenario string) loop.Loop {
	t.Helper()
	var l loop.Loop
	mustJSON(t, ok(t, s.repo.dir, "add", "--type", loop.Ralph, "--title", "limiter "+scenario,
		"--task", "Write limiter.txt (scenario:"+scenario+").", "--json"), &l)
	return l
}

// waitCut waits for the first run of the scenario to be cut.
func (s *sessionRig) waitCut(t *testing.T, scenario string) {
	t.Helper()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case got := <-s.calls:
			if got == scenario {
				return
			}
		case <-deadline:
			t.Fatalf("the %s scenario's run never reached its third call; daemon log:\n%s", scenario, tail(s.d.output(), 30))
		}
	}
}

func (s *sessionRig) waitStatus(t *testing.T, id string, want loop.Status) loop.Loop {
	t.Helper()
	var l loop.Loop
	waitEvery(t, 4*time.Minute, slowPoll, string(id)+" "+string(want), func() bool {
		if s.d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(s.d.output(), 40))
		}
		l = show(t, s.repo, id)
		return l.Status == want
	})
	return l
}

// countsAfter sums the fake's counts of the calls received after at.
func (s *sessionRig) countsAfter(t *testing.T, at time.Time) (input, uncached int64) {
	n := 0
	for _, c := range s.api.Counts() {
		if c.Received.After(at) {
			input += c.Input
			uncached += c.Uncached
			n++
		}
	}
	t.Logf("%d calls after the restart", n)
	return input, uncached
}

// crashAndResume runs the crash scenario: the daemon is killed with
// SIGKILL while the agent waits for its third call, and restarted. It
// returns the loop once complete, its session before the crash, and the
// fake's counts of the calls after the restart.
func crashAndResume(t *testing.T, s *sessionRig) (l loop.Loop, before *loop.Session, input, uncached int64) {
	t.Helper()
	l = s.add(t, "crash")
	s.waitCut(t, "crash")
	waitEvery(t, time.Minute, slowPoll, "the session on the record", func() bool {
		before = show(t, s.repo, string(l.ID)).Session
		return before != nil && before.ID != ""
	})
	s.d.crash(t)
	restart := time.Now()
	s.d = startDaemon(t, s.repo)
	l = s.waitStatus(t, string(l.ID), loop.Complete)
	input, uncached = s.countsAfter(t, restart)
	return l, before, input, uncached
}

// TestClaudeSessionCrash: after a daemon killed with SIGKILL mid-iteration
// is restarted, the relaunched claude resumes the same session
// (--resume <id>: its init event names it, and its first call carries the
// history and loopr's resume prompt). The same run with agent.resume off
// starts cold: the fake counts the input tokens of both (BENCHMARKS.md).
func TestClaudeSessionCrash(t *testing.T) {
	claude := claudePath(t)
	if inNetns(t) {
		return
	}
	logVersion(t, claude)

	s := startSessionRig(t, claude, "interrupted")
	l, before, resumedIn, resumedUncached := crashAndResume(t, s)
	if l.Iteration != 2 {
		t.Errorf("iteration %d after the crash, want 2 (the crash spends one)", l.Iteration)
	}
	if got := strings.TrimSpace(iterFile(s.repo, string(l.ID), 2, "session")); got != before.ID {
		t.Errorf("iteration 2's session file = %q, want the session of before the crash, %s", got, before.ID)
	}
	if log := iterFile(s.repo, string(l.ID), 2, "agent.log"); !strings.Contains(log, `"session_id":"`+before.ID+`"`) {
		t.Errorf("the relaunched claude did not continue session %s:\n%s", before.ID, tail(log, 5))
	}
	s.mu.Lock()
	seen := s.seen["crash"]
	s.mu.Unlock()
	if !strings.Contains(seen, "You were interrupted") {
		t.Errorf("no resumed call with the interrupted prompt reached the API (got %q)", seen)
	}
	if l.Session == nil || l.Session.ID != before.ID || l.Session.Ended != loop.SessionPassed {
		t.Errorf("record's session after the pass = %+v, want %s passed", l.Session, before.ID)
	}
	if out := ok(t, s.repo.dir, "show", string(l.ID)); !strings.Contains(out, before.ID+" (profile default, iteration 2, passed)") {
		t.Errorf("loopr show does not name the session:\n%s", out)
	}
	st := stopCleanly(t, s.repo, s.d)
	if !journalHas(t, st, l.ID, "resumed its session "+before.ID) {
		t.Error("the journal does not say the agent resumed its session")
	}

	cold := startSessionRig(t, claude, "off")
	lc, _, coldIn, coldUncached := crashAndResume(t, cold)
	first, second := strings.TrimSpace(iterFile(cold.repo, string(lc.ID), 1, "session")), strings.TrimSpace(iterFile(cold.repo, string(lc.ID), 2, "session"))
	if first == "" || second == "" || first == second {
		t.Errorf("agent.resume off: sessions of iterations 1 and 2 = %q, %q; want two different ones", first, second)
	}
	stopCleanly(t, cold.repo, cold.d)
	if coldUncached == 0 || coldIn == 0 {
		t.Fatalf("the cold start's calls counted %d input tokens, %d uncached", coldIn, coldUncached)
	}
	ratio := float64(resumedUncached) / float64(coldUncached)
	t.Logf("BENCH claude resume after kill -9: uncached input tokens resumed %d / cold %d = %.2f (all input: %d / %d = %.2f)",
		resumedUncached, coldUncached, ratio, resumedIn, coldIn, float64(resumedIn)/float64(coldIn))
	if ratio >= 1 {
		t.Errorf("a resumed run sent %d uncached input tokens, a cold start %d: resuming saves nothing", resumedUncached, coldUncached)
	}
}

// TestClaudeSessionResumes: a rate-limit wait, then a resume; a question,
// `loopr answer`, then a resume whose prompt carries the answer; and a
// session claude no longer has ("No conversation found"): a fresh start
// in the same attempt, the loop not failed, a journal note.
func TestClaudeSessionResumes(t *testing.T) {
	claude := claudePath(t)
	if inNetns(t) {
		return
	}
	logVersion(t, claude)
	s := startSessionRig(t, claude, "interrupted")
	limited, asked, unknown := s.add(t, "limit"), s.add(t, "ask"), s.add(t, "unknown")

	// A session claude does not have: its sessions are removed while the
	// loop waits out its limit.
	s.waitCut(t, "unknown")
	var sess *loop.Session
	waitEvery(t, time.Minute, slowPoll, "the unknown scenario to wait", func() bool {
		l := show(t, s.repo, string(unknown.ID))
		sess = l.Session
		return l.Status == loop.Pending && sess != nil && sess.Ended == loop.SessionRateLimited
	})
	files, _ := filepath.Glob(filepath.Join(os.Getenv("HOME"), ".claude", "projects", "*", sess.ID+".jsonl"))
	if len(files) == 0 {
		t.Fatalf("claude kept no file of session %s", sess.ID)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	q := s.waitStatus(t, string(asked.ID), loop.NeedsHuman)
	if q.Needs == nil || !strings.Contains(q.Needs.Detail, "Blue or green?") {
		t.Fatalf("asked loop needs %+v, want the question", q.Needs)
	}
	ok(t, s.repo.dir, "answer", string(asked.ID), "Green, with a stripe.")

	for _, l := range []loop.Loop{limited, asked, unknown} {
		l = s.waitStatus(t, string(l.ID), loop.Complete)
		if l.Iteration != 1 {
			t.Errorf("%s: completed at iteration %d, want 1", l.Title, l.Iteration)
		}
	}
	s.mu.Lock()
	limitSeen, askSeen, unknownSeen := s.seen["limit"], s.seen["ask"], s.seen["unknown"]
	s.mu.Unlock()
	if !strings.Contains(limitSeen, "rate limit was reached") {
		t.Errorf("the rate-limited loop's resumed call: %q, want the resume prompt after a limit", limitSeen)
	}
	if !strings.Contains(askSeen, "Green, with a stripe.") {
		t.Errorf("the answered loop's resumed call: %q, want the answer; its prompt:\n%s\nrecord: %+v", askSeen,
			iterFile(s.repo, string(asked.ID), 1, "prompt.md"), show(t, s.repo, string(asked.ID)).Session)
	}
	if unknownSeen != "" {
		t.Errorf("a resumed call of the unknown session reached the API: %q", unknownSeen)
	}
	if log := iterFile(s.repo, string(unknown.ID), 1, "attempt-2/agent.log"); !strings.Contains(log, "No conversation found with session ID") {
		t.Errorf("attempt-2/agent.log of the unknown session = %q, want claude's refusal", tail(log, 3))
	}
	st := stopCleanly(t, s.repo, s.d)
	if !journalHas(t, st, unknown.ID, "could not resume session", "No conversation found") {
		t.Error("the journal has no note of the session claude could not resume")
	}
}

var scenarioRe = regexp.MustCompile(`scenario:(\w+)`)

// TestCodexSessionCrash: after a daemon killed with SIGKILL mid-iteration
// is restarted, the relaunched codex continues the same thread (`codex
// exec … resume <id> -`): its thread.started event names it, and its
// first call carries the history and loopr's resume prompt.
func TestCodexSessionCrash(t *testing.T) {
	codex := agentCLI(t, "codex", "LOOPR_E2E_CODEX", "@openai/codex", "0.171.0")
	if inNetns(t) {
		return
	}
	logVersion(t, codex)
	var mu sync.Mutex
	cut := make(chan struct{})
	var resumedPrompt string
	api := &fakeresponses.Server{Script: func(r *fakeresponses.Request) fakeresponses.Reply {
		prompt := r.Prompt()
		if !strings.Contains(prompt, "scenario:crash") {
			return fakeresponses.Reply{Text: "ok", Usage: codexUsage}
		}
		mu.Lock()
		defer mu.Unlock()
		resumed := strings.Contains(prompt, resumeMarker)
		switch turn := r.Turn(); {
		case turn == 0:
			return fakeresponses.Reply{Command: "cat notes1.txt", Usage: codexUsage}
		case turn == 1 && !resumed:
			if cut != nil {
				close(cut)
				cut = nil
			}
			return fakeresponses.Reply{Delay: 10 * time.Minute} // the daemon is killed meanwhile
		case turn == 1:
			resumedPrompt = prompt
			return fakeresponses.Reply{Command: "printf 'token bucket\\n' > limiter.txt", Usage: codexUsage}
		}
		return fakeresponses.Reply{Text: passingAnswer, Usage: codexUsage}
	}}
	codexEnv(t, codex, serveAPI(t, api))
	r := newRepo(t, strings.Replace(agentTreeConfig, "preset: claude", "preset: codex", 1))
	commitFiles(t, r, map[string]string{"notes1.txt": notes})
	d := startDaemon(t, r)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "limiter", "--task", "Write limiter.txt (scenario:crash).", "--json"), &l)
	mu.Lock()
	wait := cut
	mu.Unlock()
	select {
	case <-wait:
	case <-time.After(3 * time.Minute):
		t.Fatalf("codex never reached its second call; daemon log:\n%s", tail(d.output(), 30))
	}
	var before *loop.Session
	waitEvery(t, time.Minute, slowPoll, "the thread on the record", func() bool {
		before = show(t, r, string(l.ID)).Session
		return before != nil && before.ID != ""
	})
	d.crash(t)
	d = startDaemon(t, r)
	waitEvery(t, 4*time.Minute, slowPoll, "the loop to complete", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		l = show(t, r, string(l.ID))
		return l.Status == loop.Complete || l.Status == loop.Failed
	})
	if l.Status != loop.Complete || l.Iteration != 2 {
		t.Fatalf("loop %s at iteration %d after the crash, want complete at 2", l.Status, l.Iteration)
	}
	if log := iterFile(r, string(l.ID), 2, "agent.log"); !strings.Contains(log, `"thread_id":"`+before.ID+`"`) {
		t.Errorf("the relaunched codex did not continue thread %s:\n%s", before.ID, tail(log, 5))
	}
	mu.Lock()
	p := resumedPrompt
	mu.Unlock()
	if !strings.Contains(p, "You were interrupted") || !strings.Contains(p, "scenario:crash") {
		t.Errorf("no resumed call with the history and the interrupted prompt reached the API: %q", p)
	}
	stopCleanly(t, r, d)
}

// TestCommandSessionAlways: a command profile opts in to sessions
// (session_pattern, resume_args) with agent.resume: always; an iteration
// that fails validation is followed by one that resumes the session, its
// prompt the newest failure, and passes.
func TestCommandSessionAlways(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	body := `d=` + dir + `
echo "$*" >> "$d/argv"
cat > "$d/prompt.$LOOPR_ITERATION"
if [ "$1" = --resume ]; then echo "session: $2"; touch fixed.txt; else echo "session: s-$$"; fi
echo "iteration $LOOPR_ITERATION" > work.txt
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(treeConfig(t, 3, "test -f fixed.txt"), "agent:\n  command: ", "agent:\n  preset: command\n  resume: always\n"+
		"  session_pattern: '^session: (\\S+)$'\n  resume_args: [--resume, '{session}']\n  command: ", 1)
	cfg = strings.Replace(cfg, `"`+abs(t, "testdata/agent.sh")+`"`, `"`+script+`"`, 1)
	r := newRepo(t, cfg)
	d := startDaemon(t, r)
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", loop.Ralph, "--title", "fix", "--task", "Write fixed.txt.", "--json"), &l)
	waitEvery(t, 2*time.Minute, slowPoll, "the loop to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited:\n%s", tail(d.output(), 40))
		}
		l = show(t, r, string(l.ID))
		return l.Status == loop.Complete || l.Status == loop.Failed
	})
	if l.Status != loop.Complete || l.Iteration != 2 {
		t.Fatalf("loop %s at iteration %d (%s), want complete at 2", l.Status, l.Iteration, l.Reason)
	}
	b, err := os.ReadFile(filepath.Join(dir, "argv"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.TrimSpace(iterFile(r, string(l.ID), 1, "session"))
	if args := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(args) != 2 || args[0] != "" || first == "" || args[1] != "--resume "+first {
		t.Errorf("argv of the runs = %q, want a fresh start then --resume %s", args, first)
	}
	p, err := os.ReadFile(filepath.Join(dir, "prompt.2"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(p), resumeMarker) || !strings.Contains(string(p), "test -f fixed.txt") || strings.Contains(string(p), "## Your task") {
		t.Errorf("iteration 2's prompt is not the resume prompt with the failure:\n%s", p)
	}
	stopCleanly(t, r, d)
}
