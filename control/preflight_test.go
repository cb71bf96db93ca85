package control_test

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/internal/testslack"
	"github.com/loopr-dev/loopr/loop"
)

// TestWorkspaceGates: with the gates on, a type whose agent is not on PATH
// waits with reason preflight (the plan of Scheduler, Why and the index
// alike), status lists the problem, and without git the leaf loops wait
// for each other with no_git; with the gates off (the default) neither
// shows.
func TestWorkspaceGates(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	cfg := svc.Config()
	ralph := cfg.Loops[loop.Ralph]
	ralph.Validate = nil // no go.mod in the test's workspace
	cfg.Loops[loop.Ralph] = ralph
	svc.SetLookPath(func(f string) (string, error) {
		if f == "claude" {
			return "", errors.New("not found")
		}
		return "/usr/bin/" + f, nil
	})
	var ids []string
	for _, typ := range []string{loop.Ralph, loop.Ralph} {
		l, err := svc.Create(api.CreateRequest{Type: typ, Task: "t"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	reasons := func() map[string][]string {
		v, err := svc.Scheduler(now)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, r := range v.Rows {
			out[r.ID] = r.Reasons
		}
		return out
	}
	if got := reasons(); len(got[ids[0]])+len(got[ids[1]]) != 0 {
		t.Errorf("gates off: reasons %v, want none", got)
	}

	svc.EnableWorkspaceGates()
	svc.SetGit("")
	for _, id := range ids {
		if got := reasons()[id]; !slices.Equal(got, []string{"preflight"}) {
			t.Errorf("agent missing: %s reasons %v, want [preflight]", id, got)
		}
	}
	st, err := svc.Status(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Problems) != 1 || st.Problems[0].What != `agent "claude" is not on PATH` || st.NoGit != "" {
		t.Errorf("status problems %+v, no_git %q; want the agent, and git", st.Problems, st.NoGit)
	}

	svc.SetLookPath(func(f string) (string, error) { return "/usr/bin/" + f, nil })
	svc.SetGit("no git here")
	got := reasons()
	if len(got[ids[0]]) != 0 || !slices.Equal(got[ids[1]], []string{"no_git"}) {
		t.Errorf("no git: reasons %v; want the first to start, the second no_git", got)
	}
}

// TestStatusDoesNotWaitForPreflight (issue 20.8): while a preflight check
// hangs (here in its PATH search; in the daemon, in git) on the scheduler's
// side, Status answers with the last result instead of waiting for it.
func TestStatusDoesNotWaitForPreflight(t *testing.T) {
	t.Parallel()
	var cfg atomic.Pointer[config.Config]
	cfg.Store(config.Default())
	svc := serviceWith(t, cfg.Load)
	entered, release := make(chan struct{}), make(chan struct{})
	var hang atomic.Bool
	var once sync.Once
	svc.SetLookPath(func(f string) (string, error) {
		if hang.Load() && f == "claude" {
			once.Do(func() { close(entered) })
			<-release
		}
		return "/usr/bin/" + f, nil
	})
	svc.EnableWorkspaceGates()
	if _, err := svc.Status(now); err != nil { // the first check, at once
		t.Fatal(err)
	}

	next := *cfg.Load() // a reload: the result is stale
	cfg.Store(&next)
	hang.Store(true)
	planned := make(chan error, 1)
	go func() { _, err := svc.Scheduler(now); planned <- err }()
	<-entered
	answered := make(chan error, 1)
	go func() { _, err := svc.Status(now); answered <- err }()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testslack.Scale(30 * time.Second)):
		t.Fatal("Status waited for the preflight check the scheduler runs")
	}
	close(release)
	if err := <-planned; err != nil {
		t.Fatal(err)
	}
}
