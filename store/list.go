package store

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// Filter selects loops for List. Zero fields match everything; set fields
// must all match.
type Filter struct {
	Statuses  []loop.Status // any of these
	Type      string
	Parent    string // children of this loop
	HasParent *bool  // true: only children; false: only roots
	IDPrefix  string // ids that start with this (List only: a seek, not a scan)
	// IDSuffix: ids that end with this, in any case (List only: a scan of
	// the keys; only the records that match are decoded).
	IDSuffix string
	Limit    int // with IDPrefix or IDSuffix: at most this many loops (0: all)
}

func (f Filter) match(l loop.Loop) bool {
	return strings.HasPrefix(l.ID, f.IDPrefix) && hasSuffixFold(l.ID, f.IDSuffix) && (len(f.Statuses) == 0 || slices.Contains(f.Statuses, l.Status)) &&
		(f.Type == "" || l.Type == f.Type) &&
		(f.Parent == "" || l.Parent == f.Parent) &&
		(f.HasParent == nil || *f.HasParent == (l.Parent != ""))
}

// Get returns the loop with id, or an error wrapping ErrNotFound.
func (s *Store) Get(id string) (l loop.Loop, err error) {
	err = s.View(func(tx *Tx) error {
		l, err = tx.Get(id)
		return err
	})
	return l, err
}

// List returns the loops f selects, in id order. It reads through the
// parent or status index when f names a parent or statuses.
func (s *Store) List(f Filter) ([]loop.Loop, error) {
	for _, st := range f.Statuses {
		if !st.Valid() {
			return nil, fmt.Errorf("status %q: unknown status", st)
		}
	}
	var out []loop.Loop
	err := s.View(func(tx *Tx) error {
		keep := func(l loop.Loop) bool {
			if f.match(l) {
				out = append(out, l)
			}
			return true
		}
		switch {
		case f.IDPrefix != "":
			return tx.scan(tx.bucket(bucketLoops), []byte(f.IDPrefix), func(k, v []byte) (bool, error) {
				l, err := decodeLoop(k, v)
				if err != nil {
					return false, err
				}
				keep(l)
				return f.Limit <= 0 || len(out) < f.Limit, nil
			})
		case f.IDSuffix != "":
			return tx.scan(tx.bucket(bucketLoops), nil, func(k, v []byte) (bool, error) {
				if !hasSuffixFold(string(k), f.IDSuffix) {
					return true, nil
				}
				l, err := decodeLoop(k, v)
				if err != nil {
					return false, err
				}
				keep(l)
				return f.Limit <= 0 || len(out) < f.Limit, nil
			})
		case f.Parent != "":
			return tx.byIndex(bucketIdxParent, f.Parent, keep)
		case len(f.Statuses) > 0:
			for _, st := range slices.Compact(slices.Sorted(slices.Values(f.Statuses))) {
				if err := tx.ByStatus(st, keep); err != nil {
					return err
				}
			}
			slices.SortFunc(out, func(a, b loop.Loop) int { return strings.Compare(a.ID, b.ID) })
			return nil
		default:
			return tx.ForEach(keep)
		}
	})
	return out, err
}

// hasSuffixFold reports whether s ends with suffix, in any case.
func hasSuffixFold(s, suffix string) bool {
	return len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix)
}

// Counts returns the number of loops per status; see Tx.Counts.
func (s *Store) Counts() (counts map[loop.Status]int, err error) {
	err = s.View(func(tx *Tx) error {
		counts, err = tx.Counts()
		return err
	})
	return counts, err
}
