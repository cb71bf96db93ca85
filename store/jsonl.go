package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/loopr-dev/loopr/loop"
)

// MaxLineSize is the longest JSON Lines record ReadJSONL accepts.
const MaxLineSize = 16 << 20

// LineError is an error in one line of a JSON Lines file, counted from 1.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Export writes every loop record to w as JSON Lines — one encoding/json
// object of loop.Loop per line, in id order, all fields, times in UTC — and
// returns how many it wrote. It reads one consistent snapshot: the read
// transaction stays open while w is written, and a writer that needs to grow
// the file waits for it, so give Export a fast w (a file, a buffer).
func (s *Store) Export(w io.Writer) (int, error) {
	bw := bufio.NewWriter(w)
	enc := newJSONEncoder(bw) // a newline after each record (loopjson.go)
	n := 0
	var werr error
	err := s.View(func(tx *Tx) error {
		var l loop.Loop
		c := tx.bucket(bucketLoops).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := encodeRecord(enc, &l, k, v); err != nil {
				werr = fmt.Errorf("export: %w", err)
				return nil
			}
			n++
		}
		return nil
	})
	if err == nil {
		err = werr
	}
	if err == nil {
		if err = bw.Flush(); err != nil {
			err = fmt.Errorf("export: %w", err)
		}
	}
	return n, err
}

// ReadJSONL parses JSON Lines of loop records, as Export writes them. It is
// strict: a field name that is not exactly one of loop.Loop's, a value of the
// wrong type, trailing data, a record that fails Validate, or an id seen on
// an earlier line is an error, returned as a *LineError naming the line.
// Blank lines are skipped. Lines may be up to MaxLineSize bytes.
func ReadJSONL(r io.Reader) ([]loop.Loop, error) { return readJSONL(r, MaxLineSize) }

// readJSONL is ReadJSONL with lines of up to maxLine bytes.
func readJSONL(r io.Reader, maxLine int) ([]loop.Loop, error) {
	tooLong := fmt.Errorf("longer than %d MiB", maxLine>>20)
	if maxLine%(1<<20) != 0 {
		tooLong = fmt.Errorf("longer than %d bytes", maxLine)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxLine+2)), maxLine+2) // room for "\r\n"
	var out []loop.Loop
	seen := make(map[string]int)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(line) > maxLine {
			return nil, &LineError{n, tooLong}
		}
		l, err := parseLoop(line)
		if err != nil {
			return nil, &LineError{n, err}
		}
		if prev, dup := seen[l.ID]; dup {
			return nil, &LineError{n, fmt.Errorf("id %q: duplicate of line %d", l.ID, prev)}
		}
		seen[l.ID] = n
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{n + 1, tooLong}
		}
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return out, nil
}

// parseLoop decodes and validates one record.
func parseLoop(line []byte) (loop.Loop, error) {
	var l loop.Loop
	if err := json.Unmarshal(line, &l); err != nil {
		return loop.Loop{}, fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if err := checkKeys(line, reflect.TypeFor[loop.Loop]()); err != nil {
		return loop.Loop{}, err
	}
	if err := l.Validate(); err != nil {
		// Validate says "loop ID: field: problem"; the line number
		// already locates the record.
		return loop.Loop{}, errors.New(strings.TrimPrefix(err.Error(), "loop "+l.ID+": "))
	}
	return l, nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkKeys returns an error for the first object key in raw (sorted) that is
// not exactly the JSON name of a field of t, recursing into struct fields.
// encoding/json ignores unknown keys and matches names case-insensitively;
// an import should do neither.
func checkKeys(raw []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil // null, or not an object: decoding into t already judged it
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		f, ok := fieldByJSONName(t, key)
		if !ok {
			return fmt.Errorf("unknown field %q", key)
		}
		if err := checkKeys(obj[key], f.Type); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// Import stores loops — typically from ReadJSONL — keeping their ids, times
// and every other field except Depth, which it recomputes from the parent
// chain. It is all-or-nothing, in one transaction: an invalid record, an id
// repeated or already in the store (ErrExists), a parent found neither among
// loops nor in the store, or a parent cycle stores nothing. Each loop gets a
// loop.EventImported event. Parents may come after their children.
func (s *Store) Import(loops []loop.Loop) (int, error) {
	now := s.now().UTC()
	err := s.Update(func(tx *Tx) error {
		index := make(map[string]int, len(loops))
		for i, l := range loops {
			if err := l.Validate(); err != nil {
				return err
			}
			if _, dup := index[l.ID]; dup {
				return fmt.Errorf("loop %s: appears twice in the import", l.ID)
			}
			index[l.ID] = i
			if tx.Exists(l.ID) {
				return fmt.Errorf("loop %s: %w in the store", l.ID, ErrExists)
			}
		}
		depth, err := importDepths(tx, loops, index)
		if err != nil {
			return err
		}
		for _, l := range loops {
			l.Depth = depth[l.ID]
			if err := tx.Put(l); err != nil {
				return err
			}
			if _, err := tx.AppendEvent(loop.Event{
				Time: now, Loop: l.ID, Kind: loop.EventImported,
				To: l.Status, Iteration: l.Iteration,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("import: %w", err)
	}
	return len(loops), nil
}

// importDepths returns the depth of every loop in loops: 0 for a root, else
// its parent's plus one, the parent being in loops (index maps id to
// position) or in the store. It walks each chain once, without recursion.
func importDepths(tx *Tx, loops []loop.Loop, index map[string]int) (map[string]int, error) {
	depth := make(map[string]int, len(loops))
	for _, l := range loops {
		var chain []string // unresolved ids, child first
		onChain := make(map[string]int)
		base := -1 // depth of the resolved ancestor above the chain
		for id := l.ID; ; {
			if d, ok := depth[id]; ok {
				base = d
				break
			}
			if at, ok := onChain[id]; ok {
				return nil, fmt.Errorf("loop %s: parent chain is a cycle: %s", id, strings.Join(append(chain[at:], id), " → "))
			}
			onChain[id] = len(chain)
			chain = append(chain, id)
			parent := loops[index[id]].Parent
			if parent == "" {
				break
			}
			if _, ok := index[parent]; ok {
				id = parent
				continue
			}
			p, err := tx.Get(parent)
			if errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("loop %s: parent %s: not in the import or the store", id, parent)
			}
			if err != nil {
				return nil, err
			}
			base = p.Depth
			break
		}
		for i := len(chain) - 1; i >= 0; i-- {
			depth[chain[i]] = base + len(chain) - i
		}
	}
	return depth, nil
}
