package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// trustConfig is a loopr.yml whose ralph loops never pass: the agent is
// `true`, and validate appends a line to marker and fails, so every
// iteration of the loop runs validate (and leaves a line) again.
func trustConfig(marker string) string {
	return `scheduler: {poll_interval_secs: 1}
retry: {backoff_base_secs: 1, backoff_factor: 1, backoff_max_secs: 1, no_progress_limit: 0}
agent:
  command: ["true"]
  timeout_secs: 60
loops:
  ralph: {max_iterations: 100000, validate: ["echo ran >> '` + marker + `'; exit 1"]}
git: {worktrees: false}
storage: {disk_quota_min_gb: 0}
`
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func lines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// TestTrust: a workspace's loopr.yml runs nothing of its commands until
// `loopr trust` (the first e2e proof), and a change of validate
// while the daemon runs is held — the old command keeps running, NEEDS
// YOU names the new one — until `loopr trust` again (the second).
func TestTrust(t *testing.T) {
	t.Parallel()
	markers := t.TempDir()
	oldMarker, newMarker := filepath.Join(markers, "old"), filepath.Join(markers, "new")
	dir := t.TempDir()
	r := repo{dir: dir, home: filepath.Join(dir, ".loopr"), logs: t.TempDir()}
	cfgPath := filepath.Join(dir, "loopr.yml")
	if err := os.WriteFile(cfgPath, []byte(trustConfig(oldMarker)), 0o644); err != nil {
		t.Fatal(err)
	}
	// This test's own trust file, and no LOOPR_TRUST_ALL (TestMain sets it).
	env := []string{"LOOPR_TRUST_ALL=", "XDG_CONFIG_HOME=" + t.TempDir()}
	cli := func(stdin string, args ...string) result { t.Helper(); return runEnv(t, dir, stdin, env, args...) }
	must := func(args ...string) string {
		t.Helper()
		res := cli("", args...)
		if res.code != 0 {
			t.Fatalf("loopr %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		return res.stdout
	}

	// config check names the commands and fails before the daemon runs.
	if res := cli("", "config", "check"); res.code == 0 || !strings.Contains(res.stdout, "loops.ralph.validate") ||
		!strings.Contains(res.stderr, "loopr trust") {
		t.Errorf("config check of an untrusted loopr.yml: exit %d\nstdout: %s\nstderr: %s; want non-zero, naming the validate command and loopr trust", res.code, res.stdout, res.stderr)
	}
	d := startDaemonEnv(t, r, env...)
	var l loop.Loop
	added := cli("", "add", "--type", loop.Ralph, "--title", "never passes", "--task", "nothing", "--json")
	mustJSON(t, added.stdout, &l)
	if !strings.Contains(added.stderr, "not trusted") || !strings.Contains(added.stderr, "loopr trust") {
		t.Errorf("add with an untrusted loopr.yml: stderr %q, want a warning naming loopr trust", added.stderr)
	}

	waitFor(t, 30*time.Second, "why to show the untrusted gate", func() bool {
		return strings.Contains(cli("", "why", l.ID).stdout, "untrusted")
	})
	// A few polls of the scheduler later, still nothing ran.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		if exists(oldMarker) {
			t.Fatalf("validate ran while loopr.yml was untrusted; log:\n%s", tail(d.output(), 20))
		}
		time.Sleep(poll)
	}
	if got := show(t, r, l.ID); got.Status != loop.Pending || exists(filepath.Join(r.home, "loops", l.ID, "iterations")) {
		t.Errorf("loop %s with iterations on disk while untrusted; want pending, no agent started", got.Status)
	}
	st := must("status")
	if !strings.Contains(st, "NEEDS YOU") || !strings.Contains(st, "untrusted") || !strings.Contains(st, "→ loopr trust") {
		t.Errorf("status while untrusted lacks the NEEDS YOU row with `loopr trust`:\n%s", st)
	}
	// Without a terminal, trust needs --yes.
	if res := cli("y\n", "trust"); res.code != 2 || !strings.Contains(res.stderr, "--yes") {
		t.Errorf("trust without a terminal or --yes: exit %d, stderr %q; want 2 naming --yes", res.code, res.stderr)
	}
	if exists(oldMarker) {
		t.Fatal("validate ran after a refused `loopr trust`")
	}

	out := must("trust", "--yes")
	if !strings.Contains(out, "loops.ralph.validate") || !strings.Contains(out, "trusted") {
		t.Errorf("trust --yes output lacks the command or the verdict:\n%s", out)
	}
	waitFor(t, 60*time.Second, "validate to run once trusted", func() bool { return lines(oldMarker) >= 2 })

	// While it runs, trusted: validate changes to another command.
	if err := os.WriteFile(cfgPath, []byte(trustConfig(newMarker)), 0o644); err != nil {
		t.Fatal(err)
	}
	var held api.Status
	waitFor(t, 30*time.Second, "the reload to be held", func() bool {
		mustJSON(t, must("status", "--json"), &held)
		return held.Trust != nil && held.Trust.Held
	})
	if !strings.Contains(strings.Join(held.Trust.Commands, "\n"), newMarker) {
		t.Errorf("held trust names %q, want the new validate command", held.Trust.Commands)
	}
	st = must("status")
	if !strings.Contains(st, "NEEDS YOU") || !strings.Contains(st, "loops.ralph.validate") || !strings.Contains(st, "→ loopr trust") {
		t.Errorf("status with a held reload lacks NEEDS YOU naming the changed validate and `loopr trust`:\n%s", st)
	}
	// The old command keeps running: its marker grows by two more
	// iterations, and the new one never appears.
	n := lines(oldMarker)
	waitFor(t, 60*time.Second, "two more iterations with the old validate", func() bool { return lines(oldMarker) >= n+2 })
	if exists(newMarker) {
		t.Fatalf("the new, untrusted validate ran before `loopr trust`")
	}
	if !strings.Contains(d.output(), "config reload held") {
		t.Errorf("the daemon's log does not say the reload was held:\n%s", tail(d.output(), 20))
	}
	if ev := must("events", "--json"); !strings.Contains(ev, "config reload held") || !strings.Contains(ev, newMarker) {
		t.Errorf("the journal does not say the reload was held, naming the new validate:\n%s", tail(ev, 10))
	}

	must("trust", "--yes")
	waitFor(t, 60*time.Second, "the new validate to run once trusted", func() bool { return exists(newMarker) })
	var after api.Status
	mustJSON(t, must("status", "--json"), &after)
	if after.Trust != nil {
		t.Errorf("status after trust still says %+v", after.Trust)
	}
	if d.exited() {
		t.Fatalf("the daemon exited; log:\n%s", tail(d.output(), 20))
	}
}

// TestTrustBuiltinReloadHeld: a reload that takes loopr.yml back to loopr's
// built-in commands (a checkout or a landed commit dropping the sandbox,
// env or hooks) is a change of the trusted commands too: it is held, the
// sandbox stays in force, until `loopr trust` records it.
func TestTrustBuiltinReloadHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := repo{dir: dir, home: filepath.Join(dir, ".loopr"), logs: t.TempDir()}
	cfgPath := filepath.Join(dir, "loopr.yml")
	const rest = "git: {worktrees: false}\nstorage: {disk_quota_min_gb: 0}\n"
	if err := os.WriteFile(cfgPath, []byte("agent: {env: {LOOPR_E2E_MARK: kept}, sandbox: {runner: bwrap, network: none}}\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"LOOPR_TRUST_ALL=", "XDG_CONFIG_HOME=" + t.TempDir()}
	must := func(args ...string) string {
		t.Helper()
		res := runEnv(t, dir, "", env, args...)
		if res.code != 0 {
			t.Fatalf("loopr %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
		}
		return res.stdout
	}
	must("trust", "--yes")
	d := startDaemonEnv(t, r, env...)
	if err := os.WriteFile(cfgPath, []byte("concurrency: {max_loops: 3}\n"+rest), 0o644); err != nil {
		t.Fatal(err)
	}
	var st api.Status
	waitFor(t, 30*time.Second, "the reload to the built-in commands to be held", func() bool {
		mustJSON(t, must("status", "--json"), &st)
		return st.Trust != nil && st.Trust.Held
	})
	if got := strings.Join(st.Trust.Commands, "\n"); !strings.Contains(got, "agent.sandbox") || !strings.Contains(got, "removed") {
		t.Errorf("held trust names %q, want the removed sandbox", got)
	}
	if out := must("status"); !strings.Contains(out, "bwrap, network none") {
		t.Errorf("the sandbox is not in force while the reload is held:\n%s", out)
	}
	must("trust", "--yes")
	waitFor(t, 30*time.Second, "the file to apply once trusted", func() bool {
		st = api.Status{}
		mustJSON(t, must("status", "--json"), &st)
		return st.Trust == nil && st.MaxLoops == 3
	})
	if d.exited() {
		t.Fatalf("the daemon exited; log:\n%s", tail(d.output(), 20))
	}
}
