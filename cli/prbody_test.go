package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
)

func TestParseRemoteURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url string
		want      ghRepo
		wantErr   bool
	}{
		{"https", "https://github.com/acme/shop.git", ghRepo{"github.com", "acme", "shop"}, false},
		{"https no .git", "https://github.com/acme/shop", ghRepo{"github.com", "acme", "shop"}, false},
		{"https with a port", "https://127.0.0.1:8443/acme/shop.git", ghRepo{"127.0.0.1:8443", "acme", "shop"}, false},
		{"ssh url", "ssh://git@ghe.example.com:2222/acme/shop.git", ghRepo{"ghe.example.com", "acme", "shop"}, false},
		{"scp form", "git@github.com:acme/shop.git", ghRepo{"github.com", "acme", "shop"}, false},
		{"a local path", "/srv/git/shop.git", ghRepo{}, true},
		{"too deep", "https://github.com/acme/shop/extra", ghRepo{}, true},
		{"file url", "file:///srv/git/acme/shop.git", ghRepo{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRemoteURL(tt.url)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseRemoteURL(%q) = %+v, %v; want %+v, error %v", tt.url, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestPRBody: the title, the summary, a row per loop with its evidence's
// exit codes and cost, the total; a tree too big for GitHub's limit is cut
// with a note and the total still there.
func TestPRBody(t *testing.T) {
	t.Parallel()
	plan := loop.Loop{ID: "01JD3K9Q5ZB7X00000000PPPPP", Type: loop.Plan, Title: "Add | login", Status: loop.Complete, Iteration: 1, MaxIterations: 3,
		Usage: loop.Usage{CostUSD: 0.5}}
	task := loop.Loop{ID: "01JD3K9Q5ZB7X00000000TTTTT", Type: loop.Ralph, Title: "Write\nit", Status: loop.Complete, Iteration: 2, MaxIterations: 5,
		Usage:    loop.Usage{CostUSD: 1.25, InputTokens: 1000},
		Evidence: []loop.Evidence{{ExitCode: 0, Where: loop.WhereWorktree}, {ExitCode: 0, Where: loop.WhereMerge}}}
	got := prBody(plan, "Why: users want it.", []loop.Loop{plan, task}, loop.Usage{CostUSD: 1.75, InputTokens: 1000})
	want := "## Add \\| login\n\nWhy: users want it.\n\n### The tree\n\n" +
		"| id | type | title | status | iterations | evidence (exit codes) | cost |\n|---|---|---|---|---|---|---|\n" +
		"| 000ppppp | plan | Add \\| login | complete | 1/3 | - | $0.50 |\n" +
		"| 000ttttt | ralph | Write it | complete | 2/5 | 0 · merge 0 | $1.25 |\n" +
		"\n**Total cost:** $1.75 over 2 loops (1.0k tokens)\n\n<sub>Made by loopr: `loopr pr 000ppppp` updates this description.</sub>\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prBody() mismatch (-want +got):\n%s", diff)
	}

	var tree []loop.Loop
	for i := range 2000 {
		tree = append(tree, loop.Loop{ID: fmt.Sprintf("L%05d", i), Type: loop.Ralph, Title: strings.Repeat("long title ", 10), Status: loop.Complete})
	}
	big := prBody(plan, "", tree, loop.Usage{CostUSD: 9})
	if n := len([]rune(big)); n > MaxPRBody || !strings.Contains(big, "The table is cut here") || !strings.Contains(big, "**Total cost:** $9.00 over 2000 loops") {
		t.Errorf("a 2000-loop body: %d characters, cut note %v, total %v", n, strings.Contains(big, "cut here"), strings.Contains(big, "Total cost"))
	}
}

func TestPlanSummary(t *testing.T) {
	t.Parallel()
	if got := planSummary("# Plan: x\n\nUsers want y.\nSo z.\n\n## Specs\n\n### Spec 1\n"); got != "Users want y.\nSo z." {
		t.Errorf("planSummary() = %q", got)
	}
}
