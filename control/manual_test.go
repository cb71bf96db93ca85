package control_test

import (
	"slices"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// TestRecordManual: the work loopr attach saved is journaled on the paused
// loop; a loop that is not paused, another iteration, or a commit or
// branch that is not one are refused as invalid input.
func TestRecordManual(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	l, err := svc.Create(api.CreateRequest{Type: loop.Ralph, Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ok := api.ManualRequest{Iteration: 1, Branch: "loopr/t-abc", Commit: "0123456789abcdef0123456789abcdef01234567"}
	if err := svc.RecordManual(l.ID, ok); err == nil || !control.IsUsage(err) {
		t.Errorf("a pending loop: %v, want a usage error", err)
	}
	if _, err := svc.Act(l.ID, api.ActionPause, api.ActionRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []api.ManualRequest{
		{Iteration: 2, Branch: ok.Branch, Commit: ok.Commit},
		{Iteration: 1, Branch: ok.Branch, Commit: "HEAD; rm"},
		{Iteration: 1, Branch: "a\nb", Commit: ok.Commit},
	} {
		if err := svc.RecordManual(l.ID, bad); err == nil || !control.IsUsage(err) {
			t.Errorf("RecordManual(%+v) = %v, want a usage error", bad, err)
		}
	}
	if err := svc.RecordManual(l.ID, ok); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	err = svc.Store.View(func(tx *store.Tx) error {
		evs, err := tx.Events(l.ID)
		for _, e := range evs {
			msgs = append(msgs, e.Message)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "manual work by loopr attach: commit " + ok.Commit + " on " + ok.Branch
	if !slices.Contains(msgs, want) {
		t.Errorf("journal %q lacks %q", msgs, want)
	}
}
