package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/internal/fakegithub"
	"github.com/loopr-dev/loopr/loop"
)

// `loopr pr` with the real gh CLI (Debian's gh package; .ci/run installs
// it) against internal/fakegithub: gh's Enterprise mode (GH_HOST, here set
// by loopr from the remote URL's host, 127.0.0.1:PORT) over TLS with a
// certificate the test made and trusts through SSL_CERT_FILE. The git push
// goes to a local bare repository the remote URL is rewritten to
// (url.<path>.insteadOf). The test runs in a network namespace of its own
// (unshare -n) where it can, so nothing but 127.0.0.1 is reachable.

// ghPath finds gh; without one it skips, but fails under CI.
func ghPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("gh")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("gh not found on PATH: .ci/run installs it (apt-get install gh); CI must run this test")
		}
		t.Skip("gh not found on PATH (apt install gh to run this test)")
	}
	return p
}

// TestPullRequestWithRealGH: loopr pr pushes the plan branch and opens a
// pull request whose body holds the tree's table and total cost; run
// again it updates the same pull request (a PATCH, no second POST); a
// missing gh and a gh not logged in each get one line saying what to do.
func TestPullRequestWithRealGH(t *testing.T) {
	ghPath(t)
	if inNetns(t) {
		return
	}
	gh := fakegithub.Start(t)
	r, plan, _ := landRepo(t, "", false)
	bare := filepath.Join(t.TempDir(), "shop.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v\n%s", err, out)
	}
	url := "https://" + gh.Host + "/acme/shop.git"
	r.git(t, "remote", "add", "origin", url)
	r.git(t, "config", "url."+bare+".insteadOf", url)
	env := []string{"GH_ENTERPRISE_TOKEN=" + gh.Token, "SSL_CERT_FILE=" + gh.CAFile, "GH_CONFIG_DIR=" + t.TempDir(),
		"GH_TOKEN=", "GITHUB_TOKEN=", "GH_ENTERPRISE_TOKEN_FILE=", "GITHUB_ENTERPRISE_TOKEN="}

	res := runEnv(t, r.dir, "", env, "pr", loop.ShortID(plan.ID))
	if res.code != 0 || !strings.Contains(res.stdout, "opened pull request #1: https://"+gh.Host+"/acme/shop/pull/1") {
		t.Fatalf("loopr pr: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	tip := r.git(t, "rev-parse", plan.Branch)
	if out, err := exec.Command("git", "-C", bare, "rev-parse", plan.Branch).Output(); err != nil || strings.TrimSpace(string(out)) != tip {
		t.Errorf("the bare remote's %s = %q (%v), want the plan tip %s", plan.Branch, out, err, tip)
	}
	pulls := gh.Pulls("acme/shop")
	if len(pulls) != 1 {
		t.Fatalf("pull requests: %+v, want one", pulls)
	}
	pr := pulls[0]
	if pr.Title != plan.Title || pr.Base != "main" || pr.Head != "acme:"+plan.Branch {
		t.Errorf("pull request %q %s ← %s; want %q main ← acme:%s", pr.Title, pr.Base, pr.Head, plan.Title, plan.Branch)
	}
	for _, l := range list(t, r) {
		row := "| " + loop.ShortID(l.ID) + " | " + l.Type + " | "
		if !strings.Contains(pr.Body, row) {
			t.Errorf("the body has no row for %s %s:\n%s", l.Type, l.ID, pr.Body)
		}
	}
	if !strings.Contains(pr.Body, "| id | type | title | status | iterations | evidence (exit codes) | cost |") || !strings.Contains(pr.Body, "**Total cost:** $") {
		t.Errorf("the body lacks the table header or the total cost:\n%s", pr.Body)
	}

	res = runEnv(t, r.dir, "", env, "pr", plan.ID)
	if res.code != 0 || !strings.Contains(res.stdout, "updated pull request #1") {
		t.Fatalf("second loopr pr: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	posts, patches := 0, 0
	for _, q := range gh.Requests() {
		switch {
		case q.Method == "POST" && q.Path == "/api/v3/repos/acme/shop/pulls":
			posts++
		case q.Method == "PATCH" && q.Path == "/api/v3/repos/acme/shop/pulls/1":
			patches++
		}
	}
	if posts != 1 || patches != 1 || len(gh.Pulls("acme/shop")) != 1 {
		t.Errorf("after two runs: %d POSTs, %d PATCHes, %d pull requests; want 1, 1, 1", posts, patches, len(gh.Pulls("acme/shop")))
	}

	// No gh on PATH: only git.
	bin := t.TempDir()
	gitBin, _ := exec.LookPath("git")
	if err := os.Symlink(gitBin, filepath.Join(bin, "git")); err != nil {
		t.Fatal(err)
	}
	res = runEnv(t, r.dir, "", append(env, "PATH="+bin), "pr", plan.ID)
	oneLine := func(res result, want string) {
		t.Helper()
		if res.code == 0 || strings.Count(res.stderr, "\n") != 1 || !strings.Contains(res.stderr, want) {
			t.Errorf("loopr pr: exit %d, stderr %q; want a failure and one line saying %q", res.code, res.stderr, want)
		}
	}
	oneLine(res, "gh, GitHub's CLI, is not installed")
	res = runEnv(t, r.dir, "", append(env, "GH_ENTERPRISE_TOKEN=wrong"), "pr", plan.ID)
	oneLine(res, "gh is not logged in to "+gh.Host+": run gh auth login --hostname "+gh.Host)
}
