package landing

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// setup makes a repository whose main has a plan branch one commit ahead,
// a store holding the plan (as given by mod) and a Lander over them.
func setup(t *testing.T, mod func(*loop.Loop)) (*Lander, loop.Loop, string) {
	t.Helper()
	dir, home := t.TempDir(), t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "one")
	base := git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "loopr/p-plan0001")
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "plan work")
	git("checkout", "-q", "main")

	st, err := store.Open(filepath.Join(home, "loopr.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := config.Default()
	svc := control.New(st, workspace.Paths{Workspace: dir, Home: home}, func() *config.Config { return cfg }, time.Now)
	now := time.Now().UTC().Truncate(time.Millisecond)
	plan := loop.Loop{ID: "PLAN0001", Type: loop.Plan, Title: "plan", Status: loop.Complete, Iteration: 1, MaxIterations: 3,
		CreatedAt: now, UpdatedAt: now, SubtreeDoneAt: now, Branch: "loopr/p-plan0001", Base: loop.Base{Branch: "main", Commit: base}}
	if mod != nil {
		mod(&plan)
	}
	if err := st.Update(func(tx *store.Tx) error { return tx.Put(plan) }); err != nil {
		t.Fatal(err)
	}
	g, err := gitflow.Open(dir, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Lander{Svc: svc, Git: g, Runner: &runner.Runner{Now: time.Now}}, plan, dir
}

// TestLandRefusals: what is not a done plan, or has no base, is refused
// as the user's (an *InputError, exit 2), and nothing moves.
func TestLandRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(*loop.Loop)
		req  api.LandRequest
		want string
	}{
		{"tree not done", func(l *loop.Loop) { l.SubtreeDoneAt = time.Time{} }, api.LandRequest{}, "is not done"},
		{"running", func(l *loop.Loop) { l.Status = loop.Running }, api.LandRequest{}, "is not done"},
		{"not a plan", func(l *loop.Loop) { l.Type = loop.Ralph }, api.LandRequest{}, "land takes a plan"},
		{"a child", func(l *loop.Loop) { l.Parent = "ROOT" }, api.LandRequest{}, "land takes a plan"},
		{"detached base", func(l *loop.Loop) { l.Base.Branch = "" }, api.LandRequest{}, "give --into"},
		{"no such base", nil, api.LandRequest{Into: "nope"}, "no branch nope"},
		{"a base name loopr does not take", nil, api.LandRequest{Into: "fix/ümlaut"}, "git merge loopr/p-plan0001"},
		{"into itself", nil, api.LandRequest{Into: "loopr/p-plan0001"}, "the plan branch itself"},
		{"untrusted loopr.yml", nil, api.LandRequest{}, "loopr trust"}, // merge.validate is the file's
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ld, plan, dir := setup(t, tt.mod)
			if tt.want == "loopr trust" {
				ld.Svc.SetTrust(&api.Trust{Text: control.UntrustedText, Action: "loopr trust"})
			}
			before, _ := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
			_, err := ld.Land(context.Background(), plan.ID, tt.req)
			var ie *control.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Land() error = %v; want one line of user error naming %q", err, tt.want)
			}
			if after, _ := exec.Command("git", "-C", dir, "rev-parse", "main").Output(); string(after) != string(before) {
				t.Errorf("main moved on a refusal")
			}
		})
	}
}

// TestLandPartialAndUpToDate: --partial lands a tree not done; landing
// again finds main up to date and keeps the first record.
func TestLandPartialAndUpToDate(t *testing.T) {
	t.Parallel()
	ld, plan, dir := setup(t, func(l *loop.Loop) { l.SubtreeDoneAt = time.Time{} })
	res, err := ld.Land(context.Background(), plan.ID, api.LandRequest{Partial: true})
	if err != nil || res.Mode != loop.LandFastForward {
		t.Fatalf("Land(--partial) = %+v, %v", res, err)
	}
	tip, _ := exec.Command("git", "-C", dir, "rev-parse", "loopr/p-plan0001").Output()
	if got, _ := exec.Command("git", "-C", dir, "rev-parse", "main").Output(); string(got) != string(tip) {
		t.Errorf("main = %s, want the plan tip %s", got, tip)
	}
	first, _ := ld.Svc.Get(plan.ID)
	res, err = ld.Land(context.Background(), plan.ID, api.LandRequest{Partial: true})
	if err != nil || res.Mode != loop.LandUpToDate {
		t.Fatalf("second Land() = %+v, %v; want up to date", res, err)
	}
	if again, _ := ld.Svc.Get(plan.ID); again.Landed != first.Landed || first.Landed.Mode != loop.LandFastForward {
		t.Errorf("landed = %+v after landing again, want the first landing %+v kept", again.Landed, first.Landed)
	}
}

// TestLandDryRunSteps: a dry run says what would happen in short lines a
// person reads (what, then where), with counts in words, not "file(s)".
func TestLandDryRunSteps(t *testing.T) {
	t.Parallel()
	ld, plan, dir := setup(t, nil)
	os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("mine\n"), 0o644)
	res, err := ld.Land(context.Background(), plan.ID, api.LandRequest{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"would land loopr/p-plan0001 on main: fast-forward, 1 commit, 1 file",
		"would update the checkout " + dir + " (1 uncommitted file there, which the landing does not touch)",
	}
	if strings.Join(res.Steps, "\n") != strings.Join(want, "\n") {
		t.Errorf("dry run steps:\n%s\nwant:\n%s", strings.Join(res.Steps, "\n"), strings.Join(want, "\n"))
	}
}

// TestLandRefusesWhileRebasing: main, checked out nowhere because the user
// is rebasing it (HEAD detached), is not moved: land and its dry run
// refuse, naming the rebase, and the rebase can still finish.
func TestLandRefusesWhileRebasing(t *testing.T) {
	t.Parallel()
	ld, plan, dir := setup(t, nil)
	git := func(env []string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for _, f := range []string{"c.txt", "d.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
		git(nil, "add", f)
		git(nil, "commit", "-q", "-m", f)
	}
	git([]string{"GIT_SEQUENCE_EDITOR=sed -i s/^pick/edit/"}, "rebase", "-q", "-i", "HEAD~2")
	before, _ := exec.Command("git", "-C", dir, "rev-parse", "main").Output()
	for _, dry := range []bool{true, false} {
		_, err := ld.Land(context.Background(), plan.ID, api.LandRequest{DryRun: dry})
		var ie *control.InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "a rebase of main is in progress") {
			t.Errorf("Land(dry %v, main being rebased) = %v; want a refusal naming the rebase", dry, err)
		}
	}
	if after, _ := exec.Command("git", "-C", dir, "rev-parse", "main").Output(); string(after) != string(before) {
		t.Errorf("main moved during the user's rebase")
	}
	git(nil, "rebase", "--continue")
	git(nil, "rebase", "--continue")
}
