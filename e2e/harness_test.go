package e2e

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// poll is how often the tests look at the daemon's state.
const poll = 100 * time.Millisecond

// repo is a temporary git repository with a committed loopr.yml: the
// workspace a user runs loopr in. Daemon logs go next to it, not into it.
type repo struct {
	dir  string // the workspace
	home string // <dir>/.loopr
	logs string // daemon output, outside the workspace
}

// newRepo makes a git repository with one commit holding loopr.yml (cfg)
// and a README.
func newRepo(t *testing.T, cfg string) repo {
	t.Helper()
	r := repo{dir: t.TempDir(), logs: t.TempDir()}
	r.home = filepath.Join(r.dir, ".loopr")
	for name, body := range map[string]string{"loopr.yml": cfg, "README.md": "# e2e\n"} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, "init", "-q", "-b", "main")
	r.git(t, "add", "-A")
	r.git(t, "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "-c", "commit.gpgsign=false",
		"commit", "-q", "--no-verify", "-m", "initial commit")
	return r
}

// git runs git in the workspace and returns its trimmed stdout.
func (r repo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// checkout is the state of the user's checkout that loopr must not touch.
type checkout struct{ head, branch, status string }

func (r repo) checkout(t *testing.T) checkout {
	t.Helper()
	return checkout{r.git(t, "rev-parse", "HEAD"), r.git(t, "symbolic-ref", "--short", "HEAD"), r.git(t, "status", "--porcelain")}
}

// fastRetries is the start of a loopr.yml whose waits are short: a 1 s
// poll, 1–2 s rate-limit backoffs, 1 s retry backoffs.
const fastRetries = `scheduler:
  poll_interval_secs: 1
rate_limit:
  initial_backoff_secs: 1
  max_backoff_secs: 2
  recovery_period_secs: 0
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
`

// treeConfig is a loopr.yml for a whole plan tree run by testdata/agent.sh
// with the given arguments: no approval stop, ralph loops validated by
// the command validate, worktrees, short backoffs.
func treeConfig(t *testing.T, maxIterations int, validate string, agentArgs ...string) string {
	t.Helper()
	argv := []string{"sh", abs(t, "testdata/agent.sh")}
	argv = append(argv, agentArgs...)
	cmd, _ := json.Marshal(argv) // a JSON array is a YAML flow sequence
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 20
  max_api_calls: 8
rate_limit:
  initial_backoff_secs: 1
  max_backoff_secs: 4
  recovery_period_secs: 0
retry:
  backoff_base_secs: 1
  backoff_factor: 1
  backoff_max_secs: 1
agent:
  command: %s
  timeout_secs: 10
loops:
  plan: {require_approval: false, max_iterations: %[2]d}
  spec: {max_iterations: %[2]d}
  phase: {max_iterations: %[2]d}
  ralph: {max_iterations: %[2]d, validate: [%[3]q]}
git:
  worktrees: true
storage:
  disk_quota_min_gb: 0
`, cmd, maxIterations, validate)
}

// validateCmd is the ralph validate command running testdata/validate.sh
// with args.
func validateCmd(t *testing.T, args ...string) string {
	t.Helper()
	return strings.Join(append([]string{"sh", abs(t, "testdata/validate.sh")}, args...), " ")
}

// daemonProc is a `loopr daemon` process started by a test.
type daemonProc struct {
	n    int // 1 for the first daemon of a test, 2 for the next, …
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited and was reaped
}

// startDaemon runs `loopr daemon` in the workspace, waits until it answers
// on its socket, and stops it when the test ends (SIGTERM, then SIGKILL
// after 5s).
func startDaemon(t *testing.T, r repo) *daemonProc {
	t.Helper()
	return startDaemonEnv(t, r)
}

// startDaemonEnv is startDaemon with extra environment entries for the
// daemon (and so its agents).
func startDaemonEnv(t *testing.T, r repo, env ...string) *daemonProc {
	t.Helper()
	return startDaemonHome(t, r, "", env...)
}

// startDaemonHome is startDaemonEnv with the home home ("" = the
// workspace's, r.home): another daemon on the same repository.
func startDaemonHome(t *testing.T, r repo, home string, env ...string) *daemonProc {
	t.Helper()
	n := 1
	for ; ; n++ {
		if _, err := os.Stat(filepath.Join(r.logs, fmt.Sprintf("daemon-%d.log", n))); err != nil {
			break
		}
	}
	logPath := filepath.Join(r.logs, fmt.Sprintf("daemon-%d.log", n))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	var homeArgs []string
	sock := filepath.Join(r.home, "loopr.sock")
	if home != "" {
		homeArgs, sock = []string{"--home", home}, filepath.Join(home, "loopr.sock")
	}
	cmd := exec.Command(bin, append(homeArgs, "daemon")...)
	cmd.Dir = r.dir
	// Agents inherit LOOPR_E2E_DAEMON: their logs say which daemon ran them.
	cmd.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1", fmt.Sprintf("LOOPR_E2E_DAEMON=%d", n))
	cmd.Env = append(cmd.Env, env...)
	// A file, not a pipe: Wait must not wait for agents a killed daemon
	// leaves behind.
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{n: n, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() { d.stop() })
	waitFor(t, 15*time.Second, "the daemon to answer", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited with %v before it answered:\n%s%s", cmd.ProcessState, d.output(), socketHolders(sock))
		}
		// Until the socket answers, the CLI may find the store locked.
		res := run(t, r.dir, "", append(homeArgs, "status", "--json")...)
		var st api.Status
		return res.code == 0 && json.Unmarshal([]byte(res.stdout), &st) == nil && st.Daemon && st.PID == cmd.Process.Pid
	})
	return d
}

// socketHolders names the processes that hold a socket bound to path, for
// a daemon that found its socket still answering.
func socketHolders(path string) string {
	out, _ := exec.Command("ss", "-xlpn").Output()
	var lines []string
	for l := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(l, path) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "listening on " + path + ":\n" + strings.Join(lines, "\n")
}

func (d *daemonProc) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// output returns what the daemon logged.
func (d *daemonProc) output() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// stop sends SIGTERM, then SIGKILL after 5s, and returns the exit code (-1
// when it had to be killed or died of a signal).
func (d *daemonProc) stop() int {
	if !d.exited() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(testslack.Scale(5 * time.Second)):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	return d.cmd.ProcessState.ExitCode()
}

// crash kills the daemon alone with SIGKILL, as a crash would: its agents
// live on as orphans until its guard kills them (at once; with
// LOOPR_GUARD=off, until the next daemon's Recover).
func (d *daemonProc) crash(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
}

// waitFor polls cond every 100ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitEvery(t, timeout, func() time.Duration { return poll }, what, cond)
}

// waitEvery is waitFor with the pause between polls given by every: each
// poll of `loopr status` is a process start, which costs CPU the daemons
// under test need.
func waitEvery(t *testing.T, timeout time.Duration, every func() time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if took := time.Since(start); took > testslack.Scale(timeout) {
			t.Fatalf("timed out after %s waiting for %s (the limit %s, scaled by the load: see internal/testslack)", took.Round(time.Millisecond), what, timeout)
		}
		time.Sleep(every())
	}
}

// slowPoll paces waits for a whole tree to settle.
func slowPoll() time.Duration { return 300 * time.Millisecond }

// status runs `loopr status --json` in the workspace.
func status(t *testing.T, r repo) api.Status {
	t.Helper()
	var st api.Status
	mustJSON(t, ok(t, r.dir, "status", "--json"), &st)
	return st
}

// list runs `loopr list --json` in the workspace.
func list(t *testing.T, r repo) []loop.Loop {
	t.Helper()
	var loops []loop.Loop
	mustJSON(t, ok(t, r.dir, "list", "--json"), &loops)
	return loops
}

// show runs `loopr show ID --json`.
func show(t *testing.T, r repo, id string) loop.Loop {
	t.Helper()
	var l loop.Loop
	mustJSON(t, ok(t, r.dir, "show", id, "--json"), &l)
	return l
}

// settled reports whether no loop is left to run or to decide on.
func settled(st api.Status) bool {
	return st.Counts[loop.Pending]+st.Counts[loop.Running]+st.Counts[loop.Merging]+st.Counts[loop.Paused]+st.Counts[loop.AwaitingApproval] == 0
}

// describe is a one-line-per-loop dump for failure messages.
func describe(loops []loop.Loop) string {
	var b strings.Builder
	for _, l := range loops {
		fmt.Fprintf(&b, "  %s %-5s %-9s it %d/%d %q parent %s reason %q\n", l.ID, l.Type, l.Status, l.Iteration, l.MaxIterations, l.Title, l.Parent, l.Reason)
	}
	return b.String()
}

// sectionRe matches the child headings of SPEC §7 artifacts.
var sectionRe = regexp.MustCompile(`(?m)^### (?:Spec|Phase|Task) \d+: (.+)$`)

// checkTree asserts that loops form one complete plan tree: every loop
// complete, and every plan, spec and phase has exactly one child per
// section of its artifact, titled by that section, triggered by it. It
// returns the plan.
func checkTree(t *testing.T, loops []loop.Loop) loop.Loop {
	t.Helper()
	byType := map[string][]loop.Loop{}
	children := map[string][]loop.Loop{}
	for _, l := range loops {
		byType[l.Type] = append(byType[l.Type], l)
		children[l.Parent] = append(children[l.Parent], l)
		if l.Status != loop.Complete {
			t.Errorf("loop %s (%s %q) is %s, want complete (reason %q)", l.ID, l.Type, l.Title, l.Status, l.Reason)
		}
	}
	want := map[string]int{loop.Plan: 1, loop.Spec: 2, loop.Phase: 4, loop.Ralph: 8}
	for typ, n := range want {
		if got := len(byType[typ]); got != n {
			t.Errorf("%d %s loops, want %d", got, typ, n)
		}
	}
	if len(loops) != 15 || len(byType[loop.Plan]) != 1 {
		t.Fatalf("want one tree of 15 loops, got %d:\n%s", len(loops), describe(loops))
	}
	for _, l := range loops {
		kids := children[l.ID]
		if l.Type == loop.Ralph {
			if len(kids) != 0 {
				t.Errorf("ralph loop %s has %d children", l.ID, len(kids))
			}
			continue
		}
		if l.Artifact == "" {
			t.Errorf("%s loop %s is complete without an artifact", l.Type, l.ID)
			continue
		}
		data, err := os.ReadFile(l.Artifact)
		if err != nil {
			t.Errorf("%s loop %s: artifact: %v", l.Type, l.ID, err)
			continue
		}
		var sections, titles []string
		for _, m := range sectionRe.FindAllStringSubmatch(string(data), -1) {
			sections = append(sections, m[1])
		}
		for _, k := range kids {
			titles = append(titles, k.Title)
			if k.TriggeredBy != l.Artifact {
				t.Errorf("child %s of %s: triggered_by %q, want the parent's artifact %q", k.ID, l.ID, k.TriggeredBy, l.Artifact)
			}
		}
		slices.Sort(sections)
		slices.Sort(titles)
		if !slices.Equal(sections, titles) {
			t.Errorf("%s loop %s: children %q, want one per artifact section %q", l.Type, l.ID, titles, sections)
		}
	}
	return byType[loop.Plan][0]
}

// openStore opens the store of a stopped daemon.
func openStore(t *testing.T, r repo) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(r.home, "loopr.db"), store.Options{Timeout: 2 * time.Second, ReadOnly: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// journal returns every event in the store.
func journal(t *testing.T, s *store.Store) []loop.Event {
	t.Helper()
	var evs []loop.Event
	err := s.View(func(tx *store.Tx) error {
		var err error
		evs, err = tx.EventsSince(0, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// stopCleanly stops d with SIGTERM and asserts a clean exit: status 0, the
// socket and pid file removed, and a store that passes bbolt's check,
// which it returns opened read-only.
func stopCleanly(t *testing.T, r repo, d *daemonProc) *store.Store {
	t.Helper()
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d after SIGTERM, want 0; log:\n%s", code, tail(d.output(), 40))
	}
	for _, name := range []string{"loopr.sock", "daemon.pid"} {
		if _, err := os.Stat(filepath.Join(r.home, name)); err == nil {
			t.Errorf("%s still exists after the daemon stopped", name)
		}
	}
	s := openStore(t, r)
	if err := s.Check(); err != nil {
		t.Errorf("store check: %v", err)
	}
	return s
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// iterFile reads a file of a loop's iteration directory ("" if missing).
func iterFile(r repo, id string, iteration int, name string) string {
	b, _ := os.ReadFile(filepath.Join(r.home, "loops", id, "iterations", fmt.Sprintf("%03d", iteration), name))
	return string(b)
}
