package loop

import "fmt"

// Text says where candidate id stands in its best-of-N group, for `loopr
// why` and the TUI's why pane.
func (f *Fanout) Text(id ID) string {
	s := fmt.Sprintf("best-of-%d: candidate %d of %d (group %s); ", f.Of, f.Index, f.Of, ShortID(f.Group))
	switch f.Winner {
	case "":
		return s + "not decided yet: only the winner merges (loopr events shows the group's journal)"
	case id:
		return s + "the winner: it merges"
	}
	return s + "lost to the winner " + ShortID(f.Winner) + ": cancelled, its worktree and branch removed"
}
