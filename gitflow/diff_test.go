package gitflow

import (
	"strings"
	"testing"
)

// TestReadPatch: a patch over its bound is cut before the last hunk or
// file header that began whole entries, counting a line longer than the
// reader's buffer once and never mistaking its middle for a header.
func TestReadPatch(t *testing.T) {
	t.Parallel()
	long := "+" + strings.Repeat("x", 200<<10) + "diff --git a/fake b/fake\n" // one line, over the 64 KiB buffer
	fileA := "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\n"
	fileB := "diff --git a/b b/b\n--- a/b\n+++ b/b\n@@ -0,0 +1,2 @@\n" + long + "+y\n"
	patch := fileA + fileB
	tests := []struct {
		name            string
		maxLines, bytes int
		want            string
		cut             bool
	}{
		{"whole", 0, 0, patch, false},
		{"lines: the long line counts once", 12, 0, patch, false},
		{"lines: cut before the second file's hunk", 11, 0, fileA + "diff --git a/b b/b\n--- a/b\n+++ b/b\n", true},
		{"bytes: cut before the second file's hunk", 0, len(fileA) + 100, fileA + "diff --git a/b b/b\n--- a/b\n+++ b/b\n", true},
		{"one line allowed: nothing whole", 1, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut, err := readPatch(strings.NewReader(patch), tt.maxLines, tt.bytes)
			if err != nil || cut != tt.cut || got != tt.want {
				t.Errorf("readPatch() = %d bytes (%q…), cut %v, %v; want %d bytes, cut %v", len(got), head(got), cut, err, len(tt.want), tt.cut)
			}
		})
	}
}

func head(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
