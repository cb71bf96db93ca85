package artifact

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Order between siblings: a line `**Depends on:** 1, 3` in a child's body
// names the earlier children of the same artifact that must be done before
// it starts, by number ("1", "#1", "Task 1") or by name. `**Depends on:**
// none` says it depends on nothing, whatever the parent type's children:
// setting would give it. A child may depend only on children before it, so
// the order can never deadlock: a name of the child itself or of a later
// one is an error (a cycle when the later one depends back on it), and so
// is a name that matches no child.

var dependsLine = regexp.MustCompile(`(?i)^(?:[-*+]\s+)?\*\*depends[ -]on:?\*\*:?\s*(.*)$`)

// depRef is one **Depends on:** line of a section, before it is resolved.
type depRef struct {
	line int
	text string
}

// dependsRef returns the value of a "**Depends on:** …" line and true, or
// false for any other line.
func dependsRef(line string) (string, bool) {
	m := dependsLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

// noDeps are the values that say "depends on nothing".
var noDeps = []string{"", "none", "nothing", "-", "—", "n/a"}

// unquote strips what agents put around a name: quotes, backticks, emphasis
// and a final period.
func unquote(s string) string {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "."))
	return strings.TrimSpace(strings.Trim(s, "`\"'*_“”‘’"))
}

// resolveDeps turns the **Depends on:** lines of each section (refs[i] for
// doc.Sections[i]) into DependsOn numbers, or returns the first error,
// with its line.
func resolveDeps(doc *Doc, refs [][]depRef, child string) error {
	noun := strings.ToLower(child)
	resolved := make([][]int, len(doc.Sections))
	lineOf := make([]map[int]int, len(doc.Sections)) // section → dependency → its line
	for i, rs := range refs {
		sec := &doc.Sections[i]
		for _, r := range rs {
			sec.DependsSet = true
			nums, err := resolveRef(doc.Sections, r, child, noun)
			if err != nil {
				return err
			}
			for _, k := range nums {
				if lineOf[i] == nil {
					lineOf[i] = map[int]int{}
				}
				if _, seen := lineOf[i][k]; !seen {
					lineOf[i][k] = r.line
					resolved[i] = append(resolved[i], k)
				}
			}
		}
	}
	for i := range doc.Sections {
		sec := &doc.Sections[i]
		for _, k := range resolved[i] {
			line := lineOf[i][k]
			switch {
			case k == sec.N:
				return errAt(line, "%s %d depends on itself: name only the %ss before it", child, sec.N, noun)
			case k > sec.N:
				if path := depPath(resolved, k, sec.N); path != nil {
					steps := make([]string, 0, len(path)+1)
					steps = append(steps, fmt.Sprintf("%s %d", child, sec.N))
					for _, n := range path {
						steps = append(steps, fmt.Sprintf("%s %d", child, n))
					}
					return errAt(line, "a cycle: %s; a %s may depend only on the %ss before it", strings.Join(steps, " → "), noun, noun)
				}
				return errAt(line, "%s %d depends on %s %d, which comes after it; a %s may depend only on the %ss before it%s",
					child, sec.N, child, k, noun, noun, before(doc.Sections, sec.N, noun))
			}
		}
		slices.Sort(resolved[i])
		sec.DependsOn = resolved[i]
	}
	return nil
}

// resolveRef resolves one line's names to section numbers.
func resolveRef(secs []Section, r depRef, child, noun string) ([]int, error) {
	text := unquote(r.text)
	if slices.Contains(noDeps, strings.ToLower(text)) {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(r.text, ";") {
		if strings.Contains(part, ",") { // a name with commas in it, whole
			k, ok, err := byName(secs, unquote(part), r.line, noun)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, k)
				continue
			}
		}
		for item := range strings.SplitSeq(part, ",") {
			if item = unquote(item); item == "" {
				continue
			}
			k, err := resolveItem(secs, item, r.line, child, noun)
			if err != nil {
				return nil, err
			}
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errAt(r.line, "**Depends on:** names no %s: write the numbers or names of earlier %ss (`**Depends on:** 1, 2`), or `none`", noun, noun)
	}
	return out, nil
}

// numbered matches a dependency by number: "3", "#3", "Task 3".
var numbered = regexp.MustCompile(`(?i)^(?:([a-z]+)\s*)?#?\s*([0-9]+)$`)

// resolveItem resolves one name: a number, or a section's name.
func resolveItem(secs []Section, item string, line int, child, noun string) (int, error) {
	if m := numbered.FindStringSubmatch(item); m != nil && (m[1] == "" || strings.EqualFold(m[1], child)) {
		k, err := strconv.Atoi(m[2])
		if err != nil || k < 1 || k > len(secs) {
			return 0, errAt(line, "**Depends on:** names %s %s, but the %ss are numbered 1 to %d", noun, m[2], noun, len(secs))
		}
		return k, nil
	}
	k, ok, err := byName(secs, item, line, noun)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errAt(line, "**Depends on:** names %q, which is no %s's number or name (the %ss: %s)", clip(item), noun, noun, names(secs))
	}
	return k, nil
}

// byName finds the section called name (any case); two of that name are an
// error.
func byName(secs []Section, name string, line int, noun string) (int, bool, error) {
	found := 0
	for _, s := range secs {
		if strings.EqualFold(s.Name, name) {
			if found != 0 {
				return 0, false, errAt(line, "**Depends on:** names %q, the name of %ss %d and %d: use the number", clip(name), noun, found, s.N)
			}
			found = s.N
		}
	}
	return found, found != 0, nil
}

// depPath returns a path of dependencies from section from to section to
// (the sections after from on it, to included), or nil.
func depPath(deps [][]int, from, to int) []int {
	seen := map[int]bool{}
	var walk func(n int) []int
	walk = func(n int) []int {
		if seen[n] {
			return nil
		}
		seen[n] = true
		for _, k := range deps[n-1] {
			if k == to {
				return []int{to}
			}
			if p := walk(k); p != nil {
				return append([]int{k}, p...)
			}
		}
		return nil
	}
	if p := walk(from); p != nil {
		return append([]int{from}, p...)
	}
	return nil
}

// before lists the sections before number n for an error: " (1 "A", 2 "B")".
func before(secs []Section, n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf(" (this is the first %s: it can depend on none)", noun)
	}
	return " (" + names(secs[:n-1]) + ")"
}

// names lists sections as `1 "A", 2 "B"`, the first ten.
func names(secs []Section) string {
	parts := make([]string, 0, min(len(secs), 11))
	for i, s := range secs {
		if i == 10 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%d %q", s.N, clip(s.Name)))
	}
	return strings.Join(parts, ", ")
}
