package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

func TestRunStall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		body    string
		stalled bool
		layout  string // "": home and workdir apart; worktree: workdir under home; workspace: home under workdir
	}{
		{"silent agent is killed", "sleep 30", true, ""},
		{"talking agent is not", "for i in $(seq 20); do echo tick $i; sleep 0.1; done", false, ""},
		{"agent changing files is not", `for i in $(seq 20); do echo $i > "$LOOPR_WORKDIR/f$i"; sleep 0.1; done`, false, ""},
		{"agent changing a new subdirectory is not",
			`mkdir "$LOOPR_WORKDIR/sub"; for i in $(seq 20); do echo $i > "$LOOPR_WORKDIR/sub/f"; sleep 0.1; done`, false, ""},
		{"agent changing files in a worktree under the home is not",
			`for i in $(seq 20); do echo $i > "$LOOPR_WORKDIR/f$i"; sleep 0.1; done`, false, "worktree"},
		{"silent agent in a worktree under the home is killed", "sleep 30", true, "worktree"},
		{"loopr's own files in the workspace do not count",
			`for i in $(seq 20); do echo $i > "$LOOPR_HOME/f$i"; sleep 0.1; done`, true, "workspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, loop.Ralph, agent(t, tc.body))
			j.Settings.StallTimeout = time.Second // the agents that stay alive take 2 s
			switch tc.layout {
			case "worktree": // <home>/worktrees/<id>, as with git worktrees
				j.Workdir = filepath.Join(j.Home, "worktrees", j.Loop.ID)
			case "workspace": // <workspace>/.loopr, without git worktrees
				j.Home = filepath.Join(j.Workdir, ".loopr")
			}
			for _, d := range []string{j.Home, j.Workdir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			res := (&Runner{}).Run(context.Background(), j)
			took := time.Since(start)
			if res.Stalled != tc.stalled {
				t.Fatalf("Run() stalled = %v (%s: %s); want %v", res.Stalled, res.Outcome, res.Reason, tc.stalled)
			}
			if !tc.stalled {
				if res.Outcome != Passed {
					t.Errorf("Run() = %s %q; want passed", res.Outcome, res.Reason)
				}
				return
			}
			if res.Outcome != Failed || res.Reason != "stalled: no output or file change for 1s" {
				t.Errorf("Run() = %s %q; want failed, stalled: no output or file change for 1s", res.Outcome, res.Reason)
			}
			if took > 10*time.Second {
				t.Errorf("a stalled agent took %s to stop; want about 1 s plus the grace", took)
			}
		})
	}
}

func TestShortDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		10 * time.Minute: "10m", 90 * time.Second: "1m30s", 2 * time.Hour: "2h", time.Second: "1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q; want %q", d, got, want)
		}
	}
}

func TestRunQuestion(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, `printf 'Which port?\n\033]0;evil\007 8080 or 9090?\n' > "$LOOPR_QUESTION_FILE"; exit 3`))
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || res.Stalled {
		t.Fatalf("Run() = %s %q; want failed with a question", res.Outcome, res.Reason)
	}
	if !strings.HasPrefix(res.Question, "Which port?") || strings.ContainsRune(res.Question, '\033') || strings.ContainsRune(res.Question, '\007') {
		t.Errorf("Question = %q; want the text with the terminal escapes made harmless", res.Question)
	}

	// Too large a question fails the iteration with a one-line reason.
	j = newJob(t, loop.Ralph, agent(t, `head -c 20000 /dev/zero | tr '\0' x > "$LOOPR_QUESTION_FILE"`))
	res = (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || res.Question != "" || !strings.Contains(res.Reason, "question is 20000 bytes") {
		t.Errorf("oversize question: Run() = %s %q question %d bytes; want failed naming the size", res.Outcome, res.Reason, len(res.Question))
	}
}

func TestPromptAnswer(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{loop.Plan, loop.Spec, loop.Phase, loop.Ralph, "review"} {
		j := newJob(t, typ, []string{"true"})
		j.Loop.Answer = "Use port 8080."
		p, err := PromptFor(j)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, "## Answer from the user") || !strings.Contains(p, "Use port 8080.") || !strings.Contains(p, QuestionFile) {
			t.Errorf("%s prompt lacks the answer section or the question file:\n%s", typ, p)
		}
		j.Loop.Answer = ""
		if p, _ := PromptFor(j); strings.Contains(p, "Answer from the user") {
			t.Errorf("%s prompt without an answer has the answer section", typ)
		}
	}
}
