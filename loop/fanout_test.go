package loop

import (
	"strings"
	"testing"
)

func TestFanoutText(t *testing.T) {
	t.Parallel()
	f := &Fanout{Group: "g1", Index: 2, Of: 3}
	for _, tc := range []struct{ winner, id, want string }{
		{"", "c2", "best-of-3: candidate 2 of 3 (group g1); not decided yet"},
		{"c2", "c2", "the winner: it merges"},
		{"c1", "c2", "lost to the winner c1: cancelled"},
	} {
		f.Winner = tc.winner
		if got := f.Text(tc.id); !strings.Contains(got, tc.want) {
			t.Errorf("Text(%q) with winner %q = %q, want %q in it", tc.id, tc.winner, got, tc.want)
		}
	}
}
