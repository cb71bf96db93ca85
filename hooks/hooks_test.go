package hooks_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/hooks"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/redact"
)

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the hook wrote no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestTimeoutKillsTheWholeGroup: a hook that sleeps (and leaves a
// grandchild sleeping in the background) with timeout_secs 2 is stopped
// with everything it started within 5 s of its timeout.
func TestTimeoutKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := `echo $$ > leader.pid; sleep 999 & echo $! > child.pid; echo started; sleep 999`
	start := time.Now()
	done := make(chan hooks.Result, 1)
	go func() {
		done <- hooks.Run(context.Background(), hooks.Spec{
			Name: config.BeforeRun, Dir: dir, Log: filepath.Join(dir, "log", "before_run.log"),
			Hook: config.Hook{Run: []string{cmd}, TimeoutSecs: 2, OnError: config.OnErrorBlock},
			Env:  hooks.Env{Home: dir, Loop: "01HOOKTEST"},
		})
	}()
	var res hooks.Result
	select {
	case res = <-done:
	case <-time.After(testslack.Scale(60 * time.Second)):
		t.Fatal("the hook still runs a minute after its 2 s timeout")
	}
	pids := []int{readPid(t, filepath.Join(dir, "leader.pid")), readPid(t, filepath.Join(dir, "child.pid"))}
	var gone time.Time
	if !testslack.Wait(30*time.Second, 20*time.Millisecond, func() bool {
		gone = time.Now()
		return !slices.ContainsFunc(pids, alive)
	}) {
		t.Fatalf("processes %v still alive after the hook's timeout", pids)
	}
	took := gone.Sub(start)
	t.Logf("the hook's group was gone %s after it started (timeout 2s)", took.Round(time.Millisecond))
	if limit := 2*time.Second + testslack.Scale(5*time.Second); took > limit {
		t.Errorf("the hook's group was gone %s after it started; want within 5 s of its 2 s timeout (%s at this load)", took, limit)
	}
	if !res.Failed() || !strings.Contains(res.Err.Error(), "timed out") || res.LastLine != "started" {
		t.Errorf("Run() = err %v, last line %q; want a timeout with last line \"started\"", res.Err, res.LastLine)
	}
	log, _ := os.ReadFile(res.Log)
	if !strings.Contains(string(log), "started") {
		t.Errorf("the log lacks the hook's output:\n%s", log)
	}
}

// TestRunStopsAtTheFirstFailure: commands run in order until one fails;
// the result names it, its exit status and its last line.
func TestRunStopsAtTheFirstFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := hooks.Run(context.Background(), hooks.Spec{
		Name: config.AfterCreate, Dir: dir, Log: filepath.Join(dir, "h.log"),
		Hook: config.Hook{Run: []string{"echo one > one", "echo 'db is down' >&2; exit 3", "echo three > three"}, TimeoutSecs: 30, OnError: config.OnErrorWarn},
	})
	if res.Command != "echo 'db is down' >&2; exit 3" || res.Err == nil || res.Err.Error() != "exit status 3" || res.LastLine != "db is down" {
		t.Errorf("Run() = %+v; want the second command, exit status 3, last line \"db is down\"", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "one")); err != nil {
		t.Errorf("the first command did not run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "three")); err == nil {
		t.Errorf("the third command ran after the second failed")
	}
	if s := res.Summary(); !strings.HasPrefix(s, "hook after_create failed: ") || !strings.Contains(s, "(last line: db is down)") {
		t.Errorf("Summary() = %q", s)
	}
}

// TestRunLogDirSymlink: an agent that left a symbolic link where the
// hook's log directory goes (<iteration>/hooks -> a directory of yours) does
// not make the hook write its log there.
func TestRunLogDirSymlink(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	iter := filepath.Join(dir, "iter")
	if err := os.MkdirAll(iter, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(iter, "hooks")); err != nil {
		t.Fatal(err)
	}
	res := hooks.Run(context.Background(), hooks.Spec{
		Name: config.AfterRun, Dir: dir, Log: filepath.Join(iter, "hooks", "after_run.log"),
		Hook: config.Hook{Run: []string{"echo planted"}, TimeoutSecs: 30},
	})
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("the hook wrote %s into the directory the planted link points to", entries[0].Name())
	}
	if res.Err != nil {
		t.Errorf("Run() = %v, want the hook run with its log in a directory of loopr's", res.Err)
	}
	if b, err := os.ReadFile(res.Log); err != nil || !strings.Contains(string(b), "planted") {
		t.Errorf("log %s: %q, %v", res.Log, b, err)
	}
}

// TestRunRedactsOutput: a secret a hook prints is neither in its log nor
// in the Result the journal and NEEDS YOU read.
func TestRunRedactsOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rd := redact.New()
	rd.Add("DB_PASSWORD", "hunter2-hunter2")
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("hunter2-hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := hooks.Run(context.Background(), hooks.Spec{
		Name: config.BeforeRun, Dir: dir, Log: filepath.Join(dir, "h.log"), Redact: rd,
		Hook: config.Hook{Run: []string{`printf 'login %s failed' "$(cat pw)"; exit 1`}, TimeoutSecs: 30, OnError: config.OnErrorWarn},
	})
	log, _ := os.ReadFile(filepath.Join(dir, "h.log"))
	if res.LastLine != "login [redacted DB_PASSWORD] failed" || strings.Contains(res.Tail+string(log), "hunter2") {
		t.Errorf("LastLine %q, Tail %q, log %q: want the password redacted everywhere", res.LastLine, res.Tail, log)
	}
}

// TestEnviron: a hook's environment names its loop and sets CI and
// GIT_TERMINAL_PROMPT; what makes a shell run code at start is dropped.
func TestEnviron(t *testing.T) {
	t.Parallel()
	base := []string{"PATH=/bin", "BASH_ENV=/home/u/.bashrc", "ENV=/home/u/.shrc", "BASH_FUNC_f%%=() { echo hi; }", "CI=false", "KEEP=1"}
	got := hooks.Environ(base, config.BeforeRun, "/w", hooks.Env{Home: "/h", Loop: "L", Worktree: "/w", Branch: "loopr/x-1", PlanBranch: "loopr/plan-2"})
	want := []string{"PATH=/bin", "KEEP=1", "LOOPR_HOME=/h", "LOOPR_LOOP_ID=L", "LOOPR_WORKTREE=/w", "LOOPR_BRANCH=loopr/x-1",
		"LOOPR_PLAN_BRANCH=loopr/plan-2", "LOOPR_HOOK=before_run", "CI=true", "GIT_TERMINAL_PROMPT=0"}
	if !slices.Equal(got, want) {
		t.Errorf("Environ() =\n%q\nwant\n%q", got, want)
	}
}

// TestEnvReachesTheHook: the variables reach the commands, PWD names
// their directory, and BASH_ENV does not run.
func TestEnvReachesTheHook(t *testing.T) {
	dir := t.TempDir()
	rc := filepath.Join(dir, "rc")
	if err := os.WriteFile(rc, []byte("echo profile-ran > "+filepath.Join(dir, "ran")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BASH_ENV", rc)
	t.Setenv("ENV", rc)
	res := hooks.Run(context.Background(), hooks.Spec{
		Name: config.BeforeRun, Dir: dir, Log: filepath.Join(dir, "h.log"),
		Hook: config.Hook{Run: []string{`echo "$LOOPR_LOOP_ID $LOOPR_HOOK $CI $GIT_TERMINAL_PROMPT $PWD ${BASH_ENV-unset}" > env.txt; bash -c true`}, TimeoutSecs: 30},
		Env:  hooks.Env{Loop: "01LOOP"},
	})
	if res.Err != nil {
		t.Fatalf("Run(): %v", res.Summary())
	}
	b, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	if got, want := strings.TrimSpace(string(b)), "01LOOP before_run true 0 "+dir+" unset"; got != want {
		t.Errorf("the hook saw %q; want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Errorf("a shell profile (BASH_ENV/ENV) ran")
	}
}

// TestSyntax: sh -n finds a command that does not parse, and runs none.
func TestSyntax(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := hooks.Syntax(context.Background(), "touch "+filepath.Join(dir, "x")+"; echo ok"); err != nil {
		t.Errorf("Syntax(valid) = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Errorf("Syntax ran the command")
	}
	err := hooks.Syntax(context.Background(), "if true; then echo")
	if err == nil || !strings.HasPrefix(err.Error(), "sh -n: ") {
		t.Errorf("Syntax(unterminated if) = %v; want an sh -n error", err)
	}
}

// TestRunEnvIsAllowlisted: a hook gets its Base (the loop's profile's
// environment), else the daemon's base set: never the daemon's other
// variables.
func TestRunEnvIsAllowlisted(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "planted-hook-token")
	for _, tc := range []struct {
		name string
		base []string
		want string
	}{
		{"no base: the base set", nil, "PATH="},
		{"the profile's", []string{"PATH=/usr/bin:/bin", "PROJECT_MODE=hooked"}, "PROJECT_MODE=hooked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res := hooks.Run(context.Background(), hooks.Spec{
				Name: config.BeforeRun, Dir: dir, Log: filepath.Join(dir, "h.log"), Base: tc.base,
				Hook: config.Hook{Run: []string{"env > env.txt"}, TimeoutSecs: 30, OnError: config.OnErrorBlock},
			})
			if res.Failed() {
				t.Fatalf("Run() = %+v", res)
			}
			b, err := os.ReadFile(filepath.Join(dir, "env.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if env := string(b); strings.Contains(env, "planted-hook-token") || !strings.Contains(env, tc.want) {
				t.Errorf("the hook's environment holds the daemon's GITHUB_TOKEN or lacks %q:\n%s", tc.want, env)
			}
		})
	}
}
