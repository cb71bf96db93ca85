package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestCrashSuite runs a real daemon on a generated tree of 213 loops (a
// plan of 4 specs, each of 4 phases, each of 12 tasks; the scripted agent
// writes the artifacts), SIGKILLs it LOOPR_CRASH_KILLS times (default 5;
// `make crash` runs 20) at random moments, restarts it each time, lets the
// last daemon finish the tree, and then checks what loopr promises
// (RELIABILITY.md):
//
//   - every loop is complete, and completed exactly once (one transition to
//     complete in the journal);
//   - no child was created twice: each plan, spec and phase has exactly one
//     child per section of its artifact, and the tree has exactly 213 loops;
//   - no two agent runs of the same loop overlapped in time, and no
//     iteration ran twice (the agent logs start and end with its pid; a run
//     the recovery killed has no end: it is bounded by the restart and its
//     pid must be gone);
//   - store.Check passes after every crash and at the end;
//   - the journal agrees with the records (one created event per loop,
//     first; each loop's last transition goes to its status).
//
// The kills come in three kinds, in turn: at a random moment, just after
// an agent starts (the window before its pid is recorded in the lease), and
// just after an agent ends (the window before its result is committed and
// its children spawned). LOOPR_CRASH_SEED replays a run.
func TestCrashSuite(t *testing.T) {
	t.Parallel()
	kills := 5
	if s := os.Getenv("LOOPR_CRASH_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("LOOPR_CRASH_KILLS=%q: want a number >= 0", s)
		}
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LOOPR_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LOOPR_CRASH_SEED=%q: want a number", s)
		}
		seed = n
	}
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	t.Logf("crash suite: %d kills, seed %d (LOOPR_CRASH_SEED=%d replays the kill schedule)", kills, seed, seed)

	const specs, phases, tasks = 4, 4, 12
	const want = 1 + specs + specs*phases + specs*phases*tasks // 213
	// Agents sleep long enough that the tree is still being worked on when
	// the last kill comes.
	minMS, maxMS := 50, 120*max(kills, 5)
	runLog := filepath.Join(t.TempDir(), "runs.log")
	e := newRelEnv(t, "")
	script := abs(t, "testdata/crashagent.sh")
	cfg := fmt.Sprintf(`scheduler:
  poll_interval_secs: 1
concurrency:
  max_loops: 8
  max_api_calls: 8
  per_type: {plan: 1, spec: 4, phase: 8, ralph: 8}
retry:
  backoff_base_secs: 0
  backoff_factor: 1
  backoff_max_secs: 0
agent:
  command: %s
  timeout_secs: 120
loops:
  plan: {require_approval: false, max_iterations: 1000}
  spec: {max_iterations: 1000}
  phase: {max_iterations: 1000}
  ralph: {max_iterations: 1000, validate: []}
git:
  worktrees: false
storage:
  disk_quota_min_gb: 0
`, relArgv("sh", script, runLog, strconv.Itoa(specs), strconv.Itoa(phases), strconv.Itoa(tasks), strconv.Itoa(minMS), strconv.Itoa(maxMS)))
	if err := os.WriteFile(filepath.Join(e.dir, "loopr.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	kinds := map[string]int{}
	inFlight := 0 // kills that found loops pending or running
	d := e.start()
	if _, err := d.c.Create(context.Background(), api.CreateRequest{Type: loop.Plan, Title: "crash tree", Task: "Build the crash tree."}); err != nil {
		t.Fatal(err)
	}
	for k := range kills {
		kind := []string{"random", "after agent start", "after agent end"}[k%3]
		switch kind {
		case "random":
			time.Sleep(time.Duration(20+rng.IntN(1500)) * time.Millisecond)
		default:
			word := "start "
			if kind == "after agent end" {
				word = "end "
			}
			if !relAwaitLine(runLog, word, 10*time.Second) {
				kind += " (none seen)"
			}
			time.Sleep(time.Duration(rng.IntN(4000)) * time.Microsecond)
		}
		d.kill9()
		kinds[kind]++
		if err := e.relCheckStore(); err != nil {
			t.Fatalf("store check after kill %d: %v", k+1, err)
		}
		d = e.start()
		if st := d.status(t); st.Counts[loop.Pending]+st.Counts[loop.Running] > 0 {
			inFlight++
		}
	}
	deadline := 120 * time.Second
	relWaitFor(t, deadline, "the tree to complete", func() bool {
		st := d.status(t)
		if st.Counts[loop.Failed]+st.Counts[loop.Cancelled] > 0 {
			t.Fatalf("loops failed or cancelled: %v", st.Counts)
		}
		return st.Counts[loop.Complete] == want && st.Counts[loop.Pending]+st.Counts[loop.Running] == 0
	})
	if code := d.stop(); code != 0 {
		t.Errorf("daemon exit code %d after SIGTERM, want 0", code)
	}
	took := time.Since(began)

	loops, evs := e.relStore(t)
	dupChildren := relCheckCrashTree(t, loops, evs, want)
	if problems := relJournalProblems(loops, evs); len(problems) > 0 {
		t.Errorf("journal disagrees with the records (%d problems):\n%s", len(problems), strings.Join(problems[:min(20, len(problems))], "\n"))
	}
	runs, interrupted, overlaps, repeats := relCheckRuns(t, runLog, e.starts, loops)
	recovered := 0
	for _, ev := range evs {
		if strings.HasPrefix(ev.Message, "iteration ") && strings.Contains(ev.Message, "lease expired") {
			recovered++
		}
	}
	t.Logf("kills: %d (%v), %d found work in flight after the restart", kills, kinds, inFlight)
	t.Logf("loops: %d, all complete once; agent runs: %d, of which %d killed by recovery; iterations reclaimed after a crash: %d", len(loops), runs, interrupted, recovered)
	t.Logf("duplicates found: %d overlapping runs, %d iterations run twice, %d children created twice", overlaps, repeats, dupChildren)
	fmt.Printf("crash suite: kills=%d loops=%d agent_runs=%d killed_by_recovery=%d reclaimed=%d overlapping_runs=%d repeated_iterations=%d duplicate_children=%d store_check=ok took=%s seed=%d\n",
		kills, len(loops), runs, interrupted, recovered, overlaps, repeats, dupChildren, took.Round(time.Second), seed)
	if keep := os.Getenv("LOOPR_CRASH_KEEP"); keep != "" {
		for name, src := range map[string]string{"daemon.log": e.log, "runs.log": runLog} {
			if b, err := os.ReadFile(src); err == nil {
				os.WriteFile(filepath.Join(keep, name), b, 0o644)
			}
		}
		t.Logf("logs kept in %s (LOOPR_CRASH_KEEP)", keep)
	}
}

// relSectionRe matches the child headings of SPEC §7 artifacts.
var relSectionRe = regexp.MustCompile(`(?m)^### (?:Spec|Phase|Task) \d+: (.+)$`)

// relAwaitLine waits until a line starting with prefix is appended to the
// file at path after the call, and reports whether one was.
func relAwaitLine(path, prefix string, within time.Duration) bool {
	var off int64
	if fi, err := os.Stat(path); err == nil {
		off = fi.Size()
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		f, err := os.Open(path)
		if err == nil {
			f.Seek(off, 0)
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), prefix) {
					f.Close()
					return true
				}
			}
			f.Close()
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// relCheckCrashTree checks the tree of the crash suite: want loops, all
// complete exactly once, one child per artifact section. It returns the
// number of children created twice.
func relCheckCrashTree(t *testing.T, loops []loop.Loop, evs []loop.Event, want int) int {
	t.Helper()
	if len(loops) != want {
		t.Errorf("%d loops, want %d", len(loops), want)
	}
	completions := map[string]int{}
	for _, ev := range evs {
		if ev.Kind == loop.EventTransition && ev.To == loop.Complete {
			completions[ev.Loop]++
		}
	}
	children := map[string][]loop.Loop{}
	for _, l := range loops {
		children[l.Parent] = append(children[l.Parent], l)
		if l.Status != loop.Complete {
			t.Errorf("loop %s (%s %q) is %s, want complete (reason %q)", l.ID, l.Type, l.Title, l.Status, l.Reason)
		}
		if n := completions[l.ID]; n != 1 {
			t.Errorf("loop %s completed %d times, want once", l.ID, n)
		}
	}
	dup := 0
	for _, l := range loops {
		kids := children[l.ID]
		if l.Type == loop.Ralph {
			if len(kids) > 0 {
				t.Errorf("ralph loop %s has %d children", l.ID, len(kids))
			}
			continue
		}
		data, err := os.ReadFile(l.Artifact)
		if err != nil {
			t.Errorf("%s loop %s: artifact: %v", l.Type, l.ID, err)
			continue
		}
		var sections []string
		for _, m := range relSectionRe.FindAllStringSubmatch(string(data), -1) {
			sections = append(sections, m[1])
		}
		var titles []string
		for _, k := range kids {
			titles = append(titles, k.Title)
			if k.TriggeredBy != l.Artifact {
				t.Errorf("child %s of %s: triggered_by %q, want the accepted artifact %q", k.ID, l.ID, k.TriggeredBy, l.Artifact)
			}
		}
		slices.Sort(sections)
		slices.Sort(titles)
		dup += len(titles) - len(slices.Compact(slices.Clone(titles)))
		if !slices.Equal(sections, titles) {
			t.Errorf("%s loop %s: children %q, want one per artifact section %q", l.Type, l.ID, titles, sections)
		}
	}
	return dup
}

// relRun is one agent run from the crash agent's log.
type relRun struct {
	id         string
	iteration  int
	pid        int
	epoch      int   // which daemon started it
	start, end int64 // unix ns; end 0: killed (no end line)
}

// relCheckRuns reads the agent log and checks that no two runs of a loop
// overlapped and no iteration ran twice. starts[n] is when daemon n was
// started. A run without an end was killed, and only a daemon's recovery
// kills an agent whose daemon died (an agent nobody kills sleeps on and
// logs its end), before that daemon starts any agent: a run of daemon n
// without an end is bounded by starts[n+1], and its pid must be gone. It
// returns the number of runs, of killed runs, of overlaps and of repeated
// iterations.
func relCheckRuns(t *testing.T, path string, starts []time.Time, loops []loop.Loop) (runs, killed, overlaps, repeats int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]*relRun{} // by "id iteration pid"
	var all []*relRun
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Errorf("agent log line %d malformed: %q", i+1, line)
			continue
		}
		it, _ := strconv.Atoi(f[2])
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		pid, _ := strconv.Atoi(f[4])
		epoch, _ := strconv.Atoi(f[5])
		key := f[1] + " " + f[2] + " " + f[4]
		switch f[0] {
		case "start":
			r := &relRun{id: f[1], iteration: it, pid: pid, epoch: epoch, start: ns}
			open[key] = r
			all = append(all, r)
		case "end":
			r := open[key]
			if r == nil {
				t.Errorf("agent log line %d: end without a start: %q", i+1, line)
				continue
			}
			r.end = ns
			delete(open, key)
		}
	}
	byLoop := map[string][]*relRun{}
	for _, r := range all {
		byLoop[r.id] = append(byLoop[r.id], r)
		if r.end != 0 {
			continue
		}
		killed++
		if relProcAlive(r.pid, "crashagent.sh") {
			t.Errorf("run of loop %s iteration %d (pid %d) has no end but is still alive", r.id, r.iteration, r.pid)
		}
		if r.epoch+1 >= len(starts) {
			t.Errorf("run of loop %s iteration %d (pid %d) has no end, but its daemon %d was never killed", r.id, r.iteration, r.pid, r.epoch)
			r.end = r.start
			continue
		}
		r.end = max(r.start, starts[r.epoch+1].UnixNano())
	}
	for _, l := range loops {
		if len(byLoop[l.ID]) == 0 {
			t.Errorf("loop %s completed without an agent run", l.ID)
		}
	}
	for id, rs := range byLoop {
		slices.SortFunc(rs, func(a, b *relRun) int { return cmp.Compare(a.start, b.start) })
		seen := map[int]bool{}
		var last *relRun // the run that ends last among those before r
		for _, r := range rs {
			if seen[r.iteration] {
				repeats++
				t.Errorf("loop %s: iteration %d ran more than once", id, r.iteration)
			}
			seen[r.iteration] = true
			if last != nil && r.start < last.end {
				overlaps++
				t.Errorf("loop %s: run of iteration %d (pid %d, daemon %d) started %s before the run of iteration %d (pid %d, daemon %d) ended",
					id, r.iteration, r.pid, r.epoch, time.Duration(last.end-r.start), last.iteration, last.pid, last.epoch)
			}
			if last == nil || r.end > last.end {
				last = r
			}
		}
	}
	return len(all), killed, overlaps, repeats
}
