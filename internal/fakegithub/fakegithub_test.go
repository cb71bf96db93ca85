package fakegithub

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ghEnv is the environment that points the real gh at s.
func ghEnv(t *testing.T, s *Server, token string) []string {
	return append(os.Environ(), "GH_HOST="+s.Host, "GH_ENTERPRISE_TOKEN="+token, "SSL_CERT_FILE="+s.CAFile,
		"GH_CONFIG_DIR="+t.TempDir(), "GH_NO_UPDATE_NOTIFIER=1", "GH_PROMPT_DISABLED=1", "NO_COLOR=1", "GH_TOKEN=", "GITHUB_TOKEN=")
}

// TestRealGH: the real gh reaches the fake over TLS: auth status passes
// with the token and fails without it; gh api creates, lists and updates
// a pull request.
func TestRealGH(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("gh"); err != nil {
		t.Skip("gh not installed")
	}
	s := Start(t)
	gh := func(token, stdin string, args ...string) (string, error) {
		cmd := exec.Command("gh", args...)
		cmd.Env = ghEnv(t, s, token)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := gh(s.Token, "", "auth", "status"); err != nil {
		t.Fatalf("gh auth status: %v\n%s", err, out)
	}
	if out, err := gh("wrong", "", "auth", "status"); err == nil {
		t.Errorf("gh auth status with a wrong token passed:\n%s", out)
	}
	out, err := gh(s.Token, `{"title":"t","head":"o:b","base":"main","body":"x"}`, "api", "-X", "POST", "repos/o/r/pulls", "--input", "-")
	if err != nil || !strings.Contains(out, `"number":1`) {
		t.Fatalf("gh api POST: %v\n%s", err, out)
	}
	out, err = gh(s.Token, "", "api", "repos/o/r/pulls?head=o:b&state=open")
	if err != nil || !strings.Contains(out, `"number":1`) {
		t.Fatalf("gh api GET: %v\n%s", err, out)
	}
	if _, err = gh(s.Token, `{"body":"y"}`, "api", "-X", "PATCH", "repos/o/r/pulls/1", "--input", "-"); err != nil {
		t.Fatal(err)
	}
	if p := s.Pulls("o/r"); len(p) != 1 || p[0].Body != "y" {
		t.Errorf("pulls = %+v, want one with body y", p)
	}
}
