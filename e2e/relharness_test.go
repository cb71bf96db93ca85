package e2e

// The harness of the reliability suites (crash, faults, load, security):
// a workspace with a loopr.yml, a real `loopr daemon` process started,
// SIGKILLed and restarted on it, and a client on its socket. Every name
// here starts with rel so it never collides with other e2e helpers.

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/client"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// relEnv is a workspace (not a git repository unless the test makes it
// one) whose daemons log to one file outside it.
type relEnv struct {
	t    *testing.T
	dir  string   // the workspace, holding loopr.yml
	home string   // <dir>/.loopr unless the test moves it
	log  string   // every daemon's stdout and stderr, appended
	env  []string // the daemon's environment
	args []string // extra arguments before "daemon" (e.g. --home)
	// starts holds when each daemon was started; daemon n (from 0) runs
	// with LOOPR_TEST_EPOCH=n in its environment, which its agents inherit.
	starts []time.Time
}

// newRelEnv writes cfg as <dir>/loopr.yml in a fresh workspace.
func newRelEnv(t *testing.T, cfg string) *relEnv {
	t.Helper()
	e := &relEnv{t: t, dir: t.TempDir()}
	e.home = filepath.Join(e.dir, ".loopr")
	e.log = filepath.Join(t.TempDir(), "daemon.log")
	e.env = append(os.Environ(), "LOOPR_HOME=", "NO_COLOR=1")
	t.Cleanup(func() {
		if t.Failed() && e.output() != "" {
			t.Logf("daemon log (last 80 lines):\n%s", e.tail(80))
		}
	})
	if cfg != "" {
		if err := os.WriteFile(filepath.Join(e.dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// relDaemon is one `loopr daemon` process.
type relDaemon struct {
	e       *relEnv
	cmd     *exec.Cmd
	c       *client.Client
	done    chan struct{} // closed once the process is reaped
	started time.Time     // when the process was started
}

// relDaemonCmd returns the command that runs `loopr daemon` in e.
func (e *relEnv) relDaemonCmd(extra ...string) (*exec.Cmd, *os.File) {
	e.t.Helper()
	logf, err := os.OpenFile(e.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	args := append(append([]string{}, e.args...), "daemon")
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.dir
	cmd.Env = e.env
	// A file, not a pipe: Wait must not wait for agents a killed daemon
	// leaves behind.
	cmd.Stdout, cmd.Stderr = logf, logf
	return cmd, logf
}

// start runs a daemon and returns once it answers on its socket.
func (e *relEnv) start(extra ...string) *relDaemon {
	e.t.Helper()
	cmd, logf := e.relDaemonCmd(extra...)
	defer logf.Close()
	cmd.Env = append(cmd.Env, fmt.Sprintf("LOOPR_TEST_EPOCH=%d", len(e.starts)))
	d := &relDaemon{e: e, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	e.starts = append(e.starts, d.started)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	e.t.Cleanup(func() { d.stop() })
	deadline := time.Now().Add(testslack.Scale(20 * time.Second))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := client.Dial(ctx, filepath.Join(e.home, "loopr.sock"))
		cancel()
		if err == nil && c.DaemonPID() == cmd.Process.Pid {
			d.c = c
			return d
		}
		if c != nil {
			c.Close()
		}
		if d.exited() {
			e.t.Fatalf("daemon exited (%v) before it answered; log:\n%s", cmd.ProcessState, e.tail(40))
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("daemon did not answer within 20s (last: %v); log:\n%s", err, e.tail(40))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pid is the daemon's process id.
func (d *relDaemon) pid() int { return d.cmd.Process.Pid }

func (d *relDaemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// kill9 kills the daemon alone with SIGKILL, as a crash would: its agents
// live on as orphans until the next daemon's recovery.
func (d *relDaemon) kill9() {
	if d.c != nil {
		d.c.Close()
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// stop sends SIGTERM, SIGKILL after 15s, and returns the exit code (-1
// when it died of a signal).
func (d *relDaemon) stop() int {
	if d.c != nil {
		d.c.Close()
	}
	if !d.exited() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(testslack.Scale(15 * time.Second)):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	return d.cmd.ProcessState.ExitCode()
}

// status asks the daemon for its status.
func (d *relDaemon) status(t *testing.T) api.Status {
	t.Helper()
	st, err := d.c.Status(context.Background())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}

// output returns everything the env's daemons logged.
func (e *relEnv) output() string {
	b, _ := os.ReadFile(e.log)
	return string(b)
}

// tail returns the last n lines of the daemons' log.
func (e *relEnv) tail(n int) string {
	lines := strings.Split(strings.TrimRight(e.output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// relStore opens e's store read-only (no daemon may hold it), checks it,
// and returns every loop and the whole journal.
func (e *relEnv) relStore(t *testing.T) ([]loop.Loop, []loop.Event) {
	t.Helper()
	st, err := store.Open(filepath.Join(e.home, "loopr.db"), store.Options{Timeout: 5 * time.Second, ReadOnly: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer st.Close()
	if err := st.Check(); err != nil {
		t.Errorf("store check: %v", err)
	}
	var loops []loop.Loop
	var evs []loop.Event
	err = st.View(func(tx *store.Tx) error {
		if err := tx.ForEach(func(l loop.Loop) bool { loops = append(loops, l); return true }); err != nil {
			return err
		}
		var err error
		evs, err = tx.EventsSince(0, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return loops, evs
}

// relCheckStore opens e's store read-only and runs store.Check.
func (e *relEnv) relCheckStore() error {
	st, err := store.Open(filepath.Join(e.home, "loopr.db"), store.Options{Timeout: 5 * time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Check()
}

// relJournalProblems checks the journal against the records: each loop has
// exactly one created event, first; the last transition's `to` is the
// loop's status; and events name only loops that exist.
func relJournalProblems(loops []loop.Loop, evs []loop.Event) []string {
	var problems []string
	byLoop := map[string][]loop.Event{}
	for _, ev := range evs {
		if ev.Loop != "" {
			byLoop[ev.Loop] = append(byLoop[ev.Loop], ev)
		}
	}
	known := map[string]bool{}
	for _, l := range loops {
		known[l.ID] = true
		es := byLoop[l.ID]
		created := 0
		for _, ev := range es {
			if ev.Kind == loop.EventCreated || ev.Kind == loop.EventImported {
				created++
			}
		}
		if created != 1 {
			problems = append(problems, fmt.Sprintf("loop %s: %d created events, want 1", l.ID, created))
		}
		if len(es) > 0 && es[0].Kind != loop.EventCreated && es[0].Kind != loop.EventImported {
			problems = append(problems, fmt.Sprintf("loop %s: first event is %s, want created", l.ID, es[0].Kind))
		}
		last := loop.Status("")
		for _, ev := range es {
			if ev.To != "" && (ev.Kind == loop.EventTransition || ev.Kind == loop.EventCreated || ev.Kind == loop.EventImported) {
				last = ev.To
			}
		}
		if last != l.Status {
			problems = append(problems, fmt.Sprintf("loop %s: last event says %q, record says %q", l.ID, last, l.Status))
		}
	}
	for id := range byLoop {
		if !known[id] {
			problems = append(problems, fmt.Sprintf("events of unknown loop %s", id))
		}
	}
	return problems
}

// relProcAlive reports whether pid is a live (not zombie) process whose
// command line contains marker (pids are reused).
func relProcAlive(pid int, marker string) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		if f := strings.Fields(s[i+1:]); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return false
		}
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(cmdline), marker)
}

// relRSS returns a process's resident set (VmRSS) and its peak (VmHWM) in KiB.
func relRSS(pid int) (rss, hwm int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		switch k {
		case "VmRSS":
			rss = n
		case "VmHWM":
			hwm = n
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc/<pid>/status")
	}
	return rss, hwm, nil
}

// relArgv is argv as a YAML flow sequence (JSON is YAML).
func relArgv(argv ...string) string {
	b, _ := json.Marshal(argv)
	return string(b)
}

// relWaitFor polls cond every 50ms until it holds, failing after timeout.
func relWaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
