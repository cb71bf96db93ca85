package control_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/store"
)

// TestLimitsAndClear: `loopr limits` lists every profile of loopr.yml and
// any other the store holds a state for; an answer to a loop held for a
// limit is refused while the limit runs, naming `loopr limits clear`; the
// clear forgets the profile's state and puts the held loop back to
// pending in the same transaction.
func TestLimitsAndClear(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	until := now.Add(time.Hour)
	held := rec("held1", "", loop.NeedsHuman, 0)
	held.Needs = &loop.Needs{Reason: loop.NeedsLimit, Detail: "agent default limited since … and no fallback is free", Since: now}
	if err := svc.Store.Update(func(tx *store.Tx) error {
		if err := tx.Create(held); err != nil {
			return err
		}
		return control.SaveLimits(tx, map[string]ratelimit.State{
			"default": {Hits: 1, BackoffUntil: until, RecoveryUntil: until.Add(time.Minute), LastHit: now.Add(-time.Minute), Since: now.Add(-2 * time.Hour)},
			"gone":    {Hits: 2, LastHit: now.Add(-time.Hour)},
		})
	}); err != nil {
		t.Fatal(err)
	}
	if got := held.NeedsAction(); got != "loopr limits clear default" {
		t.Errorf("NeedsAction() = %q, want loopr limits clear default", got)
	}

	_, err := svc.Act("held1", api.ActionAnswer, api.ActionRequest{Answer: "go on"})
	want := "held1: agent default is rate limited until " + until.Format(time.RFC3339) +
		" and no fallback is free; an answer would leave this ralph behind the same limit — it resumes by itself then, or now with loopr limits clear default"
	var te *loop.TransitionError
	if err == nil || err.Error() != want || !errors.As(err, &te) {
		t.Errorf("answer = %v\nwant the *loop.TransitionError (409, exit 2) %q", err, want)
	}

	got, err := svc.Limits(now)
	if err != nil {
		t.Fatal(err)
	}
	wantLimits := []api.AgentLimit{
		{ProfileLimit: api.ProfileLimit{Agent: "default", Hits: 1, Limited: true, ResumeAt: until, Since: now.Add(-2 * time.Hour)},
			Configured: true, LastHit: now.Add(-time.Minute), RecoveryUntil: until.Add(time.Minute), Held: 1},
		{ProfileLimit: api.ProfileLimit{Agent: "gone", Hits: 2}, LastHit: now.Add(-time.Hour)},
	}
	if diff := cmp.Diff(wantLimits, got); diff != "" {
		t.Errorf("Limits() mismatch (-want +got)\n%s", diff)
	}

	if _, err := svc.ClearLimit("nope"); err == nil || !control.IsUsage(err) || !strings.Contains(err.Error(), `unknown agent profile "nope" (known: default, gone)`) {
		t.Errorf("ClearLimit(nope) = %v; want a usage error naming the known profiles", err)
	}
	res, err := svc.ClearLimit("default")
	if err != nil {
		t.Fatal(err)
	}
	if !res.Was.Limited || !cmp.Equal(res.Released, []string{"held1"}) {
		t.Errorf("ClearLimit(default) = %+v; want it was limited and held1 released", res)
	}
	if l, _ := svc.Get("held1"); l.Status != loop.Pending || l.Needs != nil {
		t.Errorf("held1 after the clear: %s, needs %v; want pending", l.Status, l.Needs)
	}
	got, err = svc.Limits(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Limited || got[0].Hits != 0 || got[0].Held != 0 {
		t.Errorf("Limits() after the clear = %+v; want default free", got)
	}
	// Clearing a free profile changes nothing and is no error.
	if res, err := svc.ClearLimit("default"); err != nil || res.Was.Limited || len(res.Released) != 0 {
		t.Errorf("ClearLimit(default) again = %+v, %v", res, err)
	}
}
