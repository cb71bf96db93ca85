package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
)

// agentRun is one agent or validate process of the crash tests, from its
// log lines.
type agentRun struct {
	id, typ    string
	iteration  int
	pid        int
	daemon     int       // which daemon of the test started it (LOOPR_E2E_DAEMON)
	start, end time.Time // end is zero when the run never finished
}

// readRuns parses the log of agent.sh and validate.sh: "start|end <id>
// <iteration> <unix-ns> <pid> <type|validate> <daemon>" lines, one write
// each.
func readRuns(t *testing.T, path string) []*agentRun {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []*agentRun
	open := map[int]*agentRun{} // by pid
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 7 {
			t.Fatalf("agent log line %q: want 7 fields", sc.Text())
		}
		it, err1 := strconv.Atoi(f[2])
		ns, err2 := strconv.ParseInt(f[3], 10, 64)
		pid, err3 := strconv.Atoi(f[4])
		daemon, err4 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			t.Fatalf("agent log line %q: bad number", sc.Text())
		}
		at := time.Unix(0, ns)
		switch f[0] {
		case "start":
			r := &agentRun{id: f[1], typ: f[5], iteration: it, pid: pid, daemon: daemon, start: at}
			runs = append(runs, r)
			open[pid] = r
		case "end":
			r := open[pid]
			if r == nil || r.id != f[1] || r.iteration != it {
				t.Fatalf("agent log: %q ends a run that did not start", sc.Text())
			}
			r.end = at
			delete(open, pid)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return runs
}

// TestCrashRecovery kills the daemon with SIGKILL twice while agents run
// (issue 3, item 2) — once while spec agents run, once while ralph agents
// run — and stops it cleanly with SIGTERM once while phase agents run,
// restarting it each time. The tree still completes: every loop is created
// once and completes once, no child is created twice, no two agent runs of
// one loop overlap, no agent from before a crash survives the restart (and
// none outlives a clean stop), every loop interrupted by a crash was charged
// one iteration while a clean stop cost none, and the store passes bbolt's
// consistency check.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	crashScenario{agentSleep: 2 * time.Second, stops: []stop{{kind: loop.Spec}, {kind: loop.Phase, clean: true}, {kind: loop.Ralph}}}.run(t)
}

// TestCrashDuringValidation kills the daemon while ralph loops run a slow
// validate command (a test suite): the restarted daemon must stop those
// commands too before it runs the loops again in the same worktrees.
func TestCrashDuringValidation(t *testing.T) {
	t.Parallel()
	crashScenario{agentSleep: 200 * time.Millisecond, validateSleep: 2 * time.Second, stops: []stop{{kind: "validate"}}}.run(t)
}

// crashScenario runs a plan tree with agents (and, when validateSleep is
// set, ralph validate commands) that take their time and log when they
// start and end, and stops the daemon once for each entry of stops, then
// starts a new one.
type crashScenario struct {
	agentSleep, validateSleep time.Duration
	stops                     []stop
}

// stop is one end of a daemon: when at least two runs of kind (a loop type,
// or "validate") are in flight, one of them fresh, SIGKILL (a crash) or
// SIGTERM (clean).
type stop struct {
	kind  string
	clean bool
}

// sleepOf is how long a run of kind takes.
func (sc crashScenario) sleepOf(kind string) time.Duration {
	if kind == "validate" {
		return sc.validateSleep
	}
	return sc.agentSleep
}

func (sc crashScenario) run(t *testing.T) {
	began := time.Now()
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }
	runLog := filepath.Join(t.TempDir(), "runs.log")
	validate := validateCmd(t)
	if sc.validateSleep > 0 {
		validate = validateCmd(t, runLog, secs(sc.validateSleep))
	}
	r := newRepo(t, treeConfig(t, 5, validate, "crash", runLog, secs(sc.agentSleep)))
	before := r.checkout(t)
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Survive crashes", "--json"), &plan)

	// crashes[n] is how daemon n ended, when it did before the last one.
	type crashPoint struct {
		clean             bool
		killed, restarted time.Time
	}
	crashes := map[int]crashPoint{}
	for _, at := range sc.stops {
		kind := at.kind
		// Wait for two runs of kind, one with well over a second left, so
		// that only the new daemon can have ended it before its time.
		fresh := sc.sleepOf(kind) - 1300*time.Millisecond
		waitFor(t, 30*time.Second, "two running "+kind+" runs", func() bool {
			if d.exited() {
				t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
			}
			running, young := 0, false
			for _, run := range readRuns(t, runLog) {
				if run.daemon == d.n && run.typ == kind && run.end.IsZero() && agentAlive(run.pid) {
					running++
					young = young || time.Since(run.start) < fresh
				}
			}
			return running >= 2 && young
		})
		how := "crash"
		if at.clean {
			how = "clean stop"
			if code := d.stop(); code != 0 {
				t.Errorf("daemon %d: exit code %d after SIGTERM, want 0", d.n, code)
			}
		} else {
			d.crash(t)
		}
		cp := crashPoint{clean: at.clean, killed: time.Now()}
		inFlight, orphans := 0, 0
		for _, run := range readRuns(t, runLog) {
			if run.daemon == d.n && run.end.IsZero() {
				inFlight++
				if agentAlive(run.pid) {
					orphans++
				}
			}
		}
		t.Logf("%s of daemon %d while %s runs: %d runs unfinished, %d of them alive", how, d.n, kind, inFlight, orphans)
		if at.clean && orphans > 0 {
			t.Errorf("%d agents outlived daemon %d, which stopped cleanly", orphans, d.n)
		}
		cp.restarted = time.Now()
		crashes[d.n] = cp
		d = startDaemon(t, r)
	}

	waitEvery(t, 60*time.Second, slowPoll, "the plan tree to settle", func() bool {
		if d.exited() {
			t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
		}
		st := status(t, r)
		return settled(st) && st.Counts[loop.Complete] > 0
	})
	loops := list(t, r)
	checkTree(t, loops)
	byID := map[string]loop.Loop{}
	for _, l := range loops {
		byID[l.ID] = l
	}

	runs := readRuns(t, runLog)
	// next returns the run of the same loop that started after run, or nil.
	next := func(run *agentRun) *agentRun {
		var n *agentRun
		for _, o := range runs {
			if o.id == run.id && o.start.After(run.start) && (n == nil || o.start.Before(n.start)) {
				n = o
			}
		}
		return n
	}
	perLoop := map[string][]*agentRun{}
	for _, run := range runs {
		if _, ok := byID[run.id]; !ok {
			t.Errorf("something ran for loop %s, which is not in the store", run.id)
		}
		interval := *run
		cp, crashed := crashes[run.daemon]
		switch {
		case !crashed:
			if run.end.IsZero() {
				t.Errorf("%s run of loop %s (iteration %d, pid %d) by daemon %d never finished, and no crash explains it", run.typ, run.id, run.iteration, run.pid, run.daemon)
			}
		case cp.clean && run.end.After(cp.killed):
			t.Errorf("%s run of loop %s (iteration %d) ended at %s, after its daemon %d had stopped cleanly at %s",
				run.typ, run.id, run.iteration, run.end.Format("15:04:05.000"), run.daemon, cp.killed.Format("15:04:05.000"))
		case cp.clean && run.end.IsZero():
			// Stopped by its daemon; the next daemon runs the same
			// iteration again: a clean stop costs no attempt.
			if n := next(run); n == nil || n.iteration != run.iteration {
				t.Errorf("loop %s was stopped cleanly at iteration %d; its next run is %+v, want the same iteration", run.id, run.iteration, n)
			}
			interval.end = cp.killed
		case run.end.IsZero() || run.end.After(cp.killed):
			// In flight when its daemon crashed. Nothing of it may be
			// left, and a run with more than a second to go when the
			// next daemon started must have been stopped by that daemon.
			if agentAlive(run.pid) {
				t.Errorf("%s pid %d of loop %s (iteration %d) from crashed daemon %d still runs", run.typ, run.pid, run.id, run.iteration, run.daemon)
			}
			if !run.end.IsZero() && run.start.Add(sc.sleepOf(run.typ)).After(cp.restarted.Add(time.Second)) {
				t.Errorf("%s run of loop %s (iteration %d) from crashed daemon %d finished at %s, after the restart at %s: the new daemon did not stop it",
					run.typ, run.id, run.iteration, run.daemon, run.end.Format("15:04:05.000"), cp.restarted.Format("15:04:05.000"))
			}
			// The interrupted iteration counts as one attempt.
			if n := next(run); n == nil || n.iteration != run.iteration+1 {
				t.Errorf("loop %s was interrupted by a crash at iteration %d; its next run is %+v, want iteration %d", run.id, run.iteration, n, run.iteration+1)
			}
			if run.end.IsZero() {
				interval.end = cp.restarted // killed, at the latest, when the next daemon started
			}
		}
		perLoop[run.id] = append(perLoop[run.id], &interval)
	}
	// No two runs of a loop (agent or validation) overlap.
	for id, rs := range perLoop {
		slices.SortFunc(rs, func(a, b *agentRun) int { return a.start.Compare(b.start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				t.Errorf("loop %s: runs overlap: %s of iteration %d ran %s–%s, %s of iteration %d started %s", id,
					rs[i-1].typ, rs[i-1].iteration, rs[i-1].start.Format("05.000"), rs[i-1].end.Format("05.000"),
					rs[i].typ, rs[i].iteration, rs[i].start.Format("05.000"))
			}
		}
	}
	if after := r.checkout(t); after != before {
		t.Errorf("the user's checkout changed: before %+v, after %+v", before, after)
	}
	files := strings.Fields(r.git(t, "ls-tree", "-r", "--name-only", gitflow.BranchName(plan.ID, plan.Title)))
	for _, l := range loops {
		if l.Type == loop.Ralph && !slices.Contains(files, "out/"+l.ID+".txt") {
			t.Errorf("out/%s.txt is not on branch %s", l.ID, gitflow.BranchName(plan.ID, plan.Title))
		}
	}

	// The journal: each loop created once and completed once.
	s := stopCleanly(t, r, d)
	created, completed := map[string]int{}, map[string]int{}
	reclaimed := map[int]time.Duration{} // daemon n → how soon after the restart its loops were reclaimed
	for _, ev := range journal(t, s) {
		if ev.Kind == loop.EventTransition && strings.Contains(ev.Message, "lease expired") {
			for n, cp := range crashes {
				if _, seen := reclaimed[n]; !seen && !cp.clean && ev.Time.After(cp.restarted) {
					reclaimed[n] = ev.Time.Sub(cp.restarted)
				}
			}
		}
		switch {
		case ev.Kind == loop.EventCreated:
			created[ev.Loop]++
		case ev.Kind == loop.EventTransition && ev.To == loop.Complete:
			completed[ev.Loop]++
		}
	}
	for _, l := range loops {
		if created[l.ID] != 1 || completed[l.ID] != 1 {
			t.Errorf("loop %s (%s %q): created %d times, completed %d times; want once each", l.ID, l.Type, l.Title, created[l.ID], completed[l.ID])
		}
	}
	if len(created) != len(loops) {
		t.Errorf("the journal created %d loops, the store holds %d", len(created), len(loops))
	}
	for n, cp := range crashes {
		if _, seen := reclaimed[n]; !seen && !cp.clean {
			t.Errorf("no loop was reclaimed after the crash of daemon %d", n)
		}
	}
	t.Logf("%d runs for %d loops; loops reclaimed %v after each restart; wall time %s", len(runs), len(loops), reclaimed, time.Since(began).Round(time.Millisecond))
}

// agentAlive reports whether pid is a live (not zombie) agent.sh or
// validate.sh process.
func agentAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i < 0 || len(s) < i+3 || s[i+2] == 'Z' || s[i+2] == 'X' {
		return false
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Contains(string(cmdline), "agent.sh") || strings.Contains(string(cmdline), "validate.sh")
}
