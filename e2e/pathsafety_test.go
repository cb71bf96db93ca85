package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestArtifactTextIsNeverAPathOrACommand runs a whole tree whose artifacts
// (testdata/evilagent.sh) name children "../../etc/passwd",
// "/abs/loopr-evil-path", "a/b", "nul\x00byte", "..", "$(touch …)",
// "`touch …`" and "x; touch … | touch …", in a git workspace with
// worktrees. Every loop completes; every child has a loopr id, never a name
// taken from its title; loops/<id> and worktrees/<id> directories are named
// by ids only, branches loopr/<slug>-<short-id> by [a-z0-9-] only; nothing is created outside
// the workspace and its home; no command in the text ever runs (the
// canary directory stays empty); and the titles are stored verbatim.
func TestArtifactTextIsNeverAPathOrACommand(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	canary := filepath.Join(root, "canary")
	if err := os.Mkdir(canary, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	cfg := relSimpleConfig([]string{"sh", abs(t, "testdata/evilagent.sh"), canary}, "")
	cfg = strings.Replace(cfg, "worktrees: false", "worktrees: true", 1)
	cfg = strings.Replace(cfg, "ralph: {validate: []}", `ralph: {validate: ["test -f done-$LOOPR_LOOP_ID.txt"]}`, 1)
	e := newRelEnv(t, cfg)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "loopr.yml"},
		{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	d := e.start()
	ctx := context.Background()
	planTitle := "../../plan $(touch " + canary + "/plan-title)"
	if _, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Title: planTitle, Task: "`touch " + canary + "/plan-task`"}); err != nil {
		t.Fatal(err)
	}
	const want = 1 + 8 + 8 + 8
	relWaitFor(t, 60*time.Second, "the tree to complete", func() bool {
		st := d.status(t)
		if st.Counts[loop.Failed] > 0 {
			t.Fatalf("loops failed: %v", st.Counts)
		}
		return st.Counts[loop.Complete] == want
	})
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d", code)
	}
	loops, _ := e.relStore(t)

	titles := map[string]bool{}
	for _, l := range loops {
		titles[l.Title] = true
		if !loop.ValidID(l.ID) || strings.ContainsAny(l.ID, "./") {
			t.Errorf("loop id %q is not a safe id", l.ID)
		}
		for _, p := range []string{l.Artifact, l.Workdir, l.TriggeredBy} {
			if p != "" && !strings.HasPrefix(p, e.home+string(filepath.Separator)) && p != e.dir {
				t.Errorf("loop %s: path %q outside the home", l.ID, p)
			}
		}
	}
	for _, title := range []string{"../../etc/passwd", "/abs/loopr-evil-path", "a/b", "nul\x00byte", "..",
		"$(touch " + canary + "/dollar)", "`touch " + canary + "/backtick`", planTitle} {
		if !titles[title] {
			t.Errorf("no loop titled %q: titles are not stored verbatim", title)
		}
	}

	// Directories named after loops are named by ids.
	for _, dir := range []string{"loops", "worktrees"} {
		entries, err := os.ReadDir(filepath.Join(e.home, dir))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, en := range entries {
			if !loop.ValidID(en.Name()) {
				t.Errorf("%s/%s is not named by a loop id", dir, en.Name())
			}
		}
	}
	// Branches too.
	cmd := exec.Command("git", "for-each-ref", "--format=%(refname:short)", "refs/heads/loopr/")
	cmd.Dir = e.dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, l := range loops {
		names[gitflow.BranchName(l.ID, l.Title)] = true
	}
	for _, b := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(b, "loopr/"); !ok || !names[b] || strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			t.Errorf("branch %q is not loopr/<slug>-<short-id> of a loop", b)
		}
	}

	// Nothing escaped, nothing ran.
	if entries, _ := os.ReadDir(canary); len(entries) > 0 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Errorf("commands in artifact text ran: the canary directory holds %v", names)
	}
	bad := []string{"passwd", "loopr-evil", "dollar", "backtick", "semicolon", "pipe", "deep-", "nul"}
	filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := de.Name()
		if strings.ContainsRune(name, 0) || slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(name, b) }) {
			t.Errorf("a file named after artifact text: %s", p)
		}
		return nil
	})
	for _, p := range []string{"/abs", filepath.Join(e.dir, "etc"), filepath.Join(root, "etc"), filepath.Join(e.home, "etc")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	if now, _ := os.ReadFile("/etc/passwd"); sha256.Sum256(now) != sha256.Sum256(passwd) {
		t.Error("/etc/passwd changed")
	}
	t.Logf("%d loops with hostile titles completed; ids, directories and branches are loopr ids; canary empty", len(loops))
}

// runWithin runs loopr in dir and fails the test if it has not finished
// within d: the commands under test used to block forever.
func runWithin(t *testing.T, d time.Duration, dir string, args ...string) (result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1")
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("loopr %s did not finish within %s", strings.Join(args, " "), d)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run loopr %v: %v", args, err)
	}
	return result{so.String(), se.String(), code}, took
}

// hostileConfig runs hostileagent.sh for every loop; extra is appended.
func hostileConfig(t *testing.T, outside, extra string) string {
	return relSimpleConfig([]string{"sh", abs(t, "testdata/hostileagent.sh"), outside}, extra)
}

// regularFiles returns every regular file under dir, never opening a FIFO
// or following a symlink an agent left.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestHostileArtifactFilesFailTheIteration: plan agents that leave at
// $LOOPR_ARTIFACT a FIFO, a symlink to /proc/self/environ, to a valid plan
// outside the home or to /dev/zero, a 3 MB file, or replace their
// iteration directory with a symlink (testdata/hostileagent.sh). Each
// iteration fails at once with a one-line reason that says what was found
// and what to do; each loop spends exactly its 2 iterations and fails; and
// the daemon's environment (a marker variable) and the outside file's
// text appear nowhere: not in the store, `show`, the export, the API, the
// prompts, the logs, or any file under the home.
func TestHostileArtifactFilesFailTheIteration(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "plan.md"),
		[]byte("# Plan: outside\n\nOUTSIDE-FILE-TEXT\n\n## Specs\n\n### Spec 1: x\n\nOUTSIDE-FILE-TEXT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("env-marker-%d", time.Now().UnixNano())
	e := newRelEnv(t, hostileConfig(t, outside, ""))
	e.env = append(e.env, "LOOPR_E2E_ENV_MARKER="+marker)
	d := e.start()
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.pid())); err == nil && !strings.Contains(string(env), marker) {
		t.Fatal("the marker is not in the daemon's environment: the search below would prove nothing")
	}
	const todo = "; write a regular file at $LOOPR_ARTIFACT"
	want := map[string]string{
		"fifo":    "artifact is a named pipe (FIFO)" + todo,
		"environ": "artifact is a symlink to /proc/self/environ" + todo,
		"outside": "artifact is a symlink to " + filepath.Join(outside, "plan.md") + todo,
		"zero":    "artifact is a symlink to /dev/zero" + todo,
		"huge":    "artifact is 3000000 bytes; the limit is 1048576",
		"dirlink": "artifact: its directory ",
	}
	ctx := context.Background()
	ids := map[string]string{}
	start := time.Now()
	for mode := range want {
		l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Title: mode, Task: "MODE=" + mode, MaxIterations: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids[mode] = l.ID
	}
	relWaitFor(t, 30*time.Second, "every loop to fail", func() bool { return d.status(t).Counts[loop.Failed] == len(want) })
	took := time.Since(start)

	var answers []string
	for mode, id := range ids {
		l, err := d.c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		reason := "max_iterations 2 reached; last: " + want[mode]
		if l.Status != loop.Failed || l.Iteration != 2 || !strings.HasPrefix(l.Reason, reason) || strings.Contains(l.Reason, "\n") {
			t.Errorf("%s: %s at iteration %d, reason %q; want failed at 2 with the one line %q", mode, l.Status, l.Iteration, l.Reason, reason)
		}
		if !strings.Contains(l.Feedback, want[mode]) {
			t.Errorf("%s: feedback does not say what was wrong:\n%s", mode, l.Feedback)
		}
		if mode == "environ" {
			second, _ := os.ReadFile(filepath.Join(e.home, "loops", id, "iterations", "002", "prompt.md"))
			if !strings.Contains(string(second), want[mode]) {
				t.Errorf("the second prompt does not carry the first iteration's reason: the search below would prove nothing")
			}
		}
		answers = append(answers, ok(t, e.dir, "show", id), ok(t, e.dir, "show", "--json", id))
		out, err := d.c.Output(ctx, id, 1<<20)
		answers = append(answers, out)
		if err != nil {
			answers = append(answers, err.Error())
		}
		t.Logf("%-8s %s", mode, l.Reason)
	}
	answers = append(answers, ok(t, e.dir, "export"), ok(t, e.dir, "list", "--json"))
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit %d", code)
	}
	answers = append(answers, ok(t, e.dir, "export"), e.output())
	// Exactly two agent runs per loop: one start per spent iteration.
	loops, evs := e.relStore(t)
	starts := map[string]int{}
	for _, ev := range evs {
		if ev.Kind == loop.EventTransition && ev.To == loop.Running {
			starts[ev.Loop]++
		}
	}
	for _, l := range loops {
		if starts[l.ID] != 2 {
			t.Errorf("%s: %d agent runs, want 2", l.Title, starts[l.ID])
		}
		if l.Parent != "" {
			t.Errorf("a refused artifact spawned child %s %q", l.ID, l.Title)
		}
	}
	files := regularFiles(t, e.home)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, p+": "+string(b))
	}
	all := strings.Join(answers, "\n")
	for _, secret := range []string{marker, "OUTSIDE-FILE-TEXT"} {
		if i := strings.Index(all, secret); i >= 0 {
			t.Errorf("%s leaked: …%s…", secret, all[max(0, i-300):i])
		}
	}
	if !strings.Contains(all, "symlink to /proc/self/environ") {
		t.Error("the reasons are not where the search looked: it proves nothing")
	}
	t.Logf("%d hostile plans failed their 2 iterations in %s; marker and outside text found in none of %d files under the home, %d answers",
		len(want), took.Round(time.Millisecond), len(files), len(answers)-len(files))
}

// TestFIFOArtifactNeitherBlocksCancelNorStop: an agent that leaves a FIFO
// at $LOOPR_ARTIFACT used to block its iteration forever: the loop stayed
// running, `loopr cancel` could not free it and SIGTERM never finished.
// Now the iteration fails at once, cancel answers, and the daemon stops.
func TestFIFOArtifactNeitherBlocksCancelNorStop(t *testing.T) {
	t.Parallel()
	cfg := hostileConfig(t, t.TempDir(), "")
	cfg = strings.Replace(cfg, "backoff_base_secs: 0", "backoff_base_secs: 600", 1)
	cfg = strings.Replace(cfg, "backoff_max_secs: 0", "backoff_max_secs: 600", 1)
	e := newRelEnv(t, cfg)
	d := e.start()
	ctx := context.Background()
	agentDone := func(id string) bool {
		b, _ := os.ReadFile(filepath.Join(e.home, "loops", id, "iterations", "001", "agent.log"))
		return strings.Contains(string(b), "did what MODE said")
	}

	a, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Task: "MODE=fifo", MaxIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "the first agent to finish", func() bool { return agentDone(a.ID) })
	ended := time.Now()
	relWaitFor(t, 5*time.Second, "the iteration to fail (not block on the FIFO)", func() bool {
		l, err := d.c.Get(ctx, a.ID)
		return err == nil && l.Status == loop.Pending && l.Iteration == 2
	})
	failedIn := time.Since(ended)
	r, cancelTook := runWithin(t, 10*time.Second, e.dir, "cancel", a.ID)
	if r.code != 0 {
		t.Errorf("loopr cancel: exit %d: %s", r.code, r.stderr)
	}
	if l, _ := d.c.Get(ctx, a.ID); l.Status != loop.Cancelled {
		t.Errorf("after cancel: %s", l.Status)
	}

	b, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Task: "MODE=fifo", MaxIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "the second agent to finish", func() bool { return agentDone(b.ID) })
	stopStart := time.Now()
	code := d.stop()
	stopTook := time.Since(stopStart)
	if code != 0 || stopTook > 10*time.Second {
		t.Errorf("SIGTERM with a FIFO artifact: exit %d after %s; want 0 within 10s", code, stopTook)
	}
	t.Logf("FIFO artifact: iteration failed %s after the agent ended; cancel answered in %s; SIGTERM exited in %s",
		failedIn.Round(time.Millisecond), cancelTook.Round(time.Millisecond), stopTook.Round(time.Millisecond))
}

// TestApproveUsesTheValidatedCopy: a plan awaiting approval whose agent's
// file was replaced by a FIFO after validation is approved from the copy
// loopr kept (loops/<id>/accepted/), at once, and the child's prompt holds
// the validated text. Approve used to read the agent's file inside a store
// write transaction: the FIFO blocked it and every other write. A copy
// that was itself replaced is refused with one line, and writes go on.
func TestApproveUsesTheValidatedCopy(t *testing.T) {
	t.Parallel()
	cfg := hostileConfig(t, t.TempDir(), "")
	cfg = strings.Replace(cfg, "plan: {require_approval: false}", "plan: {require_approval: true}", 1)
	e := newRelEnv(t, cfg)
	d := e.start()
	ctx := context.Background()
	awaiting := func() loop.Loop {
		l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Plan, Task: "MODE=good"})
		if err != nil {
			t.Fatal(err)
		}
		relWaitFor(t, 20*time.Second, "the plan to await approval", func() bool {
			got, err := d.c.Get(ctx, l.ID)
			return err == nil && got.Status == loop.AwaitingApproval
		})
		l, _ = d.c.Get(ctx, l.ID)
		if want := filepath.Join(e.home, "loops", l.ID, "accepted", "001-plan.md"); l.Artifact != want {
			t.Fatalf("artifact %q, want the accepted copy %q", l.Artifact, want)
		}
		return l
	}
	toFIFO := func(path string) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The agent's file replaced: approve reads the copy.
	p := awaiting()
	toFIFO(filepath.Join(e.home, "loops", p.ID, "iterations", "001", "plan.md"))
	actx, cancel := context.WithTimeout(ctx, testslack.Scale(10*time.Second))
	start := time.Now()
	res, err := d.c.Act(actx, p.ID, api.ActionApprove, api.ActionRequest{})
	took := time.Since(start)
	cancel()
	if err != nil || res.Loop.Status != loop.Complete || len(res.Affected) != 1 {
		t.Fatalf("approve with the agent's file a FIFO: %v, %+v; want complete with 1 child", err, res)
	}
	child := res.Affected[0]
	prompt := filepath.Join(e.home, "loops", child, "iterations", "001", "prompt.md")
	relWaitFor(t, 20*time.Second, "the child's prompt", func() bool {
		b, _ := os.ReadFile(prompt)
		return strings.Contains(string(b), "VALIDATED-SECTION-TEXT") && strings.Contains(string(b), "The plan as validated.")
	})

	// The copy itself replaced: refused, one line, nothing blocks.
	q := awaiting()
	toFIFO(q.Artifact)
	actx, cancel = context.WithTimeout(ctx, testslack.Scale(10*time.Second))
	_, err = d.c.Act(actx, q.ID, api.ActionApprove, api.ActionRequest{})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "001-plan.md is a named pipe (FIFO), not a regular file; iterate or reject loop "+q.ID) || strings.Contains(err.Error(), "\n") {
		t.Errorf("approve with the copy a FIFO: %v; want one line naming the FIFO", err)
	}
	if _, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Task: "writes still work"}); err != nil {
		t.Errorf("create after the refused approve: %v", err)
	}
	if l, _ := d.c.Get(ctx, q.ID); l.Status != loop.AwaitingApproval {
		t.Errorf("after the refused approve: %s, want still awaiting approval", l.Status)
	}
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit %d", code)
	}
	t.Logf("approve with the agent's file a FIFO took %s; child prompt has the validated text; a FIFO copy is refused: %v", took.Round(time.Millisecond), err)
}

// TestConfigFileThatIsNotARegularFile: loopr.yml replaced by a FIFO or a
// link to /dev/zero used to hang `loopr config check`, the daemon's start
// and its hot reload, or fill the memory. Now each gives one line naming
// the file, exit 2 at once; a running daemon refuses the reload, keeps its
// configuration, and applies the next valid file.
func TestConfigFileThatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "loopr.yml")
	if err := syscall.Mkfifo(cfgPath, 0o644); err != nil {
		t.Fatal(err)
	}
	const fifoMsg = "loopr.yml: a named pipe (FIFO), not a regular file; make it a regular file"
	const zeroMsg = "loopr.yml: a character device, not a regular file; make it a regular file"
	check := func(want string, args ...string) {
		r, took := runWithin(t, 10*time.Second, dir, args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("loopr %s: exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(args, " "), r.code, r.stderr, want)
		}
		t.Logf("loopr %s: exit %d in %s: %s", strings.Join(args, " "), r.code, took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	}
	check(fifoMsg, "config", "check")
	check(fifoMsg, "daemon")
	os.Remove(cfgPath)
	if err := os.Symlink("/dev/zero", cfgPath); err != nil {
		t.Fatal(err)
	}
	check(zeroMsg, "config", "check")
	check(zeroMsg, "daemon")

	// At reload.
	e := newRelEnv(t, relSimpleConfig([]string{"true"}, ""))
	cfgPath = filepath.Join(e.dir, "loopr.yml")
	good, _ := os.ReadFile(cfgPath)
	d := e.start()
	for _, tc := range []struct {
		name, msg string
		plant     func() error
	}{
		{"fifo", fifoMsg, func() error { return syscall.Mkfifo(cfgPath, 0o644) }},
		{"/dev/zero", zeroMsg, func() error { return os.Symlink("/dev/zero", cfgPath) }},
	} {
		if err := os.Remove(cfgPath); err != nil {
			t.Fatal(err)
		}
		if err := tc.plant(); err != nil {
			t.Fatal(err)
		}
		relWaitFor(t, 10*time.Second, "the refused "+tc.name+" reload in the log", func() bool {
			return strings.Contains(e.output(), tc.msg)
		})
		sctx, cancel := context.WithTimeout(context.Background(), testslack.Scale(5*time.Second))
		st, err := d.c.Status(sctx)
		cancel()
		if err != nil || st.MaxLoops != 4 {
			t.Errorf("after the %s reload: %v, max_loops %d; want the daemon serving the old 4", tc.name, err, st.MaxLoops)
		}
	}
	if rss, _, err := relRSS(d.pid()); err == nil && rss > 200<<10 {
		t.Errorf("daemon RSS %d KiB after the /dev/zero reload", rss)
	}
	os.Remove(cfgPath)
	fixed := strings.Replace(string(good), "max_loops: 4", "max_loops: 9", 1)
	if err := os.WriteFile(cfgPath, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 10*time.Second, "the fixed file to be applied", func() bool { return d.status(t).MaxLoops == 9 })
	start := time.Now()
	if code := d.stop(); code != 0 || time.Since(start) > 10*time.Second {
		t.Errorf("stop: exit %d after %s", code, time.Since(start))
	}
}
