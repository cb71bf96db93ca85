package runner

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
)

// sessionAgent is a command-preset agent with sessions: it prints
// "session: <id>" first, the id given by --resume or a new one; a
// --resume of an id it does not know fails as claude does. It logs its
// argv and prompt next to itself.
func sessionAgent(t *testing.T) (argv []string, dir string) {
	t.Helper()
	argv = agent(t, `d=$(dirname "$0")
echo "$*" >> "$d/argv"
cat > "$d/prompt.$$"
cat "$d/prompt.$$" >> "$d/prompts"
if [ "$1" = --resume ]; then
  if [ ! -f "$d/known-$2" ]; then echo "No conversation found with session ID: $2" >&2; exit 1; fi
  echo "session: $2"
else
  id=s$$; touch "$d/known-$id"; echo "session: $id"
fi
echo done > done.txt`)
	return argv, filepath.Dir(argv[1])
}

func sessionJob(t *testing.T, argv []string) Job {
	j := newJob(t, loop.Ralph, argv)
	j.Settings.Preset = preset.Command
	j.Settings.ResumeArgs = []string{"--resume", "{session}"}
	j.Settings.SessionPattern = regexp.MustCompile(`^session: (\S+)$`)
	return j
}

func TestRunRecordsAndResumesSession(t *testing.T) {
	t.Parallel()
	argv, dir := sessionAgent(t)
	j := sessionJob(t, argv)
	var mu sync.Mutex
	var reported []string
	r := &Runner{OnSession: func(id, s string) { mu.Lock(); reported = append(reported, id+" "+s); mu.Unlock() }}

	res := r.Run(context.Background(), j)
	if res.Outcome != Passed || res.Session == "" || res.Resumed {
		t.Fatalf("fresh Run() = %v %q session %q resumed %v, want passed with a session", res.Outcome, res.Reason, res.Session, res.Resumed)
	}
	if got := readFile(t, filepath.Join(res.Dir, SessionFile)); got != res.Session+"\n" {
		t.Errorf("session file = %q, want %q", got, res.Session+"\n")
	}
	mu.Lock()
	if len(reported) != 1 || reported[0] != j.Loop.ID+" "+res.Session {
		t.Errorf("OnSession calls = %q, want one with %s", reported, res.Session)
	}
	mu.Unlock()

	// The answer to a question, then a resume of the same session.
	first := res.Session
	j.Loop.Answer = "Use the blue one."
	j.Resume = &Resume{Session: first, Why: loop.SessionAsked}
	res = r.Run(context.Background(), j)
	if res.Outcome != Passed || res.Session != first || !res.Resumed || res.SessionNote != "" {
		t.Fatalf("resumed Run() = %v %q session %q resumed %v note %q, want passed, resumed %s", res.Outcome, res.Reason, res.Session, res.Resumed, res.SessionNote, first)
	}
	args := strings.Split(strings.TrimSuffix(readFile(t, filepath.Join(dir, "argv")), "\n"), "\n")
	if len(args) != 2 || args[1] != "--resume "+first {
		t.Errorf("argv of the runs = %q, want the second with --resume %s", args, first)
	}
	prompt := readFile(t, filepath.Join(res.Dir, "prompt.md"))
	if !strings.Contains(prompt, "Use the blue one.") || !strings.Contains(prompt, "A person answered it") || strings.Contains(prompt, "## Your task") {
		t.Errorf("resume prompt lacks the answer, or repeats the task:\n%s", prompt)
	}
	if !exists(filepath.Join(res.Dir, "attempt-1", "agent.log")) {
		t.Error("the first attempt's agent.log was not kept in attempt-1/")
	}
}

func TestRunStartsFreshWhenSessionUnknown(t *testing.T) {
	t.Parallel()
	argv, dir := sessionAgent(t)
	j := sessionJob(t, argv)
	j.Resume = &Resume{Session: "gone-1", Why: loop.SessionInterrupted}
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Passed || res.Resumed || res.Session == "" || res.Session == "gone-1" {
		t.Fatalf("Run() = %v %q session %q resumed %v, want passed on a fresh session", res.Outcome, res.Reason, res.Session, res.Resumed)
	}
	if !strings.Contains(res.SessionNote, "could not resume session gone-1") || !strings.Contains(res.SessionNote, "No conversation found") {
		t.Errorf("SessionNote = %q, want the CLI's reason", res.SessionNote)
	}
	args := strings.Split(strings.TrimSuffix(readFile(t, filepath.Join(dir, "argv")), "\n"), "\n")
	if len(args) != 2 || args[0] != "--resume gone-1" || args[1] != "" {
		t.Errorf("argv of the runs = %q, want a resume then a fresh start", args)
	}
	// The fresh start had the whole prompt; the failed resume's log is kept.
	if p := readFile(t, filepath.Join(res.Dir, "prompt.md")); !strings.Contains(p, "## Your task") {
		t.Errorf("fresh prompt lacks the task:\n%s", p)
	}
	if l := readFile(t, filepath.Join(res.Dir, "attempt-1", "agent.log")); !strings.Contains(l, "No conversation found") {
		t.Errorf("attempt-1/agent.log = %q, want the failed resume's output", l)
	}
}

func TestResumePromptFeedbackAndOverride(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Plan, []string{"true"})
	j.Loop.Feedback = "Iteration 1 failed: lint\nbad name\n\n--- earlier ---\nold failure"
	p, err := ResumePromptFor(j, Resume{Session: "s", Why: loop.SessionFailed})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, "bad name") || strings.Contains(p, "old failure") || !strings.Contains(p, ArtifactPath(j.Home, j.Loop)) {
		t.Errorf("resume prompt after a failure: want the newest feedback only and the artifact path:\n%s", p)
	}
	if p, _ := ResumePromptFor(j, Resume{Session: "s", Why: loop.SessionRateLimited}); strings.Contains(p, "bad name") || !strings.Contains(p, "rate limit") {
		t.Errorf("resume prompt after a rate limit: want no feedback, the limit said:\n%s", p)
	}
	own := filepath.Join(t.TempDir(), "resume.md")
	if err := os.WriteFile(own, []byte("again {{.Why}} {{.Session}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.Settings.ResumePromptFile = own
	if p, err := ResumePromptFor(j, Resume{Session: "s1"}); err != nil || p != "again interrupted s1" {
		t.Errorf("ResumePromptFor(own template) = %q, %v", p, err)
	}
}
