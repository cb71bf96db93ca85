package daemonbench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// offlineBaseCommit is the build the offline path is measured against
// (issue 20.6): main as of 2026-11-23, before issues 10–15.
// LOOPR_BASE_BIN names a binary built from it instead.
const offlineBaseCommit = "93172c1"

var (
	baseOnce sync.Once
	basePath string
	baseErr  error
)

// baseBinary builds loopr at offlineBaseCommit from this repository's
// history (git archive, then go build) once per run.
func baseBinary(b *testing.B) string {
	b.Helper()
	baseOnce.Do(func() {
		if basePath = os.Getenv("LOOPR_BASE_BIN"); basePath != "" {
			return
		}
		src := filepath.Join(tmpRoot, "base-src")
		if baseErr = os.MkdirAll(src, 0o755); baseErr != nil {
			return
		}
		archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", "../..", offlineBaseCommit, src)
		if out, err := archive.CombinedOutput(); err != nil {
			baseErr = fmt.Errorf("extract %s (a full clone of loopr is needed): %v\n%s", offlineBaseCommit, err, out)
			return
		}
		basePath = filepath.Join(tmpRoot, "loopr-base")
		build := exec.Command("go", "build", "-o", basePath, "./cmd/loopr")
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			baseErr = fmt.Errorf("build loopr at %s: %v\n%s", offlineBaseCommit, err, out)
		}
	})
	if baseErr != nil {
		b.Fatal(baseErr)
	}
	return basePath
}

// offlineWorkspace is a copy of the fixture's store that no daemon opens:
// the CLI reads it itself.
func offlineWorkspace(b *testing.B) string {
	b.Helper()
	ws := fixture(b)
	off := filepath.Join(tmpRoot, "offline")
	if _, err := os.Stat(off); err == nil {
		return off
	}
	if _, err := newWorkspace("offline"); err != nil {
		b.Fatal(err)
	}
	src, err := os.Open(filepath.Join(home(ws), "loopr.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(home(off), "loopr.db"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		b.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		b.Fatal(err)
	}
	// The artifacts the pending ralphs' gates read.
	if out, err := exec.Command("cp", "-a", filepath.Join(home(ws), "loops"), home(off)).CombinedOutput(); err != nil {
		b.Fatalf("copy artifacts: %v\n%s", err, out)
	}
	return off
}

// cost is what one CLI run took: CPU (user+sys) and peak resident memory.
type cost struct {
	cpu   time.Duration
	rssMB float64
}

// measureEnv, set in the environment of this test binary, makes it run
// the command in its arguments and print that command's rusage
// (measureChild). The benchmark's own process cannot measure a child's peak
// memory: Go starts children with vfork, and exec carries the parent's peak
// RSS (the 120k fixture) into the child's ru_maxrss. This small process
// forks afresh.
const measureEnv = "LOOPR_DAEMONBENCH_MEASURE"

// measureChild runs argv with stdout to /dev/null and prints
// "<user+sys ns> <maxrss KiB>" on stdout; errors go to stderr, exit 1.
func measureChild(argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd.Stdout, cmd.Stderr = devnull, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	fmt.Printf("%d %d\n", (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Nanoseconds(), ru.Maxrss)
	return 0
}

// runCost runs bin's args in ws through measureChild and returns its cost.
func runCost(bin, ws string, args ...string) (cost, error) {
	self, err := os.Executable()
	if err != nil {
		return cost{}, err
	}
	cmd := exec.Command(self, append([]string{bin, "--home", home(ws)}, args...)...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), measureEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return cost{}, fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, stderr.String())
	}
	var ns, kib int64
	if _, err := fmt.Sscan(string(out), &ns, &kib); err != nil {
		return cost{}, fmt.Errorf("measure %s: %q: %w", bin, out, err)
	}
	return cost{cpu: time.Duration(ns), rssMB: float64(kib) / 1024}, nil
}

// BenchmarkDebugSchedulerOffline: `loopr debug scheduler --json` with no
// daemon (the CLI opens the store itself), 100,000 waiting loops, against
// the build of offlineBaseCommit on the same store copy in the same run,
// the two alternating. Reported: the medians of CPU time (user+sys) and
// of max RSS of each.
func BenchmarkDebugSchedulerOffline(b *testing.B) {
	ws := offlineWorkspace(b)
	base := baseBinary(b)
	args := []string{"debug", "scheduler", "--json"}
	// One run of each first: the page cache holds the store for both.
	for _, bin := range []string{base, binPath} {
		if _, err := runCost(bin, ws, args...); err != nil {
			b.Fatal(err)
		}
	}
	var cpu, baseCPU, rss, baseRSS []time.Duration
	b.ResetTimer()
	for b.Loop() {
		bc, err := runCost(base, ws, args...)
		if err != nil {
			b.Fatal(err)
		}
		c, err := runCost(binPath, ws, args...)
		if err != nil {
			b.Fatal(err)
		}
		cpu, baseCPU = append(cpu, c.cpu), append(baseCPU, bc.cpu)
		// RSS through the same median helper, in KiB as Durations.
		rss, baseRSS = append(rss, time.Duration(c.rssMB*1024)), append(baseRSS, time.Duration(bc.rssMB*1024))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(cpu)), "cpu-ms")
	b.ReportMetric(ms(median(baseCPU)), "base-cpu-ms")
	b.ReportMetric(float64(median(rss))/1024, "maxrss-MB")
	b.ReportMetric(float64(median(baseRSS))/1024, "base-maxrss-MB")
	b.ReportMetric(float64(median(cpu))/float64(median(baseCPU)), "x-base-cpu")
	b.ReportMetric(float64(median(rss))/float64(median(baseRSS)), "x-base-rss")
}
