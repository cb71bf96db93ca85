package gitflow

import (
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/loop"
)

func TestBranchName(t *testing.T) {
	t.Parallel()
	const ulid = "01JD3K9QZ8X7W6V5T4S3R2Q1PN"
	tests := []struct {
		name, id, title, want string
	}{
		{"ulid and title", ulid, "Add the --json flag to `list`", "loopr/add-the-json-flag-to-list-s3r2q1pn"},
		{"capitals, digits, unicode", ulid, "Über HTTP/2 Support!", "loopr/ber-http-2-support-s3r2q1pn"},
		{"long title clipped to 40, no dash at the end", ulid, strings.Repeat("abcdefghi ", 10), "loopr/abcdefghi-abcdefghi-abcdefghi-abcdefghi-s3r2q1pn"},
		{"long word clipped at 40", ulid, strings.Repeat("x", 50), "loopr/" + strings.Repeat("x", 40) + "-s3r2q1pn"},
		{"clipped before a dash", ulid, strings.Repeat("a", 39) + " b", "loopr/" + strings.Repeat("a", 39) + "-s3r2q1pn"},
		{"no usable title", ulid, "…!!…", "loopr/s3r2q1pn"},
		{"control characters", ulid, "fix\x1b[2Jit\nnow", "loopr/fix-2jit-now-s3r2q1pn"},
		{"not a ULID: the whole id", "task-7", "Fix it", "loopr/fix-it-task-7"},
		{"id with a leading dash part", "--x", "", "loopr/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := BranchName(tt.id, tt.title)
			if got != tt.want {
				t.Errorf("BranchName(%q, %q) = %q, want %q", tt.id, tt.title, got, tt.want)
			}
			if err := checkOurs(got); err != nil {
				t.Errorf("BranchName() = %q, not a valid branch: %v", got, err)
			}
			if s := Slug(tt.title); len(s) > SlugMax || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") {
				t.Errorf("Slug(%q) = %q: longer than %d or a '-' at an end", tt.title, s, SlugMax)
			}
		})
	}
}

func TestCommitMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, typ, title string
		iteration        int
		id               string
		want             string
	}{
		{"trailer", "ralph", "Add the parser", 3, "01JABCDEFGHJKMNPQRSTVWXYZ0", "loopr: ralph \"Add the parser\" iteration 3\n\nLoopr-Loop: 01JABCDEFGHJKMNPQRSTVWXYZ0"},
		{"no trailer for a bad id", "ralph", "x", 1, "-bad", `loopr: ralph "x" iteration 1`},
		{"plain", "ralph", "Add the parser", 3, "", `loopr: ralph "Add the parser" iteration 3`},
		{"control characters escaped", "plan", "evil\x1b]52;c;x\x07\ntitle", 1, "", `loopr: plan "evil\x1b]52;c;x\a\ntitle" iteration 1`},
		{"quotes", "ralph", `say "hi"`, 2, "", `loopr: ralph "say \"hi\"" iteration 2`},
		{"clipped", "ralph", strings.Repeat("word ", 20), 1, "", `loopr: ralph "` + strings.TrimSpace(strings.Repeat("word ", 12)) + `…" iteration 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := CommitMessage(tt.typ, tt.title, tt.iteration, tt.id); got != tt.want {
				t.Errorf("CommitMessage() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBranchFindsLegacyNames: a loop whose branch loopr/<id> exists (made
// by an older loopr) keeps it; any other gets loopr/<slug>-<short-id>.
func TestBranchFindsLegacyNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	if err := r.EnsurePlanBranch(ctx, LegacyBranch("OLD1")); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"OLD1": "loopr/OLD1", "NEW1": "loopr/a-title-NEW1"} {
		got, err := r.Branch(ctx, id, "A title")
		if err != nil || got != want {
			t.Errorf("Branch(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
}

// TestBaseOf: where a branch loopr just made starts — the branch checked
// out for HEAD ("" when detached), another branch by its name — and the
// commit it was made at, even once its base has moved on.
func TestBaseOf(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newRepo(t)
	head := gitT(t, r.Root, "rev-parse", "HEAD")
	if err := r.EnsurePlanBranch(ctx, "loopr/plan-p1"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.BaseOf(ctx, "loopr/plan-p1", "HEAD"); err != nil || got != (loop.Base{Branch: "main", Commit: head}) {
		t.Errorf("BaseOf(plan, HEAD) = %+v, %v; want main at %s", got, err, head)
	}
	if _, err := r.AddWorktree(ctx, "T1", "loopr/task-t1", "loopr/plan-p1"); err != nil {
		t.Fatal(err)
	}
	ralph(t, r, "plan-p1", "T2", map[string]string{"x.txt": "moved\n"}) // work merged into the plan branch since:
	gitT(t, r.Root, "update-ref", "refs/heads/loopr/plan-p1", "refs/heads/loopr/T2")
	if got, err := r.BaseOf(ctx, "loopr/task-t1", "loopr/plan-p1"); err != nil || got != (loop.Base{Branch: "loopr/plan-p1", Commit: head}) {
		t.Errorf("BaseOf(task, plan) = %+v, %v; want the plan branch at %s", got, err, head)
	}
	gitT(t, r.Root, "checkout", "-q", "--detach")
	if got, err := r.BaseOf(ctx, "loopr/task-t1", "HEAD"); err != nil || got != (loop.Base{Commit: head}) {
		t.Errorf("BaseOf with a detached HEAD = %+v, %v; want no branch, the commit", got, err)
	}
	if _, err := r.BaseOf(ctx, "loopr/none", "HEAD"); err == nil {
		t.Error("BaseOf(a missing branch) = nil error")
	}
}
