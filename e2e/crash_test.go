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

	"github.com/loopr-dev/loopr/loop"
)

// crashSleep is how long each agent run of the crash test takes.
const crashSleep = 2 * time.Second

// agentRun is one agent process of the crash test, from its log lines.
type agentRun struct {
	id, typ    string
	iteration  int
	pid        int
	start, end time.Time // end is zero when the run never finished
}

// readRuns parses the crash agent's log: "start|end <id> <iteration>
// <unix-ns> <pid> <type>" lines, one write each.
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
		if len(f) != 6 {
			t.Fatalf("agent log line %q: want 6 fields", sc.Text())
		}
		it, err1 := strconv.Atoi(f[2])
		ns, err2 := strconv.ParseInt(f[3], 10, 64)
		pid, err3 := strconv.Atoi(f[4])
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("agent log line %q: bad number", sc.Text())
		}
		at := time.Unix(0, ns)
		switch f[0] {
		case "start":
			r := &agentRun{id: f[1], typ: f[5], iteration: it, pid: pid, start: at}
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
// run — and restarts it each time. The tree still completes: every loop is
// created once and completes once, no child is created twice, no two agent
// runs of one loop overlap, no agent from before a crash survives the
// restart, every interrupted loop was charged one iteration, and the store
// passes bbolt's consistency check.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	began := time.Now()
	agentLog := filepath.Join(t.TempDir(), "agents.log")
	r := newRepo(t, treeConfig(t, 5, "crash", agentLog, strconv.FormatFloat(crashSleep.Seconds(), 'f', -1, 64)))
	before := r.checkout(t)
	d := startDaemon(t, r)
	var plan loop.Loop
	mustJSON(t, ok(t, r.dir, "plan", "Survive crashes", "--json"), &plan)

	// crashWhile waits until at least two agents of type typ run, one of
	// them started less than 700ms ago (so it has well over a second of
	// its sleep left), kills the daemon, notes the agents in flight, and
	// starts a new daemon.
	type crashPoint struct {
		inFlight  []*agentRun
		restarted time.Time
	}
	var crashes []crashPoint
	crashWhile := func(typ string) {
		t.Helper()
		waitFor(t, 30*time.Second, "two running "+typ+" agents", func() bool {
			if d.exited() {
				t.Fatalf("daemon exited: %v\n%s", d.cmd.ProcessState, tail(d.output(), 40))
			}
			running, fresh := 0, false
			for _, run := range readRuns(t, agentLog) {
				if run.typ == typ && run.end.IsZero() && agentAlive(run.pid) {
					running++
					fresh = fresh || time.Since(run.start) < 700*time.Millisecond
				}
			}
			return running >= 2 && fresh
		})
		d.crash(t)
		var cp crashPoint
		var last time.Time // runs killed at an earlier crash are not this one's
		if len(crashes) > 0 {
			last = crashes[len(crashes)-1].restarted
		}
		for _, run := range readRuns(t, agentLog) {
			if run.end.IsZero() && run.start.After(last) {
				cp.inFlight = append(cp.inFlight, run)
			}
		}
		alive := 0
		for _, run := range cp.inFlight {
			if agentAlive(run.pid) {
				alive++
			}
		}
		t.Logf("crash %d: killed the daemon with %d agents in flight, %d alive as orphans", len(crashes)+1, len(cp.inFlight), alive)
		cp.restarted = time.Now()
		d = startDaemon(t, r)
		crashes = append(crashes, cp)
	}
	crashWhile(loop.Spec)
	crashWhile(loop.Ralph)

	waitFor(t, 60*time.Second, "the plan tree to settle", func() bool {
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

	runs := readRuns(t, agentLog)
	// No agent from before a crash is left: each either finished before
	// the restart or was killed (no end line), and none is alive now.
	for i, cp := range crashes {
		for _, then := range cp.inFlight {
			run := runs[slices.IndexFunc(runs, func(r *agentRun) bool { return r.pid == then.pid && r.start.Equal(then.start) })]
			if agentAlive(run.pid) {
				t.Errorf("crash %d: agent pid %d of loop %s (iteration %d) still runs after the restart", i+1, run.pid, run.id, run.iteration)
			}
			// An agent with more than a second of its sleep left when the
			// daemon restarted must have been killed by the recovery.
			if !run.end.IsZero() && run.start.Add(crashSleep).After(cp.restarted.Add(time.Second)) {
				t.Errorf("crash %d: agent of loop %s (iteration %d) finished at %s, after the restart at %s: the new daemon did not kill it",
					i+1, run.id, run.iteration, run.end.Format("15:04:05.000"), cp.restarted.Format("15:04:05.000"))
			}
			// The interrupted iteration counts as one attempt.
			if l := byID[run.id]; l.Iteration <= run.iteration {
				t.Errorf("crash %d: loop %s was interrupted at iteration %d but ended at iteration %d", i+1, run.id, run.iteration, l.Iteration)
			}
		}
	}
	// No two runs of a loop overlap. A killed run ends, at the latest, when
	// the next daemon started.
	restarts := []time.Time{}
	for _, cp := range crashes {
		restarts = append(restarts, cp.restarted)
	}
	perLoop := map[string][]*agentRun{}
	for _, run := range runs {
		end := run.end
		if end.IsZero() {
			i := slices.IndexFunc(restarts, func(at time.Time) bool { return at.After(run.start) })
			if i < 0 {
				t.Errorf("agent of loop %s (iteration %d, pid %d) never finished, and no crash explains it", run.id, run.iteration, run.pid)
				continue
			}
			end = restarts[i]
		}
		perLoop[run.id] = append(perLoop[run.id], &agentRun{id: run.id, iteration: run.iteration, start: run.start, end: end})
	}
	for id, rs := range perLoop {
		slices.SortFunc(rs, func(a, b *agentRun) int { return a.start.Compare(b.start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				t.Errorf("loop %s: agent runs overlap: iteration %d ran %s–%s, iteration %d started %s", id,
					rs[i-1].iteration, rs[i-1].start.Format("05.000"), rs[i-1].end.Format("05.000"), rs[i].iteration, rs[i].start.Format("05.000"))
			}
		}
		if _, ok := byID[id]; !ok {
			t.Errorf("an agent ran for loop %s, which is not in the store", id)
		}
	}
	if after := r.checkout(t); after != before {
		t.Errorf("the user's checkout changed: before %+v, after %+v", before, after)
	}
	files := strings.Fields(r.git(t, "ls-tree", "-r", "--name-only", "loopr/"+plan.ID))
	for _, l := range loops {
		if l.Type == loop.Ralph && !slices.Contains(files, "out/"+l.ID+".txt") {
			t.Errorf("out/%s.txt is not on branch loopr/%s", l.ID, plan.ID)
		}
	}

	// The journal: each loop created once and completed once.
	s := stopCleanly(t, r, d)
	created, completed := map[string]int{}, map[string]int{}
	for _, ev := range journal(t, s) {
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
	t.Logf("%d agent runs for %d loops, wall time %s", len(runs), len(loops), time.Since(began).Round(time.Millisecond))
}

// agentAlive reports whether pid is a live (not zombie) agent.sh process.
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
	return strings.Contains(string(cmdline), "agent.sh")
}
