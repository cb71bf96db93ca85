package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/loopr-dev/loopr/loop"
)

// TestRunChecks: the commands run in order in the directory until one
// fails; each that ran has its evidence, the failing one last.
func TestRunChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var log strings.Builder
	r := &Runner{}
	ev, f := r.RunChecks(context.Background(), Check{
		Commands: []string{"test -d .", "echo half; exit 3", "echo never"},
		Dir:      dir, Log: &log, Where: loop.WhereMerge, Commit: "abc",
	})
	if f == nil || f.Cancelled || !strings.Contains(f.Reason, "validate `echo half; exit 3` exited 3") {
		t.Fatalf("RunChecks() failure = %+v; want the second command, exit 3", f)
	}
	want := []loop.Evidence{
		{Command: "test -d .", ExitCode: 0, Commit: "abc", Where: loop.WhereMerge},
		{Command: "echo half; exit 3", ExitCode: 3, Commit: "abc", Where: loop.WhereMerge},
	}
	if diff := cmp.Diff(want, ev, cmpopts.IgnoreFields(loop.Evidence{}, "DurationMS")); diff != "" {
		t.Errorf("RunChecks() evidence mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(log.String(), "half") || strings.Contains(log.String(), "never") {
		t.Errorf("log = %q; want the second command's output and nothing of the third", log.String())
	}

	ev, f = r.RunChecks(context.Background(), Check{Commands: []string{"sleep 0.2", "true"}, Dir: dir})
	if f != nil || len(ev) != 2 || ev[0].DurationMS < 150 {
		t.Errorf("RunChecks(passing) = %+v, %+v; want 2 entries, the first >= 150 ms", ev, f)
	}

	ev, f = r.RunChecks(context.Background(), Check{Commands: []string{"sleep 30"}, Dir: dir, Timeout: 100 * time.Millisecond, Grace: 100 * time.Millisecond})
	if f == nil || !strings.Contains(f.Reason, "timed out") || len(ev) != 1 || ev[0].ExitCode == 0 {
		t.Errorf("RunChecks(timeout) = %+v, %+v; want a timeout with its evidence", ev, f)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, f := r.RunChecks(ctx, Check{Commands: []string{"sleep 30"}, Dir: dir}); f == nil || !f.Cancelled {
		t.Errorf("RunChecks(cancelled) = %+v; want Cancelled", f)
	}
}
