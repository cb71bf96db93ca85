package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
)

func TestQuoteName(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", "a/b.go", "a/b.go"},
		{"space", "beta notes.txt", "beta notes.txt"},
		{"utf-8", "café.md", "café.md"},
		{"newline", "a\nb", `"a\nb"`},
		{"tab", "a\tb", `"a\tb"`},
		{"not utf-8", "caf\xe9", `"caf\351"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"escape", "x\x1b[31m", `"x\033[31m"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quoteName(tt.in); got != tt.want {
				t.Errorf("quoteName(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestPrintStat: names aligned, counts right-aligned, bars scaled to the
// width with at least one mark per change, binary files said, git's
// summary line.
func TestPrintStat(t *testing.T) {
	t.Parallel()
	d := api.Diff{Added: 124, Removed: 3, Files: []api.DiffFile{
		{Path: "a.go", Status: api.DiffModified, Added: 4, Removed: 3},
		{Path: "docs/new name.md", OldPath: "docs/old.md", Status: api.DiffRenamed, Added: 120},
		{Path: "logo.png", Status: api.DiffAdded, Binary: true},
	}}
	var b bytes.Buffer
	printStat(&b, d, 70, false)
	want := []string{
		" a.go                            |   7 +-",
		" docs/old.md => docs/new name.md | 120 " + strings.Repeat("+", 29),
		" logo.png                        | Bin",
		" 3 files changed, 124 insertions(+), 3 deletions(-)",
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printStat() mismatch (-want +got):\n%s", diff)
	}
	for _, l := range got {
		if n := len([]rune(l)); n > 70 {
			t.Errorf("line of %d columns, over 70: %q", n, l)
		}
	}
	// A name too long for the width loses its start, not the bar.
	b.Reset()
	long := strings.Repeat("deep/", 12) + "file.go"
	printStat(&b, api.Diff{Added: 2, Files: []api.DiffFile{{Path: long, Added: 2}}}, 40, false)
	first := strings.Split(b.String(), "\n")[0]
	if n := len([]rune(first)); n > 39 || !strings.Contains(first, "...") || !strings.HasSuffix(first, "/file.go | 2 ++") {
		t.Errorf("a long name at width 40: %q (%d columns)", first, n)
	}
}

// TestPrintPatch: git's headers for each kind of file; colour only when
// asked; a line's text escaped only on a terminal.
func TestPrintPatch(t *testing.T) {
	t.Parallel()
	d := api.Diff{Files: []api.DiffFile{
		{Path: "n.txt", Status: api.DiffAdded, NewMode: "100644", Added: 1, Hunks: []api.DiffHunk{{Header: "@@ -0,0 +1 @@", NewStart: 1, NewLines: 1,
			Lines: []api.DiffLine{{Kind: api.DiffAdd, NewLine: 1, Text: "hi\x1b[2J", NoEOL: true}}}}},
		{Path: "new.go", OldPath: "old.go", Status: api.DiffRenamed, Hunks: []api.DiffHunk{}},
		{Path: "run.sh", Status: api.DiffMode, OldMode: "100644", NewMode: "100755", Hunks: []api.DiffHunk{}},
		{Path: "gone.bin", Status: api.DiffDeleted, OldMode: "100644", Binary: true, Hunks: []api.DiffHunk{}},
	}}
	var b bytes.Buffer
	printPatch(&b, d, false, false)
	want := "diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+hi\x1b[2J\n\\ No newline at end of file\n" +
		"diff --git a/old.go b/new.go\nrename from old.go\nrename to new.go\n" +
		"diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n" +
		"diff --git a/gone.bin b/gone.bin\ndeleted file mode 100644\nBinary files a/gone.bin and /dev/null differ\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printPatch(piped) mismatch (-want +got):\n%s", diff)
	}
	b.Reset()
	printPatch(&b, d, true, true)
	if out := b.String(); !strings.Contains(out, "\x1b[32m+hi\\x1b[2J\x1b[m") || !strings.Contains(out, "\x1b[1mdiff --git a/n.txt b/n.txt\x1b[m") {
		t.Errorf("printPatch(terminal, colour): no colour or the agent's escape not escaped:\n%q", out)
	}
}
