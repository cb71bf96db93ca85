package daemonbench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/store"
)

// The fixture: 120,000 loop records, 100,000 of them waiting.
//
//	100 plans, 1,000 specs (complete)
//	10,000 phases: 9,000 complete, 1,000 pending (their ralphs are blocked)
//	108,900 ralphs: 99,000 waiting (95% pending, 5% paused; 1 in 20 of the
//	  pending in a retry backoff), 9,900 finished (complete, failed, cancelled)
//
// Every spec, phase and ralph names its parent and the parent's artifact;
// ralphs carry a task of about 300 bytes. The shared 429 backoff is set far
// in the future so that the daemon starts nothing while it is measured.
const (
	fixturePlans  = 100
	fixtureSpecs  = 1_000
	fixturePhases = 10_000
	fixtureRalphs = 108_900
	fixtureTotal  = fixturePlans + fixtureSpecs + fixturePhases + fixtureRalphs // 120,000
)

var (
	binPath string // the loopr binary under test
	tmpRoot string // removed when the benchmarks end

	fixOnce sync.Once
	fixWS   string // workspace of the 120k fixture
	fixErr  error
	emptyWS string // workspace of an empty home

	daemons []*exec.Cmd // started daemons, stopped at the end
)

func TestMain(m *testing.M) {
	if os.Getenv(measureEnv) != "" { // a child of BenchmarkDebugSchedulerOffline
		os.Exit(measureChild(os.Args[1:]))
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // no benchmark asked for: no binary to build (go test ./...)
	}
	code := func() int {
		var err error
		if tmpRoot, err = os.MkdirTemp("", "loopr-daemonbench-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if os.Getenv("LOOPR_BENCH_KEEP") != "" { // keep the fixture to look at it
			fmt.Fprintf(os.Stderr, "daemonbench: keeping %s\n", tmpRoot)
		} else {
			defer os.RemoveAll(tmpRoot)
		}
		defer stopAll()
		if binPath = os.Getenv("LOOPR_BIN"); binPath == "" {
			binPath = filepath.Join(tmpRoot, "loopr")
			out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/loopr").CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "build loopr: %v\n%s", err, out)
				return 1
			}
		} else if binPath, err = filepath.Abs(binPath); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// benchConfig keeps the daemon from touching git and from removing the
// fixture's finished loops.
const benchConfig = "git: {worktrees: false}\nstorage: {disk_quota_min_gb: 0}\nretention: {days: 0}\n"

// newWorkspace makes a workspace directory with loopr.yml and returns it.
func newWorkspace(name string) (string, error) {
	dir := filepath.Join(tmpRoot, name)
	if err := os.MkdirAll(filepath.Join(dir, ".loopr"), 0o700); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "loopr.yml"), []byte(benchConfig), 0o644)
}

func home(ws string) string { return filepath.Join(ws, ".loopr") }

// fixture returns the workspace of the 120k fixture, built once.
func fixture(b *testing.B) string {
	b.Helper()
	fixOnce.Do(func() {
		began := time.Now()
		if emptyWS, fixErr = newWorkspace("empty"); fixErr != nil {
			return
		}
		if fixWS, fixErr = newWorkspace("fixture"); fixErr != nil {
			return
		}
		if fixErr = populate(home(fixWS)); fixErr != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "daemonbench: fixture of %d loops built in %s\n", fixtureTotal, time.Since(began).Round(time.Millisecond))
		fixErr = measureBaselines(fixWS)
	})
	if fixErr != nil {
		b.Fatal(fixErr)
	}
	return fixWS
}

func fid(kind string, i int) string { return fmt.Sprintf("01J%s%021d", kind, i) }

var task = strings.Repeat("Implement the handler, cover it with tests, keep the API stable. ", 5)

// populate writes the fixture's records and artifacts into the store at home.
func populate(home string) error {
	st, err := store.Open(filepath.Join(home, "loopr.db"), store.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	artifact := func(id, typ string) (string, error) {
		dir := filepath.Join(home, "loops", id, "iterations", "001")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		p := filepath.Join(dir, typ+".md")
		return p, os.WriteFile(p, []byte("# "+typ+"\n"), 0o600)
	}
	var loops []loop.Loop
	mk := func(id, typ, parent, trig string, depth int, st loop.Status, age time.Duration) loop.Loop {
		l := loop.Loop{ID: id, Type: typ, Status: st, Parent: parent, Depth: depth, TriggeredBy: trig,
			Title: "work item " + id[len(id)-6:], Iteration: 1, MaxIterations: 50,
			CreatedAt: now.Add(-age), UpdatedAt: now.Add(-age)}
		if st.Terminal() {
			l.FinishedAt = l.UpdatedAt
		}
		return l
	}
	planArt := make([]string, fixturePlans)
	for i := range fixturePlans {
		l := mk(fid("PL", i), loop.Plan, "", "", 0, loop.Complete, 4*time.Hour)
		l.Task = task
		if l.Artifact, err = artifact(l.ID, loop.Plan); err != nil {
			return err
		}
		planArt[i] = l.Artifact
		loops = append(loops, l)
	}
	specArt := make([]string, fixtureSpecs)
	for i := range fixtureSpecs {
		p := i % fixturePlans
		l := mk(fid("SP", i), loop.Spec, fid("PL", p), planArt[p], 1, loop.Complete, 3*time.Hour)
		if l.Artifact, err = artifact(l.ID, loop.Spec); err != nil {
			return err
		}
		specArt[i] = l.Artifact
		loops = append(loops, l)
	}
	phaseArt := make([]string, fixturePhases)
	for i := range fixturePhases {
		p := i % fixtureSpecs
		st := loop.Complete
		if i%10 == 3 {
			st = loop.Pending // 10% of phases wait: their ralphs are blocked by their parent
		}
		l := mk(fid("PH", i), loop.Phase, fid("SP", p), specArt[p], 2, st, 2*time.Hour+time.Duration(i%3600)*time.Second)
		if st == loop.Complete {
			if l.Artifact, err = artifact(l.ID, loop.Phase); err != nil {
				return err
			}
			phaseArt[i] = l.Artifact
		} else {
			phaseArt[i] = filepath.Join(home, "loops", l.ID, "iterations", "001", "phase.md") // not written yet
		}
		loops = append(loops, l)
	}
	for i := range fixtureRalphs {
		p := i % fixturePhases
		st := loop.Pending
		switch {
		case i%11 == 10:
			st = []loop.Status{loop.Complete, loop.Failed, loop.Cancelled}[i%3]
		case i%20 == 7:
			st = loop.Paused
		}
		l := mk(fid("RA", i), loop.Ralph, fid("PH", p), phaseArt[p], 3, st, time.Duration(i%7200)*time.Second)
		l.Task = task
		if st == loop.Pending && i%20 == 11 {
			l.Iteration = 2
			l.RunnableAt = now.Add(time.Duration(1+i%600) * time.Second)
			l.Feedback = "Iteration 1 failed: go test ./... exit 1"
		}
		loops = append(loops, l)
	}
	for len(loops) > 0 {
		n := min(len(loops), 5000)
		chunk := loops[:n]
		loops = loops[n:]
		if err := st.Update(func(tx *store.Tx) error {
			for _, l := range chunk {
				if err := tx.Create(l); err != nil {
					return err
				}
				if l.Status.Terminal() { // the events of a loop that ran
					for _, to := range []loop.Status{loop.Running, l.Status} {
						if _, err := tx.AppendEvent(loop.Event{Time: now, Loop: l.ID, Kind: loop.EventTransition, To: to, Iteration: 1}); err != nil {
							return err
						}
					}
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// Nothing starts while the benchmarks look: a 429 backoff for a century.
	rl := ratelimit.State{Hits: 1, BackoffUntil: now.Add(100 * 365 * 24 * time.Hour)}
	return st.Update(func(tx *store.Tx) error { return tx.SetMeta("ratelimit", rl) })
}

// daemon is a running `loopr daemon` process.
type daemon struct {
	cmd     *exec.Cmd
	started time.Duration // exec → first scheduling tick logged
	ready   time.Duration // exec → "daemon started" logged (socket bound)
	ws      string
}

// startDaemon runs `loopr daemon` in ws and waits for its first tick.
func startDaemon(ws string) (*daemon, error) {
	cmd := exec.Command(binPath, "--home", home(ws), "daemon", "--log-level", "debug")
	cmd.Dir = ws
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	daemons = append(daemons, cmd)
	d := &daemon{cmd: cmd, ws: ws}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody listens any more
			}
		}
		close(lines)
	}()
	timeout := time.After(60 * time.Second)
	var log []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return nil, fmt.Errorf("daemon exited before its first tick:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, line)
			switch {
			case strings.Contains(line, `msg="daemon started"`):
				d.ready = time.Since(began)
			case strings.Contains(line, `msg="scheduler tick"`):
				d.started = time.Since(began)
				go func() { // keep the pipe drained
					for range lines {
					}
				}()
				return d, nil
			}
		case <-timeout:
			return nil, fmt.Errorf("daemon did not tick within 60s:\n%s", strings.Join(log, "\n"))
		}
	}
}

// stop stops the daemon with SIGTERM and waits for it.
func (d *daemon) stop() error {
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		i := slices.Index(daemons, d.cmd)
		if i >= 0 {
			daemons = slices.Delete(daemons, i, i+1)
		}
		return err
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		return fmt.Errorf("daemon did not stop within 30s")
	}
}

func stopAll() {
	for _, c := range daemons {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
	}
	daemons = nil
}

// mem is a daemon's memory, in MiB, from /proc/<pid>/status.
type mem struct {
	rss, peak  float64 // VmRSS, VmHWM
	anon, file float64 // RssAnon (its heap), RssFile (the store file's mapped pages)
}

// memory reads the daemon's memory once it has settled: sampled every
// 100 ms until two samples agree within 1 MiB (the daemon hands the
// memory of a big answer back right after sending it), at most 3 s.
func (d *daemon) memory() (mem, error) {
	var last mem
	for i := range 30 {
		m, err := d.sample()
		if err != nil {
			return mem{}, err
		}
		if i > 0 && m.rss-last.rss < 1 && last.rss-m.rss < 1 {
			return m, nil
		}
		last = m
		time.Sleep(100 * time.Millisecond)
	}
	return last, nil
}

func (d *daemon) sample() (mem, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return mem{}, err
	}
	field := func(name string) float64 {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, name+":"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				return kb / 1024
			}
		}
		return 0
	}
	return mem{rss: field("VmRSS"), peak: field("VmHWM"), anon: field("RssAnon"), file: field("RssFile")}, nil
}

// cli runs the loopr CLI in ws with its output discarded and returns how
// long it took.
func cli(ctx context.Context, ws string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, binPath, append([]string{"--home", home(ws)}, args...)...)
	cmd.Dir = ws
	cmd.Stdout = io.Discard
	var stderr strings.Builder
	cmd.Stderr = &stderr
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	cmd.Stdout = devnull
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("loopr %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return time.Since(began), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
