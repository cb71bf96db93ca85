package loopmgr

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// TestDeadlineSweep: a pending loop past its deadline is expired by the
// manager with a reason, and the sweep is in the loop's events.
func TestDeadlineSweep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, func(context.Context, runner.Job) runner.Result { return runner.Result{Outcome: runner.Passed} })
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "late", Deadline: time.Now().Add(-time.Second),
		RunnableAt: time.Now().Add(time.Hour)})
	h.start()
	h.waitFor("the loop to expire", func() bool { return h.status(l.ID) == loop.Expired })
	got := h.get(l.ID)
	if !strings.HasPrefix(got.Reason, "deadline ") || !strings.HasSuffix(got.Reason, " passed while pending") {
		t.Errorf("reason = %q, want the deadline that passed", got.Reason)
	}
	var evs []loop.Event
	if err := h.st.View(func(tx *store.Tx) (err error) { evs, err = tx.Events(l.ID); return err }); err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.To != loop.Expired || last.Message != got.Reason {
		t.Errorf("last event = %+v, want the expiry with its reason", last)
	}
	if h.fake.count() != 0 {
		t.Errorf("an expired loop ran %d times", h.fake.count())
	}
}

// TestFairnessBookkeeping: with fairness on, a started loop's estimated
// cost is charged to its key (its root plan) and its wall time is learned.
func TestFairnessBookkeeping(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *config.Config) {
		c.Scheduler.Fairness.Enabled = true
		c.Scheduler.Fairness.Alpha = 1 // the estimate becomes the last wall time
		ls := c.Loops[loop.Ralph]
		ls.DefaultCost = 100
		c.Loops[loop.Ralph] = ls
	}, func(context.Context, runner.Job) runner.Result {
		return runner.Result{Outcome: runner.Passed}
	})
	l := h.create(api.CreateRequest{Type: loop.Ralph, Task: "t", FairnessKey: "team"})
	h.start()
	h.waitFor("the loop to complete", func() bool { return h.status(l.ID) == loop.Complete })
	var f scheduler.Fairness
	h.waitFor("the cost to be learned", func() bool {
		if err := h.st.View(func(tx *store.Tx) error { _, err := tx.Meta(control.FairnessKey, &f); return err }); err != nil {
			t.Fatal(err)
		}
		_, ok := f.Keys["team"].Cost[loop.Ralph]
		return ok
	})
	u := f.Keys["team"]
	if u.Used != 100 {
		t.Errorf("team used %v, want the default cost 100 charged at start", u.Used)
	}
	if c := u.Cost[loop.Ralph]; c < 0 || c > 10 {
		t.Errorf("learned cost %v s, want the wall time of a fake iteration (well under 10 s)", c)
	}
}
