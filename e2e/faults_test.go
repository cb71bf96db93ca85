package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/loop"
)

// relSimpleConfig runs every loop with agent (argv), no validation, no
// approval, no git, no disk quota and no retry wait; extra is appended.
func relSimpleConfig(agent []string, extra string) string {
	return fmt.Sprintf(`concurrency:
  max_loops: 4
  max_api_calls: 4
retry:
  backoff_base_secs: 0
  backoff_factor: 1
  backoff_max_secs: 0
agent:
  command: %s
  timeout_secs: 60
loops:
  plan: {require_approval: false}
  ralph: {validate: []}
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
%s`, relArgv(agent...), extra)
}

// relMountTmpfs mounts a tmpfs of size MiB at a new directory and unmounts
// it when the test ends. It skips the test, saying why, when it cannot.
func relMountTmpfs(t *testing.T, mib int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: filling a disk needs a small tmpfs, and mounting one needs root (CI runs as root)")
	}
	mnt := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0700", mib), "tmpfs", mnt).CombinedOutput()
	if err != nil {
		t.Skipf("skipped: cannot mount a tmpfs (%v: %s); this test needs root with mount rights", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s; trying a lazy unmount", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// TestFaultDiskFull fills the home's file system (a 48 MiB tmpfs) while
// the daemon runs loops and a client keeps submitting new ones. The daemon
// reports the full disk (status disk_full, disk_low and a warning),
// refuses new loops with a 503 whose message says "disk full", starts no
// loop, answers writes that meet ENOSPC in bbolt with the same 503 (the
// transaction rolled back), and never answers 500. Once space returns it
// resumes by itself: every accepted loop completes at iteration 1 (a full
// disk costs no attempt), none is lost, and the store passes its check.
func TestFaultDiskFull(t *testing.T) {
	t.Parallel()
	mnt := relMountTmpfs(t, 48)
	e := newRelEnv(t, relSimpleConfig([]string{"sh", "-c", "echo working on it; sleep 0.2"}, ""))
	e.home = mnt
	e.args = []string{"--home", mnt}
	d := e.start()
	ctx := context.Background()
	var mu sync.Mutex // guards accepted and refused
	accepted := 0
	var refused []string
	// is503 checks that err is the full disk's 503.
	is503 := func(what string, err error) {
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 503 || ae.Code != api.CodeUnavailable || !strings.Contains(ae.Message, "disk full") {
			t.Errorf("%s: %v; want a 503 unavailable saying disk full", what, err)
		}
	}
	submit := func(title string, runnableAt time.Time) (loop.Loop, error) {
		l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Title: title, Task: "Do " + title + ".", RunnableAt: runnableAt})
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			accepted++
		} else {
			refused = append(refused, err.Error())
		}
		return l, err
	}
	// A loop that waits, for actions while the disk is full.
	target, err := submit("target", time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	// A client keeps submitting while the disk fills.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := submit(fmt.Sprintf("during %d", i), time.Time{}); err != nil {
				is503("create while the disk fills", err)
			}
		}
	})
	time.Sleep(500 * time.Millisecond)
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs ended with %v, want ENOSPC", err)
	}
	filled := time.Now()
	var st api.Status
	relWaitFor(t, 10*time.Second, "status to report the full disk", func() bool {
		st = d.status(t)
		return st.DiskFull
	})
	t.Logf("full disk reported %s after the fill: disk_low=%v free=%.4f GB warning=%q", time.Since(filled).Round(time.Millisecond), st.DiskLow, st.DiskFreeGB, st.Warning)
	if !st.DiskLow || !strings.Contains(st.Warning, "disk full") {
		t.Errorf("status while full: disk_low=%v warning=%q; want disk_low and a disk full warning", st.DiskLow, st.Warning)
	}
	time.Sleep(300 * time.Millisecond) // the writer meets the full disk too
	close(stop)
	wg.Wait()

	_, err = submit("while full", time.Time{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, "disk full") {
		t.Fatalf("create on a full disk: %v; want 503 disk full", err)
	}
	t.Logf("create on a full disk: %d %s: %s", ae.Status, ae.Code, ae.Message)

	// No loop starts while the disk is full. Those in flight finish; one
	// whose result cannot be recorded stays running until there is room.
	time.Sleep(3 * time.Second)
	all, err := d.c.List(ctx, api.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waiting := 0
	for _, l := range all {
		// A tick that measured the disk just before the fill may still
		// start a loop; give it a generous moment on a loaded machine.
		if l.StartedAt.After(filled.Add(2 * time.Second)) {
			t.Errorf("loop %s started at %s, %s after the disk was full", l.ID, l.StartedAt.Format(time.RFC3339Nano), l.StartedAt.Sub(filled))
		}
		if l.Status == loop.Pending {
			waiting++
		}
	}
	if waiting == 0 {
		t.Error("no loop waits: the test did not exercise the full disk's gate")
	}
	view, err := d.c.Scheduler(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range view.Rows {
		if !strings.Contains(strings.Join(r.Reasons, ","), "disk_low") {
			t.Errorf("loop %s waits without the disk_low reason: %v", r.ID, r.Reasons)
		}
	}

	// Writes that are not refused up front meet ENOSPC once bbolt needs a
	// new page (each action appends to the journal): they are rolled back
	// and answered 503 too.
	actOK, actFull := 0, 0
	var fullMsg string
	for i := 0; i < 500 && actFull < 20; i++ {
		action := api.ActionPause
		if cur, err := d.c.Get(ctx, target.ID); err == nil && cur.Status == loop.Paused {
			action = api.ActionResume
		}
		_, err := d.c.Act(ctx, target.ID, action, api.ActionRequest{})
		if err == nil {
			actOK++
			continue
		}
		is503(action+" on a full disk", err)
		actFull++
		fullMsg = err.Error()
	}
	t.Logf("actions on a full disk: %d committed (bbolt reused free pages), %d refused: %s", actOK, actFull, fullMsg)
	if actFull == 0 {
		t.Error("no action met the full disk; the test did not exercise ENOSPC in bbolt")
	}
	if st := d.status(t); st.PID != d.pid() || d.exited() {
		t.Fatalf("the daemon did not survive the full disk")
	}

	// Space returns: the daemon resumes by itself.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 10*time.Second, "the full disk to clear", func() bool { return !d.status(t).DiskFull })
	for i := range 5 {
		if _, err := submit(fmt.Sprintf("after %d", i), time.Time{}); err != nil {
			t.Fatalf("create after space returned: %v", err)
		}
	}
	if _, err := d.c.Act(ctx, target.ID, api.ActionCancel, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := accepted - 1 // all but the cancelled target
	mu.Unlock()
	relWaitFor(t, 60*time.Second, "every accepted loop to complete", func() bool {
		st := d.status(t)
		if st.Counts[loop.Failed] > 0 {
			t.Fatalf("loops failed: %v", st.Counts)
		}
		return st.Counts[loop.Complete] == want
	})
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d after SIGTERM, want 0", code)
	}
	loops, evs := e.relStore(t)
	if len(loops) != accepted {
		t.Errorf("store holds %d loops, want the %d accepted ones", len(loops), accepted)
	}
	retried := 0
	for _, l := range loops {
		if l.Iteration != 1 {
			t.Errorf("loop %s ended at iteration %d: the full disk cost an attempt", l.ID, l.Iteration)
		}
	}
	for _, ev := range evs {
		if strings.Contains(ev.Message, "disk is full") || strings.Contains(ev.Message, "could not be recorded") {
			retried++
		}
	}
	if p := relJournalProblems(loops, evs); len(p) > 0 {
		t.Errorf("journal disagrees with the records:\n%s", strings.Join(p, "\n"))
	}
	mu.Lock()
	t.Logf("disk full: %d loops accepted, %d submissions refused with 503; %d iterations requeued at no cost; store check ok", accepted, len(refused), retried)
	mu.Unlock()
}

func relFirst(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestFaultNewerSchema: a store written by a newer loopr (schema version
// 9, or 99…) is refused by the daemon and the CLI with a clear message and exit 1,
// and the file is left byte for byte as it was.
func TestFaultNewerSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok(t, dir, "import", abs(t, "testdata/seed004.jsonl"))
	db := filepath.Join(dir, ".loopr", "loopr.db")
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// The meta bucket's "schema_version" key is followed by its value, the
	// JSON number of the layout, in the bbolt leaf (data pages carry no
	// checksum). A newer loopr wrote it: make every digit a 9 (same length).
	m := regexp.MustCompile(`schema_version([0-9]+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no schema_version in the store file")
	}
	current := string(m[1])
	newer := strings.Repeat("9", len(current))
	if newer == current {
		t.Skipf("schema version %s: no newer version of the same length", current)
	}
	data = bytes.ReplaceAll(data, m[0], []byte("schema_version"+newer))
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantMsg := fmt.Sprintf("store schema version %s is newer than this loopr supports (%s); upgrade loopr", newer, current)
	before := sha256.Sum256(data)
	fi0, _ := os.Stat(db)

	for _, args := range [][]string{{"daemon"}, {"list"}, {"status"}} {
		r := run(t, dir, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, wantMsg) {
			t.Errorf("loopr %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(args, " "), r.code, r.stderr, wantMsg)
		}
		t.Logf("loopr %s: exit %d: %s", strings.Join(args, " "), r.code, strings.TrimSpace(r.stderr))
	}
	after, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	fi1, _ := os.Stat(db)
	if sha256.Sum256(after) != before || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Error("the store file changed")
	}
	for _, name := range []string{"loopr.sock", "daemon.pid"} {
		if _, err := os.Stat(filepath.Join(dir, ".loopr", name)); err == nil {
			t.Errorf("%s left behind", name)
		}
	}
}

// TestFaultCorruptConfig: a broken loopr.yml stops the daemon at start
// with exit 2 and the file's line; broken while the daemon runs, the
// reload is refused (log and journal name the line) and the configuration
// in force stays, until a valid file replaces it.
func TestFaultCorruptConfig(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, yml, want string }{
		{"bad value", "concurrency:\n  max_loops: lots\n", "loopr.yml:2: concurrency.max_loops:"},
		{"syntax", "scheduler:\n  poll_interval_secs: 1\n  priority: [\n", "loopr.yml:"},
		{"unknown key", "agent:\n  comand: [true]\n", "loopr.yml:2: agent.comand: unknown key"},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte(tc.yml), 0o644)
		r := run(t, dir, "", "daemon")
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: loopr daemon exit %d, stderr %q; want exit 2 and one line with %q", tc.name, r.code, r.stderr, tc.want)
		}
		t.Logf("%s: exit %d: %s", tc.name, r.code, strings.TrimSpace(r.stderr))
		if _, err := os.Stat(filepath.Join(dir, ".loopr", "loopr.db")); err == nil {
			t.Errorf("%s: the refused daemon created a store", tc.name)
		}
	}

	// At reload.
	e := newRelEnv(t, relSimpleConfig([]string{"true"}, "")+"scheduler:\n  poll_interval_secs: 1\n")
	cfgPath := filepath.Join(e.dir, "loopr.yml")
	good, _ := os.ReadFile(cfgPath)
	d := e.start()
	if st := d.status(t); st.MaxLoops != 4 {
		t.Fatalf("max_loops %d, want 4", st.MaxLoops)
	}
	broken := strings.Replace(string(good), "max_loops: 4", "max_loops: lots", 1)
	if err := os.WriteFile(cfgPath, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 10*time.Second, "the refused reload in the log", func() bool {
		return strings.Contains(e.output(), "config reload refused")
	})
	logged := e.output()
	if !strings.Contains(logged, "loopr.yml:2: concurrency.max_loops") {
		t.Errorf("the refused reload does not name the line:\n%s", e.tail(10))
	}
	st := d.status(t)
	if st.MaxLoops != 4 || st.PID != d.pid() {
		t.Errorf("after a broken reload: max_loops %d pid %d; want the old 4 from pid %d", st.MaxLoops, st.PID, d.pid())
	}
	if _, err := d.c.Create(context.Background(), api.CreateRequest{Type: loop.Ralph, Task: "still works"}); err != nil {
		t.Errorf("create after a broken reload: %v", err)
	}
	fixed := strings.Replace(string(good), "max_loops: 4", "max_loops: 9", 1)
	if err := os.WriteFile(cfgPath, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 10*time.Second, "the fixed file to be applied", func() bool { return d.status(t).MaxLoops == 9 })
}

// TestFaultAgentMissing: an agent binary that does not exist fails the
// loop with that reason; the daemon keeps serving and runs other loops.
func TestFaultAgentMissing(t *testing.T) {
	t.Parallel()
	e := newRelEnv(t, relSimpleConfig([]string{"/nonexistent/loopr-agent", "-p"},
		"agents:\n  healthy: {preset: command, command: [\"true\"]}\ntypes:\n  chore: {agent: healthy, max_iterations: 1}\n"))
	d := e.start()
	ctx := context.Background()
	l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Task: "Use the missing agent.", MaxIterations: 2})
	if err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "the loop to fail", func() bool {
		got, err := d.c.Get(ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		l = got
		return l.Status == loop.Failed
	})
	if !strings.Contains(l.Reason, "agent binary not found: /nonexistent/loopr-agent") {
		t.Errorf("reason %q does not say the agent binary is missing", l.Reason)
	}
	t.Logf("failed loop: %s", l.Reason)
	chore, err := d.c.Create(ctx, api.CreateRequest{Type: "chore", Task: "Run a healthy agent."})
	if err != nil {
		t.Fatal(err)
	}
	relWaitFor(t, 20*time.Second, "a healthy loop to complete", func() bool {
		got, _ := d.c.Get(ctx, chore.ID)
		return got.Status == loop.Complete
	})
	if st := d.status(t); st.PID != d.pid() || d.exited() {
		t.Errorf("daemon pid %d, want %d still running", st.PID, d.pid())
	}
}

// TestFaultNoGit: with git.worktrees on, a workspace that is not a git
// repository, or a PATH without git, makes the daemon warn (log and
// status) and run loops in the workspace directly.
func TestFaultNoGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	cfg := strings.Replace(relSimpleConfig([]string{"true"}, ""), "worktrees: false", "worktrees: true", 1)
	cases := []struct {
		name string
		prep func(t *testing.T, e *relEnv)
		want string
	}{
		{"not a repository", func(*testing.T, *relEnv) {}, "not a git repository"},
		{"git not on PATH", func(t *testing.T, e *relEnv) {
			for _, args := range [][]string{{"init", "-q"}, {"add", "loopr.yml"},
				{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "init"}} {
				cmd := exec.Command("git", args...)
				cmd.Dir = e.dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			// A PATH with sh and true, and no git.
			pathDir := t.TempDir()
			for _, name := range []string{"sh", "true"} {
				p, err := exec.LookPath(name)
				if err != nil {
					t.Fatal(err)
				}
				os.Symlink(p, filepath.Join(pathDir, name))
			}
			for i, kv := range e.env {
				if strings.HasPrefix(kv, "PATH=") {
					e.env[i] = "PATH=" + pathDir
				}
			}
		}, "git"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRelEnv(t, cfg)
			tc.prep(t, e)
			d := e.start()
			st := d.status(t)
			if !strings.Contains(st.Warning, "git worktrees off") || !strings.Contains(st.Warning, tc.want) {
				t.Errorf("status warning %q; want git worktrees off, mentioning %q", st.Warning, tc.want)
			}
			if !strings.Contains(e.output(), "git worktrees off") {
				t.Errorf("no warning in the log:\n%s", e.tail(10))
			}
			t.Logf("warning: %s", st.Warning)
			ctx := context.Background()
			l, err := d.c.Create(ctx, api.CreateRequest{Type: loop.Ralph, Task: "Work without worktrees."})
			if err != nil {
				t.Fatal(err)
			}
			relWaitFor(t, 20*time.Second, "the loop to complete", func() bool {
				l, _ = d.c.Get(ctx, l.ID)
				return l.Status == loop.Complete
			})
			if l.Workdir != e.dir {
				t.Errorf("workdir %q, want the workspace %q", l.Workdir, e.dir)
			}
		})
	}
}
