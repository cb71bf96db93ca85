package radar_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/gitflow"
	"github.com/loopr-dev/loopr/radar"
)

var _ radar.Git = (*gitflow.Repo)(nil)

func TestMain(m *testing.M) {
	// Hermetic git: no user or system config.
	os.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	os.Exit(m.Run())
}

// repo is a real repository with a plan branch "plan" holding f.txt
// (lines a..e) and g.txt.
type repo struct {
	t   testing.TB
	dir string
	g   *gitflow.Repo
}

func newRepo(t testing.TB) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "plan")
	for name, body := range map[string]string{"f.txt": "a\nb\nc\nd\ne\n", "g.txt": "one\n"} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "plan")
	g, err := gitflow.Open(r.dir, filepath.Join(t.TempDir(), "home"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	argv := append([]string{"-C", r.dir, "-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)
	out, err := exec.Command("git", argv...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files on branch (made from plan when new) and commits.
func (r *repo) commit(branch string, files map[string]string) {
	r.t.Helper()
	if r.git("branch", "--list", branch) == "" {
		r.git("branch", branch, "plan")
	}
	r.git("checkout", "-q", branch)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "work on "+branch)
	r.git("checkout", "-q", "plan")
}

// counting wraps a Git and counts dry runs.
type counting struct {
	radar.Git
	merges int
}

func (c *counting) MergeTree(ctx context.Context, a, b string) ([]string, error) {
	c.merges++
	return c.Git.MergeTree(ctx, a, b)
}

type got struct {
	Loop, Other string
	Files       []string
}

func conflicts(rep radar.Report) []got {
	out := []got{}
	for _, c := range rep.Conflicts {
		out = append(out, got{c.Loop, c.Other, c.Files})
	}
	return out
}

func TestScan(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(r *repo)
		live  []radar.Branch
		want  []got
	}{{
		name: "same lines conflict",
		setup: func(r *repo) {
			r.commit("t1", map[string]string{"f.txt": "a\nONE\nc\nd\ne\n"})
			r.commit("t2", map[string]string{"f.txt": "a\nTWO\nc\nd\ne\n"})
		},
		live: []radar.Branch{{"L2", "t2"}, {"L1", "t1"}},
		want: []got{{"L1", "L2", []string{"f.txt"}}},
	}, {
		name: "disjoint changes",
		setup: func(r *repo) {
			r.commit("t1", map[string]string{"f.txt": "a\nONE\nc\nd\ne\n"})
			r.commit("t2", map[string]string{"f.txt": "a\nb\nc\nd\nTWO\n", "h.txt": "new\n"})
		},
		live: []radar.Branch{{"L1", "t1"}, {"L2", "t2"}},
		want: []got{},
	}, {
		name: "plan moved under a branch",
		setup: func(r *repo) {
			r.commit("t1", map[string]string{"f.txt": "a\nONE\nc\nd\ne\n", "g.txt": "mine\n"})
			r.commit("plan", map[string]string{"g.txt": "merged meanwhile\n"})
		},
		live: []radar.Branch{{"L1", "t1"}},
		want: []got{{"L1", "", []string{"g.txt"}}},
	}, {
		name: "branch without work and missing branch skipped",
		setup: func(r *repo) {
			r.git("branch", "t1", "plan")
			r.commit("t2", map[string]string{"f.txt": "a\nTWO\nc\nd\ne\n"})
		},
		live: []radar.Branch{{"L1", "t1"}, {"L2", "t2"}, {"L3", "gone"}},
		want: []got{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRepo(t)
			tc.setup(r)
			rep, err := radar.New(r.g).Scan(context.Background(), "plan", tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, conflicts(rep)); diff != "" {
				t.Errorf("Scan() mismatch (-want +got)\n%s", diff)
			}
		})
	}
}

// TestScanCache: a second scan with nothing moved runs no git merge; a
// branch that moves re-runs only its own pairs.
func TestScanCache(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit("t1", map[string]string{"f.txt": "a\nONE\nc\nd\ne\n"})
	r.commit("t2", map[string]string{"f.txt": "a\nTWO\nc\nd\ne\n"})
	r.commit("t3", map[string]string{"h.txt": "three\n"})
	live := []radar.Branch{{"L1", "t1"}, {"L2", "t2"}, {"L3", "t3"}}
	g := &counting{Git: r.g}
	rad := radar.New(g)
	ctx := context.Background()

	rep, err := rad.Scan(ctx, "plan", live)
	if err != nil {
		t.Fatal(err)
	}
	if g.merges != 6 || rep.Ran != 6 || rep.Checked != 3 { // 3 against the plan + 3 pairs
		t.Fatalf("first scan: %d merges, Ran %d, Checked %d; want 6, 6, 3", g.merges, rep.Ran, rep.Checked)
	}
	if _, err := rad.Scan(ctx, "plan", live); err != nil {
		t.Fatal(err)
	}
	if g.merges != 6 {
		t.Fatalf("unchanged scan ran %d merges; want none", g.merges-6)
	}
	r.commit("t3", map[string]string{"f.txt": "a\nb\nc\nd\nTHREE\n"})
	rep, err = rad.Scan(ctx, "plan", live)
	if err != nil {
		t.Fatal(err)
	}
	if g.merges != 9 { // t3 against the plan, L1 and L2
		t.Fatalf("after t3 moved: %d new merges; want 3", g.merges-6)
	}
	if diff := cmp.Diff([]got{{"L1", "L2", []string{"f.txt"}}}, conflicts(rep)); diff != "" {
		t.Errorf("Scan() mismatch (-want +got)\n%s", diff)
	}
	if of := rep.Of("L2"); len(of) != 1 || of[0].Loop != "L1" {
		t.Errorf("Of(L2) = %+v; want the L1/L2 conflict", of)
	}
}

func TestScanMaxPairs(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit("t1", map[string]string{"f.txt": "a\nONE\nc\nd\ne\n"})
	r.commit("t2", map[string]string{"f.txt": "a\nTWO\nc\nd\ne\n"})
	r.commit("t3", map[string]string{"f.txt": "a\nTHREE\nc\nd\ne\n"})
	rad := radar.New(r.g)
	rad.MaxPairs = 1
	rep, err := rad.Scan(context.Background(), "plan", []radar.Branch{{"L1", "t1"}, {"L2", "t2"}, {"L3", "t3"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 2 || len(rep.Conflicts) != 1 {
		t.Errorf("MaxPairs 1: Skipped %d, %d conflicts; want 2 skipped, 1 conflict", rep.Skipped, len(rep.Conflicts))
	}
}

func TestScanNoPlanBranch(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	rep, err := radar.New(r.g).Scan(context.Background(), "loopr/none", nil)
	if err != nil || rep.Commit != "" || len(rep.Conflicts) != 0 {
		t.Errorf("Scan(missing plan) = %+v, %v; want an empty report", rep, err)
	}
}

// BenchmarkScan: eight live branches (36 dry runs cold), scanned cold (a
// new radar each time) and warm (nothing moved: only the rev-parses).
func BenchmarkScan(b *testing.B) {
	r := newRepo(b)
	var live []radar.Branch
	for i := range 8 {
		name := "t" + string(rune('a'+i))
		r.commit(name, map[string]string{name + ".txt": name + "\n", "f.txt": "a\n" + name + "\nc\nd\ne\n"})
		live = append(live, radar.Branch{Loop: name, Name: name})
	}
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := radar.New(r.g).Scan(ctx, "plan", live); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		rad := radar.New(r.g)
		for b.Loop() {
			if _, err := rad.Scan(ctx, "plan", live); err != nil {
				b.Fatal(err)
			}
		}
	})
}
