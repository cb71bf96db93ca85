package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/redact"
)

// plantedToken is a token shape every Redactor knows; plantedValue a
// secret the test adds by name, as the daemon does before an agent starts.
var (
	plantedToken = "ghp_" + strings.Repeat("T", 36)
	plantedValue = "planted-" + strings.Repeat("v", 24)
)

// scanDir fails t for every file under dir that holds one of leaks.
func scanDir(t *testing.T, dir string, leaks ...string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, l := range leaks {
			if strings.Contains(string(b), l) {
				t.Errorf("%s holds %q", path, l)
			}
		}
		return nil
	})
}

// Secrets the agent prints, in its output (a long line, two writes apart),
// its question and a failing validate command's output, reach neither the
// files of the iteration nor the Result.
func TestRunRedacts(t *testing.T) {
	t.Parallel()
	rd := redact.New()
	rd.Add("PLANTED", plantedValue)
	run := func(t *testing.T, body string, validate ...string) (Result, Job) {
		j := newJob(t, "ralph", agent(t, body))
		j.Settings.Validate = validate
		j.Settings.Env = []string{"TOKEN_ENV=" + plantedToken, "PLANTED_ENV=" + plantedValue}
		res := (&Runner{Redact: rd}).Run(context.Background(), j)
		scanDir(t, j.Home, plantedToken, plantedValue)
		scanDir(t, j.Workdir, plantedValue)
		return res, j
	}
	t.Run("agent.log and feedback", func(t *testing.T) {
		t.Parallel()
		half := len(plantedValue) / 2
		res, _ := run(t, `
head -c 100000 /dev/zero | tr '\0' x; printf ' %s ' `+plantedToken+`; head -c 100000 /dev/zero | tr '\0' y; echo
printf 'split %s' `+plantedValue[:half]+`; sleep 0.3; printf '%s end\n' `+plantedValue[half:]+`
printf 'no newline at the end %s' `+plantedValue+`
exit 3`)
		if res.Outcome != Failed || !strings.Contains(res.Feedback, "[redacted PLANTED]") {
			t.Fatalf("Outcome %s, Feedback %q: want a failure whose feedback shows the mark", res.Outcome, res.Feedback)
		}
		log := readFile(t, filepath.Join(res.Dir, "agent.log"))
		for _, want := range []string{" [redacted github_token] ", "split [redacted PLANTED] end", "at the end [redacted PLANTED]"} {
			if !strings.Contains(log, want) {
				t.Errorf("agent.log lacks %q", want)
			}
		}
	})
	t.Run("question", func(t *testing.T) {
		t.Parallel()
		res, _ := run(t, `echo "may I push with `+plantedToken+` or `+plantedValue+`?" > "$LOOPR_QUESTION_FILE"`)
		if want := "may I push with [redacted github_token] or [redacted PLANTED]?"; res.Question != want {
			t.Fatalf("Question = %q, want %q", res.Question, want)
		}
	})
	t.Run("validate output", func(t *testing.T) {
		t.Parallel()
		res, _ := run(t, `echo ok`, `echo "test env: $PLANTED_ENV $TOKEN_ENV"; exit 1`)
		if res.Outcome != Failed || !strings.Contains(res.Feedback, "test env: [redacted PLANTED] [redacted github_token]") {
			t.Fatalf("Outcome %s, Feedback %q: want the validate output redacted", res.Outcome, res.Feedback)
		}
	})
}
