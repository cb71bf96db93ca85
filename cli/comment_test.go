package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// TestCommentsFit: on an 80-column terminal `loopr comments` cuts each
// text to what is left of the line (a comment answered by an iteration
// has a 32-column state); not on a terminal, texts are cut at 60 runes.
func TestCommentsFit(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("name it better, and say why in the doc comment ", 4)
	cs := []api.Comment{
		{Loop: "01JD3K9Q5ZB7X0000000000AAA", Type: "ralph", State: "answered by iteration 12 (passed)", Comment: loop.Comment{Seq: 1, Path: "store/bolt.go", Line: 1204, Text: long}},
		{Loop: "01JD3K9Q5ZB7X0000000000BBB", Type: "ralph", State: "sent", Comment: loop.Comment{Seq: 2, Path: "a.go", Line: 1, Text: "short"}},
	}
	for _, width := range []int{80, 0} {
		var out bytes.Buffer
		if err := printComments(&out, cs, width); err != nil {
			t.Fatal(err)
		}
		t.Logf("width %d:\n%s", width, out.String())
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if width == 0 && (len(lines) != 3 || !strings.HasSuffix(lines[2], "  short") || !strings.Contains(lines[1], "name it better")) {
			t.Errorf("not on a terminal: want a header and two rows ending in their text:\n%s", out.String())
		}
		if width == 80 && (len(lines) != 5 || lines[4] != "    short" || !strings.HasPrefix(lines[2], "    name it better")) {
			t.Errorf("at 80 columns: want a header and two rows, each text under its row:\n%s", out.String())
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); width > 0 && n > width {
				t.Errorf("width %d: %d columns: %q", width, n, l)
			}
		}
	}
}

// TestParseLineRef: PATH:LINE as a shell or an editor writes it; a
// leading ./ (tab completion at the root) is the same path.
func TestParseLineRef(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"cmd/main.go:42": "cmd/main.go", "./cmd/main.go:42": "cmd/main.go", "a:b.go:42": "a:b.go"} {
		req, err := parseLineRef(in)
		if err != nil || req.Path != want || req.Line != 42 {
			t.Errorf("parseLineRef(%q) = %+v, %v; want %s line 42", in, req, err, want)
		}
	}
	for _, in := range []string{"main.go", "main.go:0", ":3", "main.go:x"} {
		if _, err := parseLineRef(in); err == nil {
			t.Errorf("parseLineRef(%q) = nil error", in)
		}
	}
}
