package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/loop"
)

// Records as JSON: each stored record is decoded into a loop.Loop and
// encoded from its struct tags by github.com/go-json-experiment/json (the
// code that becomes encoding/json/v2) with encoding/json's options
// (jsonv1.DefaultOptionsV1: HTML-safe escapes, omitempty as encoding/json
// reads it), so a field added to loop.Loop appears with no change here.
// `loopr list --json` through the daemon and `loopr export` stream 100k
// records this way, one record in memory at a time. The bytes are
// json.Marshal's (TestLoopJSONMatchesMarshal), but for a string that is not
// valid UTF-8: its replacement character is written as itself, not as the
// escape \ufffd, as encoding/json does when built on v2.

// newJSONEncoder returns the encoder of the records' JSON on w. It ends
// each top-level value with a newline.
func newJSONEncoder(w io.Writer) *jsontext.Encoder {
	return jsontext.NewEncoder(w, jsonv1.DefaultOptionsV1())
}

// encodeRecord encodes the record stored under id into enc; l is scratch
// space, overwritten. Its strings are views of id and b, not copies (the
// record is encoded and forgotten): 120k records leave little garbage, and
// the collector marks the daemon's heap no more often for them.
func encodeRecord(enc *jsontext.Encoder, l *loop.Loop, id, b []byte) error {
	*l = loop.Loop{}
	if err := decodeRecord(id, b, l, false, true); err != nil {
		return err
	}
	if err := json.MarshalEncode(enc, l, jsonv1.DefaultOptionsV1()); err != nil {
		return fmt.Errorf("loop %s: encode: %w", id, err)
	}
	return nil
}

// WriteJSON writes the loops f selects to w as one JSON array in id order
// and a newline — the bytes of json.Marshal of what List(f) returns — and
// returns how many it wrote. Like Export, it reads one snapshot and holds
// it while w is written: give it a fast w.
func (s *Store) WriteJSON(w io.Writer, f Filter) (int, error) {
	if f.IDPrefix != "" {
		return 0, errors.New("write json: an id prefix selects with List")
	}
	for _, st := range f.Statuses {
		if !st.Valid() {
			return 0, fmt.Errorf("status %q: unknown status", st)
		}
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := newJSONEncoder(bw)
	n := 0
	var l loop.Loop
	err := s.View(func(tx *Tx) error {
		loops := tx.bucket(bucketLoops)
		if err := enc.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		filtered := f.Type != "" || f.HasParent != nil || len(f.Statuses) > 0
		emit := func(id, v []byte) error {
			if filtered {
				st, parent, err := peekStatusParent(id, v)
				if err != nil {
					return err
				}
				if (f.HasParent != nil && *f.HasParent != (parent != "")) ||
					(len(f.Statuses) > 0 && !slices.Contains(f.Statuses, st)) {
					return nil
				}
				if f.Type != "" {
					var head loop.Loop
					if err := decodeLoopInto(id, v, &head, true); err != nil {
						return err
					}
					if head.Type != f.Type {
						return nil
					}
				}
			}
			if err := encodeRecord(enc, &l, id, v); err != nil {
				return err
			}
			n++
			return nil
		}
		var ids [][]byte
		switch {
		case f.Parent != "":
			c := tx.bucket(bucketIdxParent).Cursor()
			prefix := indexPrefix(f.Parent)
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				ids = append(ids, k[len(prefix):])
			}
		case len(f.Statuses) > 0:
			c := tx.bucket(bucketIdxStatus).Cursor()
			for _, st := range slices.Compact(slices.Sorted(slices.Values(f.Statuses))) {
				prefix := indexPrefix(string(st))
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
					ids = append(ids, k[len(prefix):])
				}
			}
			slices.SortFunc(ids, bytes.Compare)
		default:
			c := loops.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if err := emit(k, v); err != nil {
					return err
				}
			}
			return enc.WriteToken(jsontext.EndArray)
		}
		for _, id := range ids {
			v := loops.Get(id)
			if v == nil {
				return fmt.Errorf("index: loop %s: no record", id)
			}
			if err := emit(id, v); err != nil {
				return err
			}
		}
		return enc.WriteToken(jsontext.EndArray)
	})
	if err == nil {
		err = bw.Flush()
	}
	return n, err
}
