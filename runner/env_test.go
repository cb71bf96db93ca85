package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/procenv"
	"github.com/loopr-dev/loopr/redact"
)

// TestRunAgentEnvIsAllowlisted: the agent sees the base set, the
// profile's env: and its secret (read from a file, its value registered
// with the Redactor), and none of the daemon's other variables; its
// validate commands see env: but not the secret.
func TestRunAgentEnvIsAllowlisted(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_plantedplantedplantedplanted1234")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "planted-aws-value")
	secretFile := filepath.Join(t.TempDir(), "gh")
	if err := os.WriteFile(secretFile, []byte("gh-secret-4e1d\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j := newJob(t, loop.Ralph, agent(t, `env > "$LOOPR_WORKDIR/agent-env.txt"`))
	j.Settings.Validate = []string{`env > validate-env.txt`}
	j.Settings.Profile = procenv.Profile{
		Env:     []string{"PROJECT_MODE=e2e-mode"},
		Secrets: []procenv.Secret{{Name: "GH_TOKEN", File: secretFile}},
	}
	r := &Runner{Redact: redact.New()}
	if res := r.Run(context.Background(), j); res.Outcome != Passed {
		t.Fatalf("Run() = %v %q", res.Outcome, res.Reason)
	}
	agentEnv := readFile(t, filepath.Join(j.Workdir, "agent-env.txt"))
	validateEnv := readFile(t, filepath.Join(j.Workdir, "validate-env.txt"))
	for name, env := range map[string]string{"agent": agentEnv, "validate": validateEnv} {
		for _, planted := range []string{"GITHUB_TOKEN", "ghp_planted", "AWS_SECRET_ACCESS_KEY", "planted-aws-value"} {
			if strings.Contains(env, planted) {
				t.Errorf("the %s's environment holds %s:\n%s", name, planted, env)
			}
		}
		for _, want := range []string{"\nPATH=", "\nPROJECT_MODE=e2e-mode\n", "\nLOOPR_LOOP_ID=01TESTLOOP\n"} {
			if !strings.Contains("\n"+env, want) {
				t.Errorf("the %s's environment lacks %q:\n%s", name, strings.TrimSpace(want), env)
			}
		}
	}
	if !strings.Contains(agentEnv, "\nGH_TOKEN=gh-secret-4e1d\n") {
		t.Errorf("the agent did not get its secret:\n%s", agentEnv)
	}
	if strings.Contains(validateEnv, "gh-secret-4e1d") {
		t.Errorf("validate got the agent's secret:\n%s", validateEnv)
	}
	if got := r.Redact.String("x gh-secret-4e1d y"); got != "x "+redact.Mark("GH_TOKEN")+" y" {
		t.Errorf("the Redactor does not know the secret: %q", got)
	}
}

// TestRunUnreadableSecretIsASetupFailure: a secret file that is a FIFO
// fails the iteration before the agent starts, as a setup failure (no
// iteration spent), naming the secret; the run does not block on it.
func TestRunUnreadableSecretIsASetupFailure(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	j := newJob(t, loop.Ralph, agent(t, `touch "$LOOPR_WORKDIR/ran"`))
	j.Settings.Profile = procenv.Profile{Key: "agents.gh", Secrets: []procenv.Secret{{Name: "GH_TOKEN", File: fifo}}}
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !res.Setup || !strings.HasPrefix(res.Reason, "agents.gh.secrets.GH_TOKEN: "+fifo+" is a named pipe (FIFO)") {
		t.Errorf("Run() = %v setup=%v %q; want a setup failure naming agents.gh.secrets.GH_TOKEN", res.Outcome, res.Setup, res.Reason)
	}
	if exists(filepath.Join(j.Workdir, "ran")) {
		t.Error("the agent ran without its secret")
	}
}
