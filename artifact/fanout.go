package artifact

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/loopr-dev/loopr/fanout"
)

// Best-of-N: a line `**Fanout:** 3` in a child's body runs it as 3
// candidate loops in parallel worktrees, of which one merges (package
// fanout); `**Agents:** claude, codex` gives the candidates their agent
// profiles, in turn. Parse checks the number; the daemon checks the
// profiles (an unknown one fails the artifact's iteration with feedback).

var (
	fanoutLine = regexp.MustCompile(`(?i)^(?:[-*+]\s+)?\*\*fan-?out:?\*\*:?\s*(.*)$`)
	agentsLine = regexp.MustCompile(`(?i)^(?:[-*+]\s+)?\*\*agents:?\*\*:?\s*(.*)$`)
)

// fanoutOf reads a "**Fanout:** N" line into sec; false for any other line.
func fanoutOf(sec *Section, line string, n int) (bool, error) {
	m := fanoutLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return false, nil
	}
	v := unquote(m[1])
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 || k > fanout.MaxN {
		return true, errAt(n, "**Fanout:** %q: write a number of candidates from 1 to %d (`**Fanout:** 3`)", clip(v), fanout.MaxN)
	}
	sec.Fanout = k
	return true, nil
}

// agentsOf reads an "**Agents:** a, b" line into sec; false for any other line.
func agentsOf(sec *Section, line string, n int) (bool, error) {
	m := agentsLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return false, nil
	}
	sec.Agents = nil
	for f := range strings.FieldsFuncSeq(m[1], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if f = unquote(f); f != "" {
			sec.Agents = append(sec.Agents, f)
		}
	}
	if len(sec.Agents) == 0 || len(sec.Agents) > fanout.MaxN {
		return true, errAt(n, "**Agents:** names %d agent profiles: name 1 to %d (`**Agents:** claude, codex`)", len(sec.Agents), fanout.MaxN)
	}
	return true, nil
}
