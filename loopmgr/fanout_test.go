package loopmgr

import (
	"context"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/fanout"
	"github.com/loopr-dev/loopr/loop"
)

// TestJudgeOutputIsBounded: a judge that floods its standard output and
// error (20 MB each) leaves the daemon a bounded answer, still read.
func TestJudgeOutputIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	first := loop.Loop{ID: "01JAAAAAAAAAAAAAAAAAAAAAAX", Type: loop.Ralph, Task: "x", Fanout: &loop.Fanout{Group: "01JAAAAAAAAAAAAAAAAAAAAAAX", Index: 1, Of: 2}}
	passing := []fanout.Candidate{{ID: first.ID, Index: 1}, {ID: "01JBBBBBBBBBBBBBBBBBBBBBBY", Index: 2}}
	flood := `printf '2 '; head -c 20000000 /dev/zero | tr '\0' x; echo; head -c 20000000 /dev/zero | tr '\0' y >&2`
	out, err := h.mgr.runJudge(context.Background(), []string{"sh", "-c", flood}, first, passing, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > maxJudgeOutput {
		t.Errorf("kept %d bytes of the judge's output, want at most %d", len(out), maxJudgeOutput)
	}
	c, reason, err := fanout.ParseJudge(out, passing)
	if err != nil || c.Index != 2 || !strings.HasPrefix(reason, "xxx") || len(reason) > fanout.MaxReason+len("…") {
		t.Errorf("ParseJudge = %d, %d bytes of reason, %v; want candidate 2 with a clipped reason", c.Index, len(reason), err)
	}
}
