// Package testslack scales the outer limits of tests with the load of the
// machine they run on. loopr's tests poll for what they wait for; the limit
// of a poll is only how long a test may wait before it calls the wait
// failed. On a shared 2-core machine at a load of 10–40 the same wait takes
// many times longer than on an idle one, so a fixed limit of a few seconds
// fails there while proving nothing. A limit given to Deadline grows with
// the load seen while waiting: the test fails when the thing does not
// happen at all, not when the machine is busy.
//
// Timings that are promises (how fast loopr reacts) belong in benchmarks,
// measured against a baseline of the same run; a test may still assert an
// order of magnitude, with the limit scaled here.
//
// LOOPR_TEST_SLACK=F multiplies every limit by F on top of the load factor
// (for a machine slower than load shows: a VM with stolen time, valgrind).
// Only tests import this package.
package testslack

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Factor is how much longer than on an idle machine a wait may take now:
// 2 at least, and twice the load per core (the 1-minute load average over
// the cores), times LOOPR_TEST_SLACK when set.
func Factor() float64 {
	f := 2.0
	if l := load1(); l > 0 {
		f = max(f, 2*l/float64(runtime.NumCPU()))
	}
	if s, err := strconv.ParseFloat(os.Getenv("LOOPR_TEST_SLACK"), 64); err == nil && s >= 1 && s <= 1000 {
		f *= s
	}
	return f
}

// Scale returns d × Factor().
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * Factor()) }

// load1 reads the 1-minute load average (Linux); 0 when unknown.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return l
}

// Wait is a poll with a limit that grows with the load: limit is the
// wait's limit on an idle machine; each check of the time scales it by the
// Factor of that moment, so a load that rises while the test waits
// lengthens the wait. It polls cond every interval and reports whether
// cond held before the scaled limit passed.
func Wait(limit, interval time.Duration, cond func() bool) bool {
	start := time.Now()
	for !cond() {
		if time.Since(start) > Scale(limit) {
			return cond() // once more: the last poll may have slept past it
		}
		time.Sleep(interval)
	}
	return true
}
