package store

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
)

func TestListByIDPrefix(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	mustUpdate(t, s, func(tx *Tx) error {
		for _, l := range []loop.Loop{newLoop("AB", loop.Pending, ""), newLoop("ABC1", loop.Pending, ""),
			newLoop("ABC2", loop.Paused, ""), newLoop("ABC3", loop.Pending, ""), newLoop("ABD", loop.Pending, ""), newLoop("B", loop.Pending, "")} {
			if err := tx.Create(l); err != nil {
				return err
			}
		}
		return nil
	})
	ids := func(f Filter) []string {
		t.Helper()
		loops, err := s.List(f)
		if err != nil {
			t.Fatalf("List(%+v) error: %v", f, err)
		}
		var out []string
		for _, l := range loops {
			out = append(out, l.ID)
		}
		return out
	}
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"prefix", Filter{IDPrefix: "ABC"}, []string{"ABC1", "ABC2", "ABC3"}},
		{"exact id is a prefix of itself", Filter{IDPrefix: "AB"}, []string{"AB", "ABC1", "ABC2", "ABC3", "ABD"}},
		{"limit", Filter{IDPrefix: "AB", Limit: 2}, []string{"AB", "ABC1"}},
		{"with a status", Filter{IDPrefix: "ABC", Statuses: []loop.Status{loop.Pending}}, []string{"ABC1", "ABC3"}},
		{"limit counts matches", Filter{IDPrefix: "ABC", Statuses: []loop.Status{loop.Pending}, Limit: 1}, []string{"ABC1"}},
		{"none", Filter{IDPrefix: "C"}, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, ids(tc.f)); diff != "" {
			t.Errorf("%s: List() mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, err := s.WriteJSON(io.Discard, Filter{IDPrefix: "AB"}); err == nil {
		t.Error("WriteJSON(IDPrefix) = nil error, want a refusal (List selects by prefix)")
	}
}
