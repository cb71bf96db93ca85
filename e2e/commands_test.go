package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// The commands of the first hour (issue 13): daemon status/stop/restart,
// plan and add starting a daemon, id prefixes, shell completion, show
// with the artifact, the words of refused actions, logs and events. Each
// drives the real binary against a real store, socket and agent
// (testdata/cliagent.sh).

// cliConfig runs testdata/cliagent.sh; plans wait for approval.
func cliConfig(t *testing.T) string {
	t.Helper()
	cmd, _ := json.Marshal([]string{"sh", abs(t, "testdata/cliagent.sh")})
	return fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
agent:
  command: %s
  timeout_secs: 60
loops:
  plan: {require_approval: true}
  ralph: {validate: []}
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
`, cmd)
}

// autoStart is the environment of a user who has not set LOOPR_NO_START.
var autoStart = []string{"LOOPR_NO_START="}

// stopAtEnd stops whatever daemon runs in dir when the test ends.
func stopAtEnd(t *testing.T, dir string) {
	t.Cleanup(func() {
		if r := run(t, dir, "", "daemon", "stop"); r.code != 0 {
			t.Errorf("daemon stop at the end: exit %d: %s", r.code, r.stderr)
		}
	})
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// daemonPID runs `loopr daemon status --json` and returns the pid, 0 when
// none runs (exit 3).
func daemonPID(t *testing.T, dir string) int {
	t.Helper()
	r := run(t, dir, "", "daemon", "status", "--json")
	var st struct {
		Running bool   `json:"running"`
		PID     int    `json:"pid"`
		Socket  string `json:"socket"`
	}
	mustJSON(t, r.stdout, &st)
	switch {
	case st.Running && r.code == 0 && st.PID > 0:
		return st.PID
	case !st.Running && r.code == 3:
		return 0
	}
	t.Fatalf("daemon status --json: exit %d, %+v", r.code, st)
	return 0
}

func TestDaemonStatusStopRestart(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	stopAtEnd(t, r.dir)

	// None runs: status exits 3 and says so; stop is a no-op that exits 0.
	res := run(t, r.dir, "", "daemon", "status")
	if res.code != 3 || !strings.Contains(res.stdout, "no loopr daemon running here (socket .loopr/loopr.sock)") {
		t.Errorf("daemon status with none: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = run(t, r.dir, "", "daemon", "stop")
	if res.code != 0 || !strings.Contains(res.stdout, "nothing to stop") {
		t.Errorf("daemon stop with none: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	out := ok(t, r.dir, "daemon", "--detach")
	if !strings.HasPrefix(out, "daemon started, pid ") {
		t.Errorf("daemon --detach said %q", out)
	}
	pid := daemonPID(t, r.dir)
	if pid == 0 || !alive(pid) {
		t.Fatalf("after daemon --detach: pid %d", pid)
	}
	res = run(t, r.dir, "", "daemon", "status")
	for _, want := range []string{"daemon   running", fmt.Sprintf("pid      %d", pid), "uptime   ", "socket   .loopr/loopr.sock", "log      .loopr/logs/daemon.log"} {
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("daemon status: exit %d, lacks %q:\n%s", res.code, want, res.stdout)
		}
	}

	// restart: a new process serves; the old one is gone.
	out = ok(t, r.dir, "daemon", "restart")
	if !strings.Contains(out, fmt.Sprintf("stopped loopr daemon (pid %d)", pid)) || !strings.Contains(out, "daemon started, pid ") {
		t.Errorf("daemon restart said:\n%s", out)
	}
	pid2 := daemonPID(t, r.dir)
	if pid2 == 0 || pid2 == pid || alive(pid) {
		t.Fatalf("after restart: new pid %d, old %d alive %v", pid2, pid, alive(pid))
	}

	// stop: returns only once the process is gone, the socket is dead.
	out = ok(t, r.dir, "daemon", "stop")
	if !regexp.MustCompile(fmt.Sprintf(`^stopped loopr daemon \(pid %d\) in \d`, pid2)).MatchString(out) {
		t.Errorf("daemon stop said %q", out)
	}
	if alive(pid2) {
		t.Errorf("daemon %d still alive after daemon stop returned", pid2)
	}
	if p := daemonPID(t, r.dir); p != 0 {
		t.Errorf("daemon status after stop: pid %d", p)
	}
	if _, err := os.Stat(filepath.Join(r.home, "loopr.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after stop: %v", err)
	}
}

func TestPlanAndAddStartADaemon(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	stopAtEnd(t, r.dir)

	// Bad input never starts one.
	res := runEnv(t, r.dir, "", autoStart, "add", "--type", "dragon", "--task", "x")
	if res.code != 2 || daemonPID(t, r.dir) != 0 {
		t.Fatalf("bad add: exit %d, stderr %q; a daemon runs: %v", res.code, res.stderr, daemonPID(t, r.dir) != 0)
	}
	// --no-start only queues.
	res = runEnv(t, r.dir, "", autoStart, "add", "--no-start", "--type", "ralph", "--title", "Queued only", "--task", "q")
	if res.code != 0 || res.stderr != "" || daemonPID(t, r.dir) != 0 {
		t.Fatalf("add --no-start: exit %d, stderr %q, daemon %d", res.code, res.stderr, daemonPID(t, r.dir))
	}
	if l := list(t, r); len(l) != 1 || l[0].Status != loop.Pending {
		t.Fatalf("after add --no-start: %s", describe(l))
	}

	res = runEnv(t, r.dir, "", autoStart, "plan", "Add OAuth login")
	m := regexp.MustCompile(`^started a loopr daemon \(pid (\d+)\); logs in \.loopr/logs/daemon\.log\n$`).FindStringSubmatch(res.stderr)
	if res.code != 0 || m == nil || !strings.HasPrefix(res.stdout, "created plan ") {
		t.Fatalf("plan with no daemon: exit %d\nstdout %q\nstderr %q", res.code, res.stdout, res.stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	if got := daemonPID(t, r.dir); got != pid {
		t.Fatalf("daemon status pid %d, plan said %d", got, pid)
	}
	// The daemon runs what was queued before it, and the plan.
	waitFor(t, 20*time.Second, "the queued task to complete and the plan to await approval", func() bool {
		st := status(t, r)
		return st.Counts[loop.Complete] == 1 && st.Counts[loop.AwaitingApproval] == 1
	})
	// With one running, plan says nothing more.
	res = runEnv(t, r.dir, "", autoStart, "plan", "Second request")
	if res.code != 0 || res.stderr != "" {
		t.Errorf("plan with a daemon: exit %d, stderr %q", res.code, res.stderr)
	}
	if got := daemonPID(t, r.dir); got != pid {
		t.Errorf("daemon pid %d after a second plan, want still %d", got, pid)
	}
}

// importIDs writes loops with chosen ids into a fresh workspace's store.
func importIDs(t *testing.T, dir string, loops ...string) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	var b strings.Builder
	for _, l := range loops {
		f := strings.SplitN(l, " ", 3) // id type title
		id, typ, title := f[0], f[1], f[2]
		fmt.Fprintf(&b, `{"id":%q,"type":%q,"status":"pending","iteration":1,"max_iterations":3,"created_at":%q,"updated_at":%q,"title":%q,"runnable_at":"2099-01-01T00:00:00Z"}`+"\n",
			id, typ, now, now, title)
	}
	file := filepath.Join(t.TempDir(), "loops.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "import", file)
}

// viaStoreAndDaemon runs fn twice in parallel subtests: with the store
// opened by each command (viaDaemon false), then through a daemon that fn
// starts.
func viaStoreAndDaemon(t *testing.T, fn func(t *testing.T, viaDaemon bool)) {
	for _, viaDaemon := range []bool{false, true} {
		name := "store"
		if viaDaemon {
			name = "daemon"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, viaDaemon)
		})
	}
}

func TestIDPrefixes(t *testing.T) {
	t.Parallel()
	viaStoreAndDaemon(t, func(t *testing.T, viaDaemon bool) {
		r := newRepo(t, cliConfig(t))
		importIDs(t, r.dir, "ABCD1111 ralph First task", "ABCD2222 spec Second thing", "ABCE3333 plan The plan")
		if viaDaemon {
			startDaemon(t, r)
		}
		// A unique prefix, in either case, works wherever an id does.
		if l := show(t, r, "ABCE"); l.ID != "ABCE3333" {
			t.Errorf("show ABCE = %s", l.ID)
		}
		if l := show(t, r, "abce3"); l.ID != "ABCE3333" {
			t.Errorf("show abce3 = %s", l.ID)
		}
		if out := ok(t, r.dir, "why", "ABCD1"); !strings.Contains(out, "ABCD1111") {
			t.Errorf("why ABCD1:\n%s", out)
		}
		if out := ok(t, r.dir, "pause", "ABCD2"); !strings.Contains(out, `pause spec ABCD2222 "Second thing": now paused`) {
			t.Errorf("pause ABCD2: %q", out)
		}
		ok(t, r.dir, "resume", "abcd2")
		if out := ok(t, r.dir, "budget", "abcd1", "--usd", "2"); !strings.Contains(out, "ABCD1111 budget $2.00") {
			t.Errorf("budget abcd1: %q", out)
		}
		// ABCD1111 does not need a person: refused, but by its full id.
		if res := run(t, r.dir, "", "answer", "abcd1", "blue"); res.code == 0 || !strings.Contains(res.stderr, "ABCD1111") {
			t.Errorf("answer abcd1: exit %d %q", res.code, res.stderr)
		}
		var child loop.Loop
		mustJSON(t, ok(t, r.dir, "add", "--type", "spec", "--parent", "ABCE", "--title", "Child", "--at", "2099-01-01T00:00:00Z", "--json"), &child)
		if child.Parent != "ABCE3333" {
			t.Errorf("add --parent ABCE: parent %q", child.Parent)
		}
		if out := ok(t, r.dir, "list", "--parent", "abce"); !strings.Contains(out, loop.ShortID(child.ID)) {
			t.Errorf("list --parent abce:\n%s", out)
		}

		// Ambiguous: exit 2, every candidate with its type and title.
		res := run(t, r.dir, "", "show", "ABCD")
		if res.code != 2 || !strings.Contains(res.stderr, `loopr: id prefix "ABCD" is ambiguous: 2 loops match; give more characters:`) ||
			!regexp.MustCompile(`ABCD1111 +ralph +First task`).MatchString(res.stderr) ||
			!regexp.MustCompile(`ABCD2222 +spec +Second thing`).MatchString(res.stderr) {
			t.Errorf("show ABCD: exit %d\n%s", res.code, res.stderr)
		}
		if res := run(t, r.dir, "", "cancel", "abcd"); res.code != 2 || !strings.Contains(res.stderr, "ambiguous") {
			t.Errorf("cancel abcd: exit %d %q", res.code, res.stderr)
		}
		// Too short, or no match: exit 2, one line saying so.
		for arg, want := range map[string]string{
			"ABC":  "loop ABC: not found (an id prefix needs at least 4 characters; loopr list shows the ids)",
			"ZZZZ": "loop ZZZZ: not found: no loop id is, starts or ends with it",
		} {
			res := run(t, r.dir, "", "show", arg)
			if res.code != 2 || !strings.Contains(res.stderr, want) || strings.Count(res.stderr, "\n") != 1 {
				t.Errorf("show %s: exit %d %q, want %q", arg, res.code, res.stderr, want)
			}
		}
	})
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	importIDs(t, r.dir, "ABCD1111 ralph First task", "ABCE3333 plan The plan")
	ok(t, r.dir, "cancel", "ABCE3333") // a finished loop is not offered

	check := func(t *testing.T) {
		for _, shell := range []string{"bash", "zsh", "fish"} {
			script := ok(t, r.dir, "completion", shell)
			if !strings.Contains(script, "__complete") || !strings.Contains(script, "loopr") {
				t.Errorf("completion %s: no call back to loopr __complete:\n%.300s", shell, script)
			}
		}
		out := ok(t, r.dir, "__complete", "")
		for _, sub := range []string{"daemon", "logs", "events", "completion", "show", "approve"} {
			if !regexp.MustCompile(`(?m)^` + sub + `\t`).MatchString(out) {
				t.Errorf("subcommands lack %s:\n%s", sub, out)
			}
		}
		if out := ok(t, r.dir, "__complete", "daemon", ""); !strings.Contains(out, "stop\t") || !strings.Contains(out, "status\t") || !strings.Contains(out, "restart\t") {
			t.Errorf("daemon subcommands:\n%s", out)
		}
		if out := ok(t, r.dir, "__complete", "show", "--"); !strings.Contains(out, "--artifact\t") {
			t.Errorf("show flags:\n%s", out)
		}
		if out := ok(t, r.dir, "__complete", "add", "--type", ""); !strings.Contains(out, "plan\nspec\nphase\nralph\n") {
			t.Errorf("add --type values:\n%s", out)
		}
		if out := ok(t, r.dir, "__complete", "list", "--status", ""); !strings.Contains(out, "awaiting_approval\n") {
			t.Errorf("list --status values:\n%s", out)
		}
		for _, args := range [][]string{{"show", ""}, {"approve", "ab"}, {"logs", "ABC"}, {"add", "--parent", ""}} {
			out := ok(t, r.dir, append([]string{"__complete"}, args...)...)
			if !strings.Contains(out, "ABCD1111\tFirst task (ralph, pending)") || strings.Contains(out, "ABCE3333") {
				t.Errorf("__complete %q: want the live loop with its title, not the cancelled one:\n%s", args, out)
			}
		}
		// bash itself, as a user's shell runs the script. The stub stands
		// in for the bash-completion package's helper.
		sh := `_get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
source <(loopr completion bash)
COMP_WORDS=(loopr show A); COMP_CWORD=2; COMP_LINE="loopr show A"; COMP_POINT=${#COMP_LINE}
__start_loopr 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", sh)
		cmd.Dir = r.dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"), "LOOPR_HOME=")
		got, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(got)) != "ABCD1111" {
			t.Errorf("bash completes `loopr show A` to %q (%v), want ABCD1111", got, err)
		}
	}
	t.Run("store", check)
	startDaemon(t, r)
	t.Run("daemon", check)

	// Where there is no workspace, completion offers nothing and creates nothing.
	empty := t.TempDir()
	if out := ok(t, empty, "__complete", "show", ""); strings.Contains(out, "\t") {
		t.Errorf("completion in an empty directory offered %q", out)
	}
	if _, err := os.Stat(filepath.Join(empty, ".loopr")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("completion created .loopr: %v", err)
	}
}

// awaitStatus waits until loop id has status st.
func awaitStatus(t *testing.T, r repo, id string, st loop.Status) loop.Loop {
	t.Helper()
	var l loop.Loop
	waitFor(t, 20*time.Second, id+" to be "+string(st), func() bool {
		l = show(t, r, id)
		return l.Status == st
	})
	return l
}

func TestApproveWithEyesOpen(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Add OAuth login\n\nWith tokens that expire.", "--json"), &plan)
	awaitStatus(t, r, plan.ID, loop.AwaitingApproval)

	why := ok(t, r.dir, "why", plan.ID)
	ref := loop.ShortID(plan.ID) // messages name loops by their short id
	for _, want := range []string{
		"awaiting your approval: read it with `loopr show " + ref + " --artifact`",
		"loopr approve " + ref, "loopr iterate " + ref + ` --feedback "…"`, "loopr reject " + ref,
	} {
		if !strings.Contains(why, want) {
			t.Errorf("why lacks %q:\n%s", want, why)
		}
	}
	out := ok(t, r.dir, "show", plan.ID)
	if !regexp.MustCompile(`(?m)^status +awaiting_approval$`).MatchString(out) {
		t.Errorf("show lacks the status:\n%s", out)
	}
	for _, want := range []string{"\ntask:\n  Add OAuth login\n  \n  With tokens that expire.\n",
		"\nartifact (", "accepted/001-plan.md):\n  # Plan: Add OAuth login\n", "  ### Spec 2: Part 02 of Add OAuth login\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	art := ok(t, r.dir, "show", plan.ID[:12], "--artifact")
	if !strings.HasPrefix(art, "# Plan: Add OAuth login\n\nThe plan text a reviewer reads.\n") || strings.Contains(art, "awaiting_approval") {
		t.Errorf("show --artifact:\n%s", art)
	}
	if res := run(t, r.dir, "", "show", "ABCD1234ZZ", "--artifact"); res.code != 2 {
		t.Errorf("show --artifact of no loop: exit %d", res.code)
	}

	out = ok(t, r.dir, "approve", plan.ID)
	for _, want := range []string{`approved plan ` + ref + ` "Add OAuth login": now complete`, "created 2 loops:", "Part 01 of Add OAuth login", "Part 02 of Add OAuth login"} {
		if !strings.Contains(out, want) {
			t.Errorf("approve output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "more") {
		t.Errorf("approve of 2 said more:\n%s", out)
	}

	// The words of what does not apply: what the loop is, what would work.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"approve", plan.ID}, plan.ID + ": this plan is already complete; there is nothing to approve"},
		{[]string{"reject", plan.ID}, plan.ID + ": this plan is already complete; there is nothing to reject"},
		{[]string{"reset", plan.ID}, "reset brings back failed loops; " + plan.ID + " is complete"},
		{[]string{"pause", plan.ID}, "pause holds pending loops; " + plan.ID + " is complete, so there is nothing to hold"},
		{[]string{"resume", plan.ID}, "resume releases paused loops; " + plan.ID + " is complete"},
	} {
		res := run(t, r.dir, "", tc.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) || strings.Contains(res.stderr, "cannot go from") || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("loopr %s: exit %d %q, want one line with %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
		}
	}
	var held loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Later", "--at", "2099-01-01T00:00:00Z", "--json"), &held)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reset", held.ID}, "reset brings back failed loops; " + held.ID + " is pending — use loopr pause to hold it"},
		{[]string{"approve", held.ID}, held.ID + ": this ralph is pending, not awaiting approval or review; loopr why " + held.ID + " says what it waits for"},
		{[]string{"resume", held.ID}, held.ID + ": this ralph is not paused: it is pending"},
	} {
		res := run(t, r.dir, "", tc.args...)
		if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("loopr %s: exit %d %q, want %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
		}
	}
}

func TestCancelNamesWhatItCancelled(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	startDaemon(t, r)
	later := "2099-01-01T00:00:00Z"
	var small, big loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "plan", "--title", "Small plan", "--at", later, "--json"), &small)
	mustJSON(t, ok(t, r.dir, "add", "--type", "plan", "--title", "Big plan", "--at", later, "--json"), &big)
	for i := 1; i <= 3; i++ {
		ok(t, r.dir, "add", "--type", "spec", "--parent", small.ID, "--title", fmt.Sprintf("Small part %d", i), "--at", later)
	}
	var file strings.Builder
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&file, "- {type: spec, parent: %s, title: Big part %02d, runnable_at: %s}\n", big.ID, i, later)
	}
	path := filepath.Join(t.TempDir(), "loops.yaml")
	os.WriteFile(path, []byte(file.String()), 0o644)
	ok(t, r.dir, "add", "--file", path)

	out := ok(t, r.dir, "cancel", small.ID)
	if !strings.HasPrefix(out, `cancelled plan `+loop.ShortID(small.ID)+` "Small plan" and 3 loops below it:`) {
		t.Errorf("cancel small:\n%s", out)
	}
	for i := 1; i <= 3; i++ {
		if !regexp.MustCompile(fmt.Sprintf(`spec +cancelled +Small part %d\n`, i)).MatchString(out) {
			t.Errorf("cancel small does not name part %d:\n%s", i, out)
		}
	}
	out = ok(t, r.dir, "cancel", big.ID)
	if !strings.HasPrefix(out, `cancelled plan `+loop.ShortID(big.ID)+` "Big plan" and 25 loops below it:`) || !strings.HasSuffix(out, "  and 5 more\n") ||
		!strings.Contains(out, "Big part 20\n") || strings.Contains(out, "Big part 21") {
		t.Errorf("cancel big: want 20 named and 5 more:\n%s", out)
	}
}

func TestLogsFollowWhileTheAgentWrites(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))

	// A loop that never ran, no daemon: nothing on stdout, a word on stderr.
	var never loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Not yet", "--at", "2099-01-01T00:00:00Z", "--json"), &never)
	if res := run(t, r.dir, "", "logs", never.ID); res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, never.ID+" has no agent output yet (pending)") {
		t.Errorf("logs of a loop that never ran: exit %d %q %q", res.code, res.stdout, res.stderr)
	}

	startDaemon(t, r)
	var slow loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Slow task", "--json"), &slow)

	// -f before the agent starts: it waits, then streams.
	f := followLogs(t, r.dir, slow.ID[:14])
	got := f.until(t, "tick 3", 30*time.Second)
	// The agent is still writing: the output came live.
	if l := show(t, r, slow.ID); l.Status != loop.Running {
		t.Fatalf("after tick 3 the loop is %s, want running", l.Status)
	}
	if !strings.HasPrefix(got[0], "agent start "+slow.ID+" iteration 1: Slow task") {
		t.Errorf("first line %q", got[0])
	}
	if err := os.WriteFile(filepath.Join(r.home, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got = append(got, f.rest(t, testslack.Scale(30*time.Second))...)
	if got[len(got)-1] != "done" {
		t.Errorf("logs -f ended with %q, want done", got[len(got)-1])
	}
	awaitStatus(t, r, slow.ID, loop.Complete)

	whole := ok(t, r.dir, "logs", slow.ID)
	if whole != strings.Join(got, "\n")+"\n" {
		t.Errorf("logs after the fact differs from what -f printed:\n%s\nvs\n%s", whole, strings.Join(got, "\n"))
	}
	if out := ok(t, r.dir, "logs", slow.ID, "--iteration", "1"); out != whole {
		t.Errorf("logs --iteration 1 differs")
	}
	if res := run(t, r.dir, "", "logs", slow.ID, "--iteration", "2"); res.code != 2 || !strings.Contains(res.stderr, "there is no iteration 2") {
		t.Errorf("logs --iteration 2: exit %d %q", res.code, res.stderr)
	}
	// The agent's output is shown with terminal controls escaped, unless --raw.
	var esc loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Clear \x1b[2J screen", "--json"), &esc)
	awaitStatus(t, r, esc.ID, loop.Complete)
	if out := ok(t, r.dir, "logs", esc.ID); strings.Contains(out, "\x1b") || !strings.Contains(out, `Clear \x1b[2J screen`) {
		t.Errorf("logs printed the escape raw: %q", out)
	}
	if out := ok(t, r.dir, "logs", esc.ID, "--raw"); !strings.Contains(out, "Clear \x1b[2J screen") {
		t.Errorf("logs --raw: %q", out)
	}
	if out := ok(t, r.dir, "events", esc.ID); strings.Contains(out, "\x1b") || !strings.Contains(out, `ralph Clear \x1b[2J screen`) {
		t.Errorf("events printed the escape raw: %q", out)
	}

	ok(t, r.dir, "daemon", "stop")
	if out := ok(t, r.dir, "logs", slow.ID); out != whole {
		t.Errorf("logs from the file with no daemon differs:\n%s", out)
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	var a, b loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Alpha task", "--at", "2099-01-01T00:00:00Z", "--json"), &a)
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Beta task", "--at", "2099-01-01T00:00:00Z", "--json"), &b)
	ok(t, r.dir, "pause", a.ID)

	line := func(id, what, event string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ` + id + `  ` + regexp.QuoteMeta(what) + ` +` + regexp.QuoteMeta(event))
	}
	out := ok(t, r.dir, "events")
	for _, re := range []*regexp.Regexp{line(a.ID, "ralph Alpha task", "created"), line(b.ID, "ralph Beta task", "created"),
		line(a.ID, "ralph Alpha task", "pending → paused")} {
		if !re.MatchString(out) {
			t.Errorf("events lacks %s:\n%s", re, out)
		}
	}
	if out := ok(t, r.dir, "events", a.ID[:20]); strings.Contains(out, b.ID) || !strings.Contains(out, "pending → paused") {
		t.Errorf("events %s:\n%s", a.ID, out)
	}
	var first api.JournalEntry
	jl := strings.Split(strings.TrimSpace(ok(t, r.dir, "events", "--json")), "\n")
	mustJSON(t, jl[0], &first)
	if len(jl) != 3 || first.Loop != a.ID || first.Kind != loop.EventCreated || first.Type != "ralph" || first.Title != "Alpha task" || first.Seq == 0 {
		t.Errorf("events --json: %d lines, first %+v", len(jl), first)
	}

	startDaemon(t, r)
	cmd := exec.Command(bin, "events", "-f")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "LOOPR_HOME=")
	var buf syncBuffer
	cmd.Stdout = &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	waitFor(t, 10*time.Second, "the journal so far", func() bool { return line(a.ID, "ralph Alpha task", "pending → paused").MatchString(buf.String()) })
	var c loop.Loop
	mustJSON(t, ok(t, r.dir, "add", "--type", "ralph", "--title", "Gamma task", "--json"), &c)
	waitFor(t, 20*time.Second, "events -f to show Gamma run", func() bool {
		s := buf.String()
		return line(c.ID, "ralph Gamma task", "created").MatchString(s) && line(c.ID, "ralph Gamma task", "running → complete").MatchString(s)
	})
	if n := strings.Count(buf.String(), "ralph Beta task  "); n != 1 {
		t.Errorf("events -f printed Beta's creation %d times:\n%s", n, buf.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil && cmd.ProcessState.ExitCode() != 130 {
		t.Errorf("events -f after SIGINT: %v, want exit 0 or 130", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func TestNewReadersNeedAWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"logs", "ABCD1234"}, {"events"}, {"events", "ABCD1234"}} {
		res := run(t, dir, "", args...)
		if res.code != 2 || !strings.Contains(res.stderr, "no loopr workspace here (run `loopr init`)") {
			t.Errorf("loopr %s in an empty directory: exit %d %q", strings.Join(args, " "), res.code, res.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".loopr")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf(".loopr created: %v", err)
	}
}

// TestTUISaysItStartedADaemon: with no daemon, `loopr tui` starts one and
// says so on the terminal's main screen before the dashboard takes it.
func TestTUISaysItStartedADaemon(t *testing.T) {
	t.Parallel()
	tm := newTmux(t)
	r := newRepo(t, cliConfig(t))
	stopAtEnd(t, r.dir)
	script := fmt.Sprintf("cd %q && LOOPR_NO_START= %q tui; echo TUI-EXITED $?; sleep 30", r.dir, bin)
	tm.run("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", "-e", "NO_COLOR=1", "sh", "-c", script)
	tm.waitScreen("the dashboard", "no loops yet")
	pid := daemonPID(t, r.dir)
	if pid == 0 {
		t.Fatalf("no daemon runs with the dashboard open:\n%s", tm.screen())
	}
	tm.keys("q")
	after := tm.waitScreen("exit", "TUI-EXITED 0")
	want := fmt.Sprintf("started a loopr daemon (pid %d); logs in .loopr/logs/daemon.log", pid)
	if i, j := strings.Index(after, want), strings.Index(after, "TUI-EXITED 0"); i < 0 || i > j {
		t.Errorf("the main screen lacks %q before the dashboard's exit:\n%s", want, after)
	}
}

// TestDaemonStopWaitsForAStartingDaemon: a daemon that holds the store but
// does not answer yet (starting) is not taken for none: stop waits for it
// to answer and stops it.
func TestDaemonStopWaitsForAStartingDaemon(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	stopAtEnd(t, r.dir)
	ok(t, r.dir, "list") // creates the store
	// Stand in for the starting daemon: hold the store's lock.
	st, err := store.Open(filepath.Join(r.home, "loopr.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := exec.Command(bin, "daemon", "stop")
	stop.Dir = r.dir
	var out, errb bytes.Buffer
	stop.Stdout, stop.Stderr = &out, &errb
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // stop finds the store held and nothing answering
	st.Close()
	var pid int
	if _, err := fmt.Sscanf(ok(t, r.dir, "daemon", "--detach"), "daemon started, pid %d", &pid); err != nil {
		t.Fatal(err)
	}
	if err := stop.Wait(); err != nil {
		t.Fatalf("daemon stop: %v\n%s%s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("stopped loopr daemon (pid %d)", pid)) || alive(pid) {
		t.Errorf("daemon stop said %q, want it stopped pid %d", out.String(), pid)
	}
	if p := daemonPID(t, r.dir); p != 0 {
		t.Errorf("a daemon (pid %d) still runs after stop", p)
	}
}

// TestTUIWithoutTerminal: the dashboard without a terminal says so (exit 2)
// and writes nothing to stdout, instead of switching the screen and failing.
func TestTUIWithoutTerminal(t *testing.T) {
	t.Parallel()
	r := newRepo(t, cliConfig(t))
	startDaemon(t, r) // with one running, the dashboard used to get as far as the screen
	for _, args := range [][]string{{"tui", "--no-start"}, {}} {
		res := run(t, r.dir, "", args...)
		if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, "the dashboard needs a terminal") {
			t.Errorf("loopr %v without a terminal: exit %d stdout %q stderr %q", args, res.code, res.stdout, res.stderr)
		}
	}
}
