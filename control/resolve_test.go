package control_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	svc := newService(t, 30)
	ids := []string{"01ABCD11", "01ABCD22", "01ABCE33", "01AB", "plan1", "01KFQ8MZJ6BCZNWR4A", "01KFQ8MZJ7XYWR4A", "CD11XXXX"}
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("01ZZZZ%02d", i))
	}
	err := svc.Store.Update(func(tx *store.Tx) error {
		for _, id := range ids {
			if err := tx.Create(rec(id, "", loop.Pending, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref, want string // want: the id, or a piece of the error
		ambiguous bool
		notFound  bool
	}{
		{ref: "01ABCE", want: "01ABCE33"},
		{ref: "01abce3", want: "01ABCE33"},
		{ref: "01AB", want: "01AB"}, // an exact id wins over the loops it prefixes
		{ref: "plan1", want: "plan1"},
		{ref: "01ABCD", want: `id prefix "01ABCD" is ambiguous: 2 loops match`, ambiguous: true},
		{ref: "01ZZ", want: "more than 10 loops match", ambiguous: true},
		{ref: "01A", want: "an id prefix needs at least 4 characters", notFound: true},
		{ref: "nope", want: "loop nope: not found: no loop id is, starts or ends with it", notFound: true},
		// A short id: the end of an id, in any case, when no id starts with it.
		{ref: "bcznwr4a", want: "01KFQ8MZJ6BCZNWR4A"},
		{ref: "CD22", want: "01ABCD22"},
		{ref: "wr4a", want: `short id "wr4a" is ambiguous: 2 loops match`, ambiguous: true},
		{ref: "cd11", want: "CD11XXXX"}, // a prefix wins over a suffix (01ABCD11)
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			l, err := svc.Resolve(tc.ref)
			var ae *control.AmbiguousError
			switch {
			case tc.ambiguous:
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.want) || !control.IsUsage(err) {
					t.Errorf("Resolve(%q) = %v, want ambiguous: %s", tc.ref, err, tc.want)
				}
			case tc.notFound:
				if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Resolve(%q) = %v, want not found: %s", tc.ref, err, tc.want)
				}
			case err != nil || l.ID != tc.want:
				t.Errorf("Resolve(%q) = %s, %v; want %s", tc.ref, l.ID, err, tc.want)
			}
		})
	}
	// The candidates of an ambiguous prefix are listed by id, type, title.
	_, err = svc.Resolve("01ABCD")
	if want := "\n  01ABCD11  ralph   01ABCD11\n  01ABCD22  ralph   01ABCD22"; !strings.HasSuffix(err.Error(), want) {
		t.Errorf("candidates:\n%s\nwant suffix:\n%s", err, want)
	}
	// Listing by prefix stops after MaxCandidates+1 and keeps the filters.
	got, err := svc.List(api.ListRequest{Prefix: "01ZZ"})
	if err != nil || len(got) != control.MaxCandidates+1 {
		t.Errorf("List(prefix 01ZZ) = %d loops, %v; want %d", len(got), err, control.MaxCandidates+1)
	}
	got, err = svc.List(api.ListRequest{Prefix: "01ab", Status: []loop.Status{loop.Paused}})
	if err != nil || len(got) != 0 {
		t.Errorf("List(prefix 01ab, paused) = %d loops, %v; want none", len(got), err)
	}
}
