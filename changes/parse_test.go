package changes

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/api"
)

// TestParse parses a patch real git printed (testdata/all.patch: see
// its files) — a binary change, a new file whose name has a non-UTF-8
// byte and a newline, a deletion, a rename with an edit, lines without a
// newline at the end, a mode change and a name with a space.
func TestParse(t *testing.T) {
	t.Parallel()
	patch, err := os.ReadFile("testdata/all.patch")
	if err != nil {
		t.Fatal(err)
	}
	files, added, removed, err := Parse(string(patch))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []api.DiffFile{
		{Path: "bin.dat", Status: api.DiffModified, Binary: true, Hunks: []api.DiffHunk{}},
		{Path: "caf\xe9\nx.txt", Status: api.DiffAdded, NewMode: "100644", Added: 1, Hunks: []api.DiffHunk{{
			Header: "@@ -0,0 +1 @@", OldStart: 0, OldLines: 0, NewStart: 1, NewLines: 1,
			Lines: []api.DiffLine{{Kind: api.DiffAdd, NewLine: 1, Text: "n"}},
		}}},
		{Path: "del.txt", Status: api.DiffDeleted, OldMode: "100644", Removed: 1, Hunks: []api.DiffHunk{{
			Header: "@@ -1 +0,0 @@", OldStart: 1, OldLines: 1, NewStart: 0, NewLines: 0,
			Lines: []api.DiffLine{{Kind: api.DiffDel, OldLine: 1, Text: "gone"}},
		}}},
		{Path: "new.txt", OldPath: "old.txt", Status: api.DiffRenamed, Added: 1, Removed: 1, Hunks: []api.DiffHunk{{
			Header: "@@ -5,4 +5,4 @@ d", OldStart: 5, OldLines: 4, NewStart: 5, NewLines: 4,
			Lines: []api.DiffLine{
				{Kind: api.DiffContext, OldLine: 5, NewLine: 5, Text: "e"},
				{Kind: api.DiffContext, OldLine: 6, NewLine: 6, Text: "f"},
				{Kind: api.DiffContext, OldLine: 7, NewLine: 7, Text: "g"},
				{Kind: api.DiffDel, OldLine: 8, Text: "h"},
				{Kind: api.DiffAdd, NewLine: 8, Text: "H"},
			},
		}}},
		{Path: "noeol.txt", Status: api.DiffModified, Added: 1, Removed: 1, Hunks: []api.DiffHunk{{
			Header: "@@ -1 +1 @@", OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 1,
			Lines: []api.DiffLine{
				{Kind: api.DiffDel, OldLine: 1, Text: "x", NoEOL: true},
				{Kind: api.DiffAdd, NewLine: 1, Text: "y", NoEOL: true},
			},
		}}},
		{Path: "run.sh", Status: api.DiffMode, OldMode: "100644", NewMode: "100755", Hunks: []api.DiffHunk{}},
		{Path: "with space.txt", Status: api.DiffModified, Added: 1, Hunks: []api.DiffHunk{{
			Header: "@@ -1 +1,2 @@", OldStart: 1, OldLines: 1, NewStart: 1, NewLines: 2,
			Lines: []api.DiffLine{
				{Kind: api.DiffContext, OldLine: 1, NewLine: 1, Text: "hi"},
				{Kind: api.DiffAdd, NewLine: 2, Text: "there"},
			},
		}}},
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
	if added != 4 || removed != 3 {
		t.Errorf("Parse() totals = +%d -%d, want +4 -3", added, removed)
	}
}

// TestParseEmpty: no patch, no files, and never nil.
func TestParseEmpty(t *testing.T) {
	t.Parallel()
	files, added, removed, err := Parse("")
	if err != nil || files == nil || len(files) != 0 || added != 0 || removed != 0 {
		t.Errorf("Parse(\"\") = %v, %d, %d, %v; want [], 0, 0, nil", files, added, removed, err)
	}
}

// FuzzParse: the parser never panics, and what it returns adds up.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("testdata/all.patch"); err == nil {
		f.Add(string(b))
	}
	f.Add("diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Fuzz(func(t *testing.T, patch string) {
		files, added, removed, err := Parse(patch)
		if err != nil {
			return
		}
		a, r := 0, 0
		for _, f := range files {
			a += f.Added
			r += f.Removed
		}
		if a != added || r != removed {
			t.Errorf("totals +%d -%d, files sum to +%d -%d", added, removed, a, r)
		}
	})
}
