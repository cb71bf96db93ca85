package changes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/changes"
	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/loop"
)

func TestMain(m *testing.M) {
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// repo is a test repository and its branches.
type repo struct {
	t   *testing.T
	dir string
	g   *gitflow.Repo
}

func (r repo) git(args ...string) string {
	r.t.Helper()
	argv := append([]string{"-C", r.dir, "-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)
	out, err := exec.Command("git", argv...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (name → content; "" deletes) and commits them.
func (r repo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if content == "" {
			r.git("rm", "-q", "--", name)
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

func newRepo(t *testing.T) repo {
	t.Helper()
	r := repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	r.commit("initial", map[string]string{"README.md": "hello\n", "shared.txt": "one\ntwo\n"})
	g, err := gitflow.Open(r.dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	return r
}

// paths lists a diff's files as "status path +a -r".
func paths(d api.Diff) []string {
	var out []string
	for _, f := range d.Files {
		out = append(out, fmt.Sprintf("%s %s +%d -%d", f.Status, f.Path, f.Added, f.Removed))
	}
	return out
}

// TestOf follows a task through its life: on its branch, merged (branch
// deleted), and its plan against the plan's base.
func TestOf(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.git("checkout", "-q", "-b", "loopr/p-plan")
	plan := loop.Loop{ID: "01PLAN000000000000000000AA", Type: loop.Plan, Branch: "loopr/p-plan", Base: loop.Base{Branch: "main", Commit: base}}
	r.git("checkout", "-q", "-b", "loopr/t-one")
	tip := r.commit("task one", map[string]string{"a.go": "package a\n", "shared.txt": "one\nTWO\nthree\n"})
	task := loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID, Branch: "loopr/t-one"}
	// The plan branch moves on meanwhile: none of it is the task's.
	r.git("checkout", "-q", "loopr/p-plan")
	r.commit("another task", map[string]string{"b.go": "package b\n"})

	wantTask := []string{"added a.go +1 -0", "modified shared.txt +2 -1"}
	d, err := changes.Of(ctx, r.g, task, plan, plan.Branch, changes.DefaultLimit)
	if err != nil {
		t.Fatalf("Of(task) = %v", err)
	}
	if diff := cmp.Diff(wantTask, paths(d)); diff != "" {
		t.Errorf("Of(task) files mismatch (-want +got):\n%s", diff)
	}
	if d.Kind != api.DiffTask || d.To.Commit != tip || d.To.Branch != task.Branch || d.Added != 3 || d.Removed != 1 {
		t.Errorf("Of(task) = kind %s to %+v +%d -%d, want task to %s +3 -1", d.Kind, d.To, d.Added, d.Removed, tip)
	}
	if d.Command != "git diff loopr/p-plan...loopr/t-one" {
		t.Errorf("Of(task).Command = %q", d.Command)
	}

	// Merged and its branch deleted: the same files, from its commit.
	r.git("merge", "-q", "--no-ff", "--no-edit", "loopr/t-one")
	r.git("branch", "-q", "-D", "loopr/t-one")
	r.commit("later", map[string]string{"c.go": "package c\n"})
	task.Commit = tip
	d, err = changes.Of(ctx, r.g, task, plan, plan.Branch, changes.DefaultLimit)
	if err != nil {
		t.Fatalf("Of(merged task) = %v", err)
	}
	if diff := cmp.Diff(wantTask, paths(d)); diff != "" {
		t.Errorf("Of(merged task) files mismatch (-want +got):\n%s", diff)
	}
	if d.Kind != api.DiffMerged || d.To.Commit != tip || d.To.Branch != "" {
		t.Errorf("Of(merged task) = kind %s to %+v, want merged to %s without a branch", d.Kind, d.To, tip)
	}

	// The plan against its base: everything merged and committed on it.
	r.git("checkout", "-q", "main")
	r.commit("the user moves on", map[string]string{"README.md": "changed on main\n"})
	d, err = changes.Of(ctx, r.g, plan, plan, plan.Branch, changes.DefaultLimit)
	if err != nil {
		t.Fatalf("Of(plan) = %v", err)
	}
	want := []string{"added a.go +1 -0", "added b.go +1 -0", "added c.go +1 -0", "modified shared.txt +2 -1"}
	if diff := cmp.Diff(want, paths(d)); diff != "" {
		t.Errorf("Of(plan) files mismatch (-want +got):\n%s", diff)
	}
	if d.Kind != api.DiffPlan || d.From.Commit != base || d.From.Branch != "main" {
		t.Errorf("Of(plan) = kind %s from %+v, want plan from main at %s", d.Kind, d.From, base)
	}
}

// TestOfNoDiff: loops that have nothing to compare say why, as a
// *changes.Error (the caller's input).
func TestOfNoDiff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	r.git("branch", "loopr/p-plan")
	plan := loop.Loop{ID: "01PLAN000000000000000000AA", Type: loop.Plan, Branch: "loopr/p-plan", Base: loop.Base{Branch: "main"}}
	tests := []struct {
		name       string
		l, root    loop.Loop
		planBranch string
		want       string
	}{
		{"spec", loop.Loop{ID: "01SPEC000000000000000000AA", Type: loop.Spec, Parent: plan.ID}, plan, plan.Branch, "is a spec loop: it has no branch of its own"},
		{"task not run", loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID}, plan, plan.Branch, "has no branch yet"},
		{"branch gone, no commit", loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID, Branch: "loopr/t-gone"}, plan, plan.Branch, "is gone and it recorded no commit"},
		{"commit gone", loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID, Branch: "loopr/t-gone", Commit: strings.Repeat("ab", 20)}, plan, plan.Branch, "is not in the repository"},
		{"plan branch gone", loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID, Branch: "loopr/t-x"}, plan, "loopr/p-gone", "its plan's branch loopr/p-gone is gone"},
		{"plan not run", loop.Loop{ID: "01PLAN000000000000000000BB", Type: loop.Plan}, loop.Loop{ID: "01PLAN000000000000000000BB"}, "", "has no branch yet"},
		{"plan without base", loop.Loop{ID: "01PLAN000000000000000000CC", Type: loop.Plan, Branch: "loopr/p-plan"}, loop.Loop{ID: "01PLAN000000000000000000CC"}, "loopr/p-plan", "no base recorded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := changes.Of(ctx, r.g, tt.l, tt.root, tt.planBranch, changes.DefaultLimit)
			var ce *changes.Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Of() = %v, want a *changes.Error containing %q", err, tt.want)
			}
		})
	}
}

// TestOfCut: a diff over the bound is cut at a hunk or file boundary and
// says so; what is listed parses whole.
func TestOfCut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	base := r.git("rev-parse", "HEAD")
	r.git("checkout", "-q", "-b", "loopr/p-big")
	var big strings.Builder
	for i := range 500 {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	r.commit("big", map[string]string{"a.txt": "small\n", "big.txt": big.String(), "c.txt": "after\n"})
	plan := loop.Loop{ID: "01PLAN000000000000000000AA", Type: loop.Plan, Branch: "loopr/p-big", Base: loop.Base{Branch: "main", Commit: base}}
	d, err := changes.Of(ctx, r.g, plan, plan, plan.Branch, changes.Limit{Lines: 100})
	if err != nil {
		t.Fatalf("Of() = %v", err)
	}
	if !d.Truncated || d.Cut == 0 || d.Cut > 100 {
		t.Errorf("Of() truncated=%v cut=%d, want cut at most 100 lines", d.Truncated, d.Cut)
	}
	if diff := cmp.Diff([]string{"added a.txt +1 -0", "added big.txt +0 -0"}, paths(d)); diff != "" {
		t.Errorf("Of() files mismatch (-want +got):\n%s", diff)
	}
	whole, err := changes.Of(ctx, r.g, plan, plan, plan.Branch, changes.DefaultLimit)
	if err != nil || whole.Truncated || len(whole.Files) != 3 || whole.Added != 502 {
		t.Errorf("Of(whole) = %d files +%d truncated=%v, %v; want 3 files +502", len(whole.Files), whole.Added, whole.Truncated, err)
	}
}

// TestOfRemote: with git.remote, a task that ran on another worker has
// its branches only on the remote: a clone that never had them shows
// its diff from the fetched copies.
func TestOfRemote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	bare := t.TempDir()
	r.git("init", "-q", "--bare", bare)
	r.git("remote", "add", "origin", bare)
	r.git("push", "-q", "origin", "main")
	r.git("checkout", "-q", "-b", "loopr/p-plan")
	r.git("checkout", "-q", "-b", "loopr/t-one")
	tip := r.commit("task", map[string]string{"a.go": "package a\n"})
	r.git("push", "-q", "origin", "loopr/p-plan", "loopr/t-one")

	other := repo{t: t, dir: t.TempDir()}
	other.git("clone", "-q", bare, other.dir)
	g, err := gitflow.Open(other.dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	g.Remote = "origin"
	if err := g.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	plan := loop.Loop{ID: "01PLAN000000000000000000AA", Type: loop.Plan, Branch: "loopr/p-plan"}
	task := loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID, Branch: "loopr/t-one"}
	d, err := changes.Of(ctx, g, task, plan, plan.Branch, changes.DefaultLimit)
	if err != nil {
		t.Fatalf("Of() = %v", err)
	}
	if diff := cmp.Diff([]string{"added a.go +1 -0"}, paths(d)); diff != "" || d.To.Commit != tip {
		t.Errorf("Of() to %s, files mismatch (-want +got):\n%s", d.To.Commit, diff)
	}
}

// TestOfLanded: after `loopr land` the plan's branch may be deleted: the
// plan's diff and its merged tasks' are read from the landing instead (the
// base branch's commit it landed at), as they were before the deletion.
func TestOfLanded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, mode := range []string{loop.LandFastForward, loop.LandMerge} {
		t.Run(mode, func(t *testing.T) {
			r := newRepo(t)
			base := r.git("rev-parse", "HEAD")
			r.git("checkout", "-q", "-b", "loopr/p-plan")
			plan := loop.Loop{ID: "01PLAN000000000000000000AA", Type: loop.Plan, Branch: "loopr/p-plan", Base: loop.Base{Branch: "main", Commit: base}}
			r.git("checkout", "-q", "-b", "loopr/t-one")
			tip := r.commit("task one", map[string]string{"a.go": "package a\n"})
			task := loop.Loop{ID: "01TASK000000000000000000AA", Type: loop.Ralph, Parent: plan.ID, Branch: "loopr/t-one", Commit: tip}
			r.git("checkout", "-q", "loopr/p-plan")
			r.git("merge", "-q", "--no-ff", "--no-edit", "loopr/t-one")
			r.commit("plan's own", map[string]string{"p.md": "plan\n"})
			r.git("checkout", "-q", "main")
			from := r.git("rev-parse", "HEAD")
			if mode == loop.LandMerge {
				from = r.commit("the user moves on", map[string]string{"README.md": "changed on main\n"})
				r.git("merge", "-q", "--no-ff", "--no-edit", "loopr/p-plan")
			} else {
				r.git("merge", "-q", "--ff-only", "loopr/p-plan")
			}
			plan.Landed = loop.Landed{Into: "main", Commit: r.git("rev-parse", "HEAD"), Mode: mode, From: from}
			r.git("branch", "-q", "-D", "loopr/p-plan", "loopr/t-one")

			d, err := changes.Of(ctx, r.g, plan, plan, plan.Branch, changes.DefaultLimit)
			if err != nil {
				t.Fatalf("Of(landed plan, branch deleted) = %v", err)
			}
			want := []string{"added a.go +1 -0", "added p.md +1 -0"}
			if diff := cmp.Diff(want, paths(d)); diff != "" {
				t.Errorf("Of(landed plan) files mismatch (-want +got):\n%s", diff)
			}
			if d.To.Commit != plan.Landed.Commit || !strings.Contains(d.Command, plan.Landed.Commit[:12]) {
				t.Errorf("Of(landed plan) to %+v, command %q; want the landed commit %s", d.To, d.Command, plan.Landed.Commit)
			}
			d, err = changes.Of(ctx, r.g, task, plan, plan.Branch, changes.DefaultLimit)
			if mode == loop.LandMerge {
				// The plan branch's tip is not recorded: say so, and where to look.
				if !strings.Contains(fmt.Sprint(err), "loopr diff "+loop.ShortID(plan.ID)) {
					t.Errorf("Of(task of a plan landed by a merge, branches deleted) = %v, want it to point at the plan's diff", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Of(merged task, plan landed and deleted) = %v", err)
			}
			if diff := cmp.Diff([]string{"added a.go +1 -0"}, paths(d)); diff != "" {
				t.Errorf("Of(merged task) files mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
