package tui

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestConflictLines: the why pane names each predicted conflict from the
// selected loop's side, and clips to the pane's width.
func TestConflictLines(t *testing.T) {
	t.Parallel()
	m := testModel(newFake())
	why := api.Why{
		Loop: loop.Loop{ID: "01JD3K00000000000000000BBB"},
		Conflicts: []api.Conflict{
			{Loop: "01JD3K00000000000000000AAA", Title: "One", With: api.ConflictWithLoop,
				Other: "01JD3K00000000000000000BBB", OtherTitle: "Two", Files: []string{"a.go", "b.go"}},
			{Loop: "01JD3K00000000000000000BBB", Title: "Two", With: api.ConflictWithPlan,
				Other: "01JD3K00000000000000000PPP", Files: []string{"go.mod"}},
		},
		ConflictCheck: "git too old",
	}
	want := []string{
		` ⚠ conflicts with 00000aaa "One" in a.go, b.go`,
		` ⚠ conflicts with the plan tip in go.mod`,
		` ? conflict radar: git too old`,
	}
	if diff := cmp.Diff(want, m.conflictLines(why, 80)); diff != "" {
		t.Errorf("conflictLines() mismatch (-want +got)\n%s", diff)
	}
	for _, l := range m.conflictLines(why, 20) {
		if n := len([]rune(l)); n > 20 {
			t.Errorf("line %q is %d wide, want at most 20", l, n)
		}
	}
	if got := m.conflictLines(api.Why{}, 80); len(got) != 0 {
		t.Errorf("no conflicts: %q, want no lines", strings.Join(got, "|"))
	}
}
