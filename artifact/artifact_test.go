package artifact

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

const goodPlan = `# Plan: Add a cache

We add an LRU cache in front of the store.

## Specs

### Spec 1: Cache package
An LRU with a size bound.

**Conflicts:** cache

### Spec 2: Wire it in
Use the cache from the store.

## Notes

Nothing else.
`

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		typ  string
		in   string
		want Doc
	}{
		{
			name: "plan",
			typ:  "plan",
			in:   goodPlan,
			want: Doc{Type: "plan", Title: "Add a cache", Sections: []Section{
				{N: 1, Name: "Cache package", Text: "### Spec 1: Cache package\nAn LRU with a size bound.\n\n**Conflicts:** cache", ConflictKey: "cache"},
				{N: 2, Name: "Wire it in", Text: "### Spec 2: Wire it in\nUse the cache from the store."},
			}},
		},
		{
			name: "spec",
			typ:  "spec",
			in:   "# Spec: Cache\n\n## Phases\n### Phase 1: Types\nbody\n",
			want: Doc{Type: "spec", Title: "Cache", Sections: []Section{{N: 1, Name: "Types", Text: "### Phase 1: Types\nbody"}}},
		},
		{
			name: "phase with sub-headings in a task",
			typ:  "phase",
			in:   "# Phase: Types\n## Tasks\n### Task 1: Define Entry\n#### Acceptance\n- it compiles\n### Task 2: Define LRU\n",
			want: Doc{Type: "phase", Title: "Types", Sections: []Section{
				{N: 1, Name: "Define Entry", Text: "### Task 1: Define Entry\n#### Acceptance\n- it compiles"},
				{N: 2, Name: "Define LRU", Text: "### Task 2: Define LRU"},
			}},
		},
		{
			name: "leading blank lines, CRLF, closing hashes, loose case",
			typ:  "plan",
			in:   "\r\n\r\n# plan:  Windows  #\r\n## SPECS ##\r\n  ### spec 1 : One ###\r\ntext\r\n",
			want: Doc{Type: "plan", Title: "Windows", Sections: []Section{{N: 1, Name: "One", Text: "### spec 1 : One ###\ntext"}}},
		},
		{
			name: "headings in fenced code are text",
			typ:  "plan",
			in:   "# Plan: P\n```md\n## Specs\n### Spec 9: fake\n```\n## Specs\n### Spec 1: Real\n~~~~\n### Spec 2: also fake\n## Notes\n~~~\n~~~~\n### Spec 2: Second\n",
			want: Doc{Type: "plan", Title: "P", Sections: []Section{
				{N: 1, Name: "Real", Text: "### Spec 1: Real\n~~~~\n### Spec 2: also fake\n## Notes\n~~~\n~~~~"},
				{N: 2, Name: "Second", Text: "### Spec 2: Second"},
			}},
		},
		{
			name: "conflict key variants and only the first counts",
			typ:  "phase",
			in:   "# Phase: X\n## Tasks\n### Task 1: A\n- **Conflicts**: `store/bolt.go`\n**Conflicts:** other\n### Task 2: B\n```\n**Conflicts:** in-code\n```\n",
			want: Doc{Type: "phase", Title: "X", Sections: []Section{
				{N: 1, Name: "A", Text: "### Task 1: A\n- **Conflicts**: `store/bolt.go`\n**Conflicts:** other", ConflictKey: "store/bolt.go"},
				{N: 2, Name: "B", Text: "### Task 2: B\n```\n**Conflicts:** in-code\n```"},
			}},
		},
		{
			name: "best-of-N: fanout and agents",
			typ:  "phase",
			in:   "# Phase: X\n## Tasks\n### Task 1: A\n**Fanout:** 3\n- **Agents**: claude, `codex`\n### Task 2: B\n```\n**Fanout:** 9\n```\n",
			want: Doc{Type: "phase", Title: "X", Sections: []Section{
				{N: 1, Name: "A", Text: "### Task 1: A\n**Fanout:** 3\n- **Agents**: claude, `codex`", Fanout: 3, Agents: []string{"claude", "codex"}},
				{N: 2, Name: "B", Text: "### Task 2: B\n```\n**Fanout:** 9\n```"},
			}},
		},
		{
			name: "indented heading is code, hashtag is text",
			typ:  "plan",
			in:   "# Plan: P\n    ## Specs\n#Specs\n## Specs\n### Spec 1: A\n",
			want: Doc{Type: "plan", Title: "P", Sections: []Section{{N: 1, Name: "A", Text: "### Spec 1: A"}}},
		},
		{
			name: "free text and deeper headings before the first child",
			typ:  "plan",
			in:   "# Plan: P\n## Specs\nintro\n#### aside\n### Spec 1: A\n",
			want: Doc{Type: "plan", Title: "P", Sections: []Section{{N: 1, Name: "A", Text: "### Spec 1: A"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.typ, []byte(tt.in))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		typ      string
		in       string
		wantLine int
		want     string // substring of the message
	}{
		{"empty", "plan", "", 1, "missing the title heading `# Plan: <title>`"},
		{"text before title", "plan", "Here is the plan:\n# Plan: x\n", 1, "expected the title heading `# Plan: <title>` first"},
		{"wrong title keyword", "spec", "# Plan: x\n", 1, "expected the title heading `# Spec: <title>`"},
		{"level 2 title", "plan", "## Plan: x\n", 1, "expected the title heading"},
		{"code before title", "plan", "```\n# Plan: x\n```\n", 1, "found a code block"},
		{"empty title", "plan", "# Plan:   \n## Specs\n", 1, "empty title"},
		{"missing section", "plan", "# Plan: x\n\ntext\n", 3, "missing the `## Specs` section"},
		{"section inside unclosed fence", "plan", "# Plan: x\n```\n## Specs\n### Spec 1: a\n", 4, "never closed"},
		{"no children", "plan", "# Plan: x\n## Specs\nnothing\n", 2, "no `### Spec <n>: <name>` sections under `## Specs`"},
		{"children after the list ended", "plan", "# Plan: x\n## Specs\n## Other\n### Spec 1: a\n", 4, "outside the `## Specs` section, which the heading on line 3 ended"},
		{"child before section", "phase", "# Phase: x\n### Task 1: a\n## Tasks\n", 2, "comes before the `## Tasks` heading"},
		{"numbering starts at 2", "plan", "# Plan: x\n## Specs\n### Spec 2: a\n", 3, "numbered 2, expected 1"},
		{"numbering skips", "plan", "# Plan: x\n## Specs\n### Spec 1: a\n### Spec 3: c\n", 4, "numbered 3, expected 2"},
		{"numbering repeats", "spec", "# Spec: x\n## Phases\n### Phase 1: a\n### Phase 1: b\n", 4, "numbered 1, expected 2"},
		{"huge number", "plan", "# Plan: x\n## Specs\n### Spec 99999999999999999999999: a\n", 3, "expected 1"},
		{"empty name", "plan", "# Plan: x\n## Specs\n### Spec 1:   \n", 3, "empty name"},
		{"malformed child heading", "plan", "# Plan: x\n## Specs\n### Spec 1 - a\n", 3, "expected `### Spec <n>: <name>` under `## Specs`"},
		{"other level 3 heading in list", "plan", "# Plan: x\n## Specs\n### Spec 1: a\n### Notes\n", 4, "found \"### Notes\""},
		{"duplicate section", "plan", "# Plan: x\n## Specs\n### Spec 1: a\n## Specs\n", 4, "a second `## Specs` heading (the first is on line 2)"},
		{"duplicate section later", "plan", "# Plan: x\n## Specs\n### Spec 1: a\n## B\n## Specs\n", 5, "a second `## Specs`"},
		{"invalid utf-8", "plan", "# Plan: x\n## Specs\n### Spec 1: a\xff\n", 3, "invalid UTF-8"},
		{"fanout not a number", "phase", "# Phase: x\n## Tasks\n### Task 1: a\n**Fanout:** three\n", 4, "**Fanout:** \"three\": write a number of candidates from 1 to 16"},
		{"fanout too large", "phase", "# Phase: x\n## Tasks\n### Task 1: a\n**Fanout:** 17\n", 4, "from 1 to 16"},
		{"agents empty", "phase", "# Phase: x\n## Tasks\n### Task 1: a\n**Agents:** ,\n", 4, "**Agents:** names 0 agent profiles"},
		{"too big", "plan", "# Plan: x\n" + strings.Repeat("a", MaxSize), 0, "more than the 1048576 byte (1 MiB) limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.typ, []byte(tt.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse() error = %v, want a *ParseError", err)
			}
			if pe.Line != tt.wantLine {
				t.Errorf("Parse() error line = %d, want %d (%v)", pe.Line, tt.wantLine, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseUnknownType(t *testing.T) {
	t.Parallel()
	for _, typ := range []string{"ralph", "review", ""} {
		if _, err := Parse(typ, []byte(goodPlan)); err == nil {
			t.Errorf("Parse(%q) error = nil, want an error", typ)
		}
	}
}

func TestParseErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Parse("plan", []byte("# Plan: x\n\nfree text\n"))
	want := "line 3: missing the `## Specs` section: after the title and free text, write `## Specs`, then one `### Spec <n>: <name>` heading per spec"
	if err == nil || err.Error() != want {
		t.Errorf("Parse() error = %v, want %q", err, want)
	}
}

func TestFormatOf(t *testing.T) {
	t.Parallel()
	got, ok := FormatOf("phase")
	if want := (Format{Heading: "Phase", Section: "Tasks", Child: "Task"}); !ok || got != want {
		t.Errorf("FormatOf(phase) = %v, %v; want %v, true", got, ok, want)
	}
	if _, ok := FormatOf("ralph"); ok {
		t.Error("FormatOf(ralph) ok = true, want false")
	}
}

// FuzzParse checks that Parse never panics and that every Doc it accepts
// keeps the promises callers rely on when they spawn children.
func FuzzParse(f *testing.F) {
	f.Add("plan", []byte(goodPlan))
	f.Add("spec", []byte("# Spec: S\n## Phases\n### Phase 1: a\n```\n### Phase 2: b\n"))
	f.Add("phase", []byte("# Phase: P\r\n## Tasks\r\n### Task 1: a ##\r\n**Conflicts:** k\r\n"))
	f.Add("phase", []byte("# Phase: P\n## Tasks\n### Task 1: a\n### Task 2: b\n**Depends on:** 1\n### Task 3: c\n**Depends on:** a, Task 2\n"))
	f.Add("spec", []byte("# Spec: S\n## Phases\n### Phase 1: a\n**Depends on:** 2\n### Phase 2: b\n**Depends on:** 1\n"))
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		doc, err := Parse(typ, data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("Parse() returned an empty error message")
			}
			return
		}
		if doc.Type != typ {
			t.Errorf("Doc.Type = %q, want %q", doc.Type, typ)
		}
		if doc.Title == "" || !utf8.ValidString(doc.Title) {
			t.Errorf("Doc.Title = %q, want non-empty UTF-8", doc.Title)
		}
		if len(doc.Sections) == 0 {
			t.Fatal("accepted a Doc with no sections")
		}
		for i, s := range doc.Sections {
			if s.N != i+1 {
				t.Errorf("Sections[%d].N = %d, want %d", i, s.N, i+1)
			}
			if strings.TrimSpace(s.Name) == "" || !utf8.ValidString(s.Name) {
				t.Errorf("Sections[%d].Name = %q, want non-empty UTF-8", i, s.Name)
			}
			if !strings.Contains(s.Text, s.Name) {
				t.Errorf("Sections[%d].Text = %q does not contain its name %q", i, s.Text, s.Name)
			}
			for j, k := range s.DependsOn { // earlier siblings only, ascending: the order cannot deadlock
				if k < 1 || k >= s.N || j > 0 && k <= s.DependsOn[j-1] {
					t.Errorf("Sections[%d].DependsOn = %v: want ascending numbers below %d", i, s.DependsOn, s.N)
				}
			}
		}
	})
}
