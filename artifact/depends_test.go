package artifact

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// phaseOf is a phase artifact whose tasks have the given bodies.
func phaseOf(bodies ...string) string {
	var b strings.Builder
	b.WriteString("# Phase: Order\n\n## Tasks\n")
	for i, body := range bodies {
		b.WriteString("\n### Task " + string(rune('1'+i)) + ": " + []string{"Schema", "Store, cache", "API", "Docs", "Release"}[i] + "\n")
		if body != "" {
			b.WriteString(body + "\n")
		}
	}
	return b.String()
}

func TestParseDependsOn(t *testing.T) {
	t.Parallel()
	type deps struct {
		On  []int
		Set bool
	}
	tests := []struct {
		name   string
		bodies []string
		want   []deps
	}{
		{"none given", []string{"", "", ""}, []deps{{}, {}, {}}},
		{"numbers", []string{"", "", "**Depends on:** 1, 2"}, []deps{{}, {}, {[]int{1, 2}, true}}},
		{"numbers sorted and once", []string{"", "", "", "**Depends on:** 3, 1, #1, Task 3"}, []deps{{}, {}, {}, {[]int{1, 3}, true}}},
		{"names in any case, quoted", []string{"", "", "- **Depends on**: schema; `store, CACHE`"}, []deps{{}, {}, {[]int{1, 2}, true}}},
		{"a title with a comma, whole", []string{"", "", "**Depends on:** Store, cache"}, []deps{{}, {}, {[]int{2}, true}}},
		{"several lines add up", []string{"", "", "**Depends on:** 1\ntext\n**Depends-on:** 2."}, []deps{{}, {}, {[]int{1, 2}, true}}},
		{"none is an answer", []string{"", "**Depends on:** none"}, []deps{{}, {nil, true}}},
		{"inside a code block: text", []string{"", "```\n**Depends on:** 1\n```"}, []deps{{}, {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc, err := Parse("phase", []byte(phaseOf(tt.bodies...)))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			var got []deps
			for _, s := range doc.Sections {
				got = append(got, deps{s.DependsOn, s.DependsSet})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() dependencies mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDependsOnErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		bodies   []string
		wantLine int
		want     string
	}{
		{"forward reference", []string{"**Depends on:** 2", ""}, 6, "Task 1 depends on Task 2, which comes after it; a task may depend only on the tasks before it (this is the first task: it can depend on none)"},
		{"forward by title", []string{"", "**Depends on:** API", ""}, 8, "Task 2 depends on Task 3, which comes after it; a task may depend only on the tasks before it (1 \"Schema\")"},
		{"cycle", []string{"**Depends on:** 3", "", "**Depends on:** 1"}, 6, "a cycle: Task 1 → Task 3 → Task 1"},
		{"longer cycle", []string{"**Depends on:** 2", "**Depends on:** 3", "**Depends on:** 1"}, 6, "a cycle: Task 1 → Task 2 → Task 3 → Task 1"},
		{"itself", []string{"", "**Depends on:** Store, cache"}, 8, "Task 2 depends on itself"},
		{"unknown number", []string{"", "**Depends on:** 7"}, 8, "names task 7, but the tasks are numbered 1 to 2"},
		{"zero", []string{"", "**Depends on:** 0"}, 8, "names task 0"},
		{"unknown name", []string{"", "", "**Depends on:** 1, the database"}, 10, `names "the database", which is no task's number or name (the tasks: 1 "Schema", 2 "Store, cache", 3 "API")`},
		{"another type's number", []string{"", "**Depends on:** Phase 1"}, 8, `names "Phase 1"`},
		{"only separators", []string{"", "**Depends on:** , ;"}, 8, "names no task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("phase", []byte(phaseOf(tt.bodies...)))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse() error = %v, want a *ParseError", err)
			}
			if pe.Line != tt.wantLine || !strings.Contains(pe.Msg, tt.want) {
				t.Errorf("Parse() error = %q (line %d), want line %d containing %q", err, pe.Line, tt.wantLine, tt.want)
			}
		})
	}
}

// TestParseDependsOnNouns: errors name the artifact's own children.
func TestParseDependsOnNouns(t *testing.T) {
	t.Parallel()
	_, err := Parse("spec", []byte("# Spec: S\n## Phases\n### Phase 1: a\n**Depends on:** 2\n### Phase 2: b\n"))
	if want := "line 4: Phase 1 depends on Phase 2, which comes after it; a phase may depend only on the phases before it"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Parse(spec) error = %v, want it to start with %q", err, want)
	}
	doc, err := Parse("plan", []byte("# Plan: P\n## Specs\n### Spec 1: a\n### Spec 2: b\n**Depends on:** Spec 1\n"))
	if err != nil || !cmp.Equal(doc.Sections[1].DependsOn, []int{1}) {
		t.Errorf("Parse(plan) = %v, %v; want spec 2 to depend on 1", doc.Sections, err)
	}
}
