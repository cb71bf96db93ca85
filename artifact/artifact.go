// Package artifact parses the markdown artifacts that plan, spec and phase
// loops write (SPEC §7). An artifact has a title heading, free text, and one
// section that lists the children the loop spawns:
//
//	# Plan: <title>          # Spec: <title>          # Phase: <title>
//	## Specs                 ## Phases                ## Tasks
//	### Spec 1: <name>       ### Phase 1: <name>      ### Task 1: <name>
//
// A child's body may say which earlier siblings it starts after
// ("**Depends on:** 1, 3", depends.go), which conflict key it holds
// ("**Conflicts:** key"), and whether it runs as best-of-N candidates
// ("**Fanout:** 3", "**Agents:** claude, codex", fanout.go).
//
// Parse is pure and strict: agents get its error back as feedback, so every
// error names the line and says what was expected. The text it returns is
// untrusted (an agent wrote it); callers must not use titles or names as
// file paths.
package artifact

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxSize is the largest artifact Parse accepts, in bytes.
const MaxSize = 1 << 20

// Section is one child entry of an artifact: `### Spec <N>: <Name>` and the
// body under it.
type Section struct {
	N    int
	Name string
	// Text is the heading line plus the body under it, trimmed. It becomes
	// the child loop's task.
	Text string
	// ConflictKey is the key of a "**Conflicts:** key" line in the body, or "".
	ConflictKey string
	// DependsOn lists the numbers of the earlier sections this one depends
	// on ("**Depends on:** 1, 3" lines in the body, by number or name),
	// ascending; nil when none.
	DependsOn []int
	// DependsSet is true when the body has a **Depends on:** line, even
	// one that names nothing ("none"): the artifact decides the order, not
	// the parent type's `children:` setting.
	DependsSet bool
	// Fanout is the number of a "**Fanout:** N" line (best-of-N,
	// fanout.go), 0 without one.
	Fanout int
	// Agents lists the profiles of an "**Agents:** a, b" line, nil
	// without one.
	Agents []string
}

// Doc is a parsed artifact.
type Doc struct {
	Type     string
	Title    string
	Sections []Section
}

// Format names the headings of one artifact type.
type Format struct {
	Heading string // title keyword: "Plan" in "# Plan: <title>"
	Section string // child list heading: "Specs" in "## Specs"
	Child   string // child keyword: "Spec" in "### Spec 1: <name>"
}

var formats = map[string]Format{
	"plan":  {Heading: "Plan", Section: "Specs", Child: "Spec"},
	"spec":  {Heading: "Spec", Section: "Phases", Child: "Phase"},
	"phase": {Heading: "Phase", Section: "Tasks", Child: "Task"},
}

// FormatOf returns the headings of artifacts of type typ, and false for
// types that write no artifact (ralph and user types).
func FormatOf(typ string) (Format, bool) {
	f, ok := formats[typ]
	return f, ok
}

// ParseError is an error at a line of an artifact. Line is 1-based; 0 means
// the error concerns the whole file.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line <= 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

func errAt(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// compiled holds the heading patterns of one format.
type compiled struct {
	Format
	title *regexp.Regexp // matches the text of the level-1 title heading
	child *regexp.Regexp // matches the text of a level-3 child heading
}

var patterns = func() map[string]compiled {
	m := make(map[string]compiled, len(formats))
	for typ, f := range formats {
		m[typ] = compiled{
			Format: f,
			title:  regexp.MustCompile(`(?i)^` + f.Heading + `\s*:(.*)$`),
			child:  regexp.MustCompile(`(?i)^` + f.Child + `\s+([0-9]+)\s*:(.*)$`),
		}
	}
	return m
}()

var conflictLine = regexp.MustCompile(`(?i)^(?:[-*+]\s+)?\*\*conflicts:?\*\*:?\s*(.*)$`)

// Parse parses an artifact of type typ ("plan", "spec" or "phase"). An
// accepted Doc has a non-empty title and at least one section; sections are
// numbered 1..n in order and have non-empty names, and depend only on
// sections before them (depends.go). Headings inside fenced code blocks are
// text, not structure.
func Parse(typ string, data []byte) (Doc, error) {
	p, ok := patterns[typ]
	if !ok {
		return Doc{}, fmt.Errorf("artifact type %q: only plan, spec and phase loops write artifacts", typ)
	}
	if len(data) > MaxSize {
		return Doc{}, &ParseError{Msg: fmt.Sprintf("artifact is %d bytes, more than the %d byte (1 MiB) limit", len(data), MaxSize)}
	}
	titleForm := "`# " + p.Heading + ": <title>`"
	sectionForm := "`## " + p.Section + "`"
	childForm := "`### " + p.Child + " <n>: <name>`"

	doc := Doc{Type: typ}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}

	const (
		beforeTitle = iota // nothing but blank lines yet
		preamble           // after the title, before the child list
		inList             // under the child list heading
		after              // after another heading ended the child list
	)
	state := beforeTitle
	var (
		fence       codeFence // the open code fence, if any
		sectionLine int       // line of the child list heading
		endLine     int       // line of the heading that ended the child list
		cur         *Section
		body        []string
		refs        [][]depRef // the **Depends on:** lines of each section
	)
	flush := func() {
		if cur == nil {
			return
		}
		cur.Text = strings.TrimSpace(strings.Join(body, "\n"))
		doc.Sections = append(doc.Sections, *cur)
		cur, body = nil, nil
	}

	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSuffix(raw, "\r")
		if !utf8.ValidString(line) {
			return Doc{}, errAt(n, "invalid UTF-8")
		}
		if fence.open {
			if fence.closedBy(line) {
				fence = codeFence{}
			}
			if cur != nil {
				body = append(body, line)
			}
			continue
		}
		if f, ok := openFence(line); ok {
			if state == beforeTitle {
				return Doc{}, errAt(n, "expected the title heading %s first, found a code block", titleForm)
			}
			fence = f
			fence.line = n
			if cur != nil {
				body = append(body, line)
			}
			continue
		}

		level, text, isHeading := heading(line)
		switch state {
		case beforeTitle:
			if strings.TrimSpace(line) == "" {
				continue
			}
			if !isHeading || level != 1 {
				return Doc{}, errAt(n, "expected the title heading %s first, found %q", titleForm, clip(line))
			}
			m := p.title.FindStringSubmatch(text)
			if m == nil {
				return Doc{}, errAt(n, "expected the title heading %s, found %q", titleForm, clip(line))
			}
			doc.Title = strings.TrimSpace(m[1])
			if doc.Title == "" {
				return Doc{}, errAt(n, "the title heading %s has an empty title", titleForm)
			}
			state = preamble

		case preamble:
			if !isHeading {
				continue
			}
			switch {
			case level == 2 && strings.EqualFold(text, p.Section):
				state, sectionLine = inList, n
			case level == 3 && p.child.MatchString(text):
				return Doc{}, errAt(n, "%q comes before the %s heading; put every %s under %s", clip(line), sectionForm, childForm, sectionForm)
			}

		case inList:
			switch {
			case !isHeading, level >= 4:
				if cur != nil {
					body = append(body, line)
					if cur.ConflictKey == "" {
						cur.ConflictKey = conflictKey(line)
					}
					if v, ok := dependsRef(line); ok {
						refs[len(refs)-1] = append(refs[len(refs)-1], depRef{line: n, text: v})
					}
					if _, err := fanoutOf(cur, line, n); err != nil {
						return Doc{}, err
					}
					if _, err := agentsOf(cur, line, n); err != nil {
						return Doc{}, err
					}
				}
			case level <= 2:
				if level == 2 && strings.EqualFold(text, p.Section) {
					return Doc{}, errAt(n, "a second %s heading (the first is on line %d)", sectionForm, sectionLine)
				}
				flush()
				state, endLine = after, n
			default: // level 3
				m := p.child.FindStringSubmatch(text)
				if m == nil {
					return Doc{}, errAt(n, "expected %s under %s, found %q", childForm, sectionForm, clip(line))
				}
				want := len(doc.Sections) + 1
				if cur != nil {
					want++
				}
				num, err := strconv.Atoi(m[1])
				if err != nil || num != want {
					return Doc{}, errAt(n, "%q is numbered %s, expected %d (number the %s sections 1, 2, 3, ... in order)", clip(line), m[1], want, p.Child)
				}
				name := strings.TrimSpace(m[2])
				if name == "" {
					return Doc{}, errAt(n, "%q has an empty name (write %s)", clip(line), childForm)
				}
				flush()
				cur = &Section{N: num, Name: name}
				body = []string{strings.TrimSpace(line)}
				refs = append(refs, nil)
			}

		case after:
			if !isHeading {
				continue
			}
			switch {
			case level == 2 && strings.EqualFold(text, p.Section):
				return Doc{}, errAt(n, "a second %s heading (the first is on line %d)", sectionForm, sectionLine)
			case level == 3 && p.child.MatchString(text):
				return Doc{}, errAt(n, "%q is outside the %s section, which the heading on line %d ended; keep every %s together under %s", clip(line), sectionForm, endLine, childForm, sectionForm)
			}
		}
	}
	flush()

	var hint string
	if fence.open {
		hint = fmt.Sprintf(" (the code block opened on line %d is never closed)", fence.line)
	}
	switch {
	case state == beforeTitle:
		return Doc{}, errAt(1, "missing the title heading %s", titleForm)
	case sectionLine == 0:
		return Doc{}, errAt(len(lines), "missing the %s section: after the title and free text, write %s, then one %s heading per %s%s",
			sectionForm, sectionForm, childForm, strings.ToLower(p.Child), hint)
	case len(doc.Sections) == 0:
		return Doc{}, errAt(sectionLine, "no %s sections under %s%s", childForm, sectionForm, hint)
	}
	if err := resolveDeps(&doc, refs, p.Child); err != nil {
		return Doc{}, err
	}
	return doc, nil
}

// codeFence is an open fenced code block: its marker character, length and
// the line it opened on.
type codeFence struct {
	open bool
	char byte
	size int
	line int
}

// openFence reports whether line opens a fenced code block (CommonMark: at
// most three spaces, then three or more backticks or tildes).
func openFence(line string) (codeFence, bool) {
	rest, ok := trimIndent(line)
	if !ok || len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return codeFence{}, false
	}
	c := rest[0]
	size := len(rest) - len(strings.TrimLeft(rest, string(c)))
	if size < 3 {
		return codeFence{}, false
	}
	if c == '`' && strings.Contains(rest[size:], "`") {
		return codeFence{}, false // backticks in the info string: inline code, not a fence
	}
	return codeFence{open: true, char: c, size: size}, true
}

// closedBy reports whether line closes the fence f.
func (f codeFence) closedBy(line string) bool {
	rest, ok := trimIndent(line)
	if !ok {
		return false
	}
	size := len(rest) - len(strings.TrimLeft(rest, string(f.char)))
	return size >= f.size && strings.TrimSpace(rest[size:]) == ""
}

// trimIndent removes up to three leading spaces; four or more (or a tab)
// make an indented code line, which is reported as not ok.
func trimIndent(line string) (string, bool) {
	i := 0
	for i < len(line) && i < 4 && line[i] == ' ' {
		i++
	}
	if i == 4 || (i < len(line) && line[i] == '\t') {
		return "", false
	}
	return line[i:], true
}

// heading parses an ATX heading: level 1-6 and its text without the optional
// closing run of '#'.
func heading(line string) (level int, text string, ok bool) {
	rest, ok := trimIndent(line)
	if !ok {
		return 0, "", false
	}
	for level < len(rest) && rest[level] == '#' {
		level++
	}
	if level == 0 || level > 6 {
		return 0, "", false
	}
	rest = rest[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return 0, "", false // "#hashtag" is text
	}
	text = strings.TrimSpace(rest)
	if t := strings.TrimRight(text, "#"); t != text && (t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t")) {
		text = strings.TrimSpace(t)
	}
	return level, text, true
}

// conflictKey returns the key of a "**Conflicts:** key" line, or "".
func conflictKey(line string) string {
	m := conflictLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return ""
	}
	return strings.Trim(strings.TrimSpace(m[1]), "`")
}

// clip shortens a line for an error message.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= 80 {
		return s
	}
	cut := 77
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
