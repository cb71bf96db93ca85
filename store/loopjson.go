package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/loopr-dev/loopr/internal/fastjson"
	"github.com/loopr-dev/loopr/loop"
)

// Records straight to JSON: the bytes json.Marshal(loop.Loop) writes for a
// record, produced from its binary encoding without building a loop.Loop
// (no string is allocated). `loopr list --json` through the daemon and
// `loopr export` stream 100k records this way. loopjson_test.go holds it
// to encoding/json's output byte for byte.

// timeView is a time field of a binary record, not yet a time.Time.
type timeView struct {
	sec, nsec int64
	set       bool
}

func (r *recReader) timeView() timeView {
	switch r.byte() {
	case 0:
		return timeView{}
	case 1:
		sec := r.int()
		nsec := r.uvarint()
		if nsec >= 1e9 && r.err == nil {
			r.err = fmt.Errorf("bad time")
		}
		return timeView{sec: int64(sec), nsec: int64(nsec), set: true}
	}
	if r.err == nil {
		r.err = fmt.Errorf("bad time")
	}
	return timeView{}
}

func (t timeView) time() time.Time {
	if !t.set {
		return time.Time{}
	}
	return time.Unix(t.sec, t.nsec).UTC()
}

// recView is a binary record's fields as views into its bytes.
type recView struct {
	typ, parent, trig, title, fkey, ckey, owner []byte
	status                                      loop.Status
	depth, iteration, maxIterations             int
	created, updated, started, finished         timeView
	runnable, deadline                          timeView
	cost                                        float64
	task, artifact, workdir, feedback, reason   []byte
	lease                                       bool
	leaseOwner                                  []byte
	leaseExpires                                timeView
	leasePID                                    int
	leasePIDStart                               uint64
}

func viewLoop(id, b []byte, v *recView) error {
	if len(b) == 0 || b[0] != tagBinary {
		return fmt.Errorf("loop %s: not a binary record", id)
	}
	r := recReader{b: b[1:]}
	v.typ = r.raw()
	v.status = r.status()
	v.parent = r.raw()
	v.depth, v.iteration, v.maxIterations = r.int(), r.int(), r.int()
	v.created, v.updated, v.started = r.timeView(), r.timeView(), r.timeView()
	v.finished, v.runnable, v.deadline = r.timeView(), r.timeView(), r.timeView()
	v.trig, v.title, v.fkey, v.ckey, v.owner = r.raw(), r.raw(), r.raw(), r.raw(), r.raw()
	v.cost = r.float()
	v.task, v.artifact, v.workdir, v.feedback, v.reason = r.raw(), r.raw(), r.raw(), r.raw(), r.raw()
	switch r.byte() {
	case 0:
		v.lease = false
	case 1:
		v.lease = true
		v.leaseOwner = r.raw()
		v.leaseExpires = r.timeView()
		v.leasePID = r.int()
		v.leasePIDStart = r.uvarint()
	default:
		if r.err == nil {
			r.err = fmt.Errorf("bad lease")
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the record", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("loop %s: decode: %w", id, r.err)
	}
	return nil
}

// appendLoopJSON appends json.Marshal of the record stored under id.
func appendLoopJSON(dst, id, b []byte) ([]byte, error) {
	var v recView
	if len(b) > 0 && b[0] != tagBinary { // a schema-1 record, or one with extension fields
		l, err := decodeLoop(id, b)
		if err != nil {
			return dst, err
		}
		j, err := json.Marshal(l)
		if err != nil {
			return dst, fmt.Errorf("loop %s: encode: %w", id, err)
		}
		return append(dst, j...), nil
	}
	if err := viewLoop(id, b, &v); err != nil {
		return dst, err
	}
	n0 := len(dst)
	var err error
	str := func(key string, s []byte, omitEmpty bool) {
		if omitEmpty && len(s) == 0 {
			return
		}
		dst = append(dst, ',', '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		dst = fastjson.AppendString(dst, s)
	}
	num := func(key string, n int64) {
		dst = append(dst, ',', '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		dst = strconv.AppendInt(dst, n, 10)
	}
	tm := func(key string, t timeView, omitZero bool) {
		if (omitZero && !t.set) || err != nil {
			return
		}
		dst = append(dst, ',', '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		dst, err = fastjson.AppendTime(dst, t.time())
	}
	dst = append(dst, `{"id":`...)
	dst = fastjson.AppendString(dst, id)
	str("type", v.typ, false)
	str("status", []byte(v.status), false)
	str("parent", v.parent, true)
	num("depth", int64(v.depth))
	str("triggered_by", v.trig, true)
	str("task", v.task, true)
	str("title", v.title, true)
	num("iteration", int64(v.iteration))
	num("max_iterations", int64(v.maxIterations))
	tm("created_at", v.created, false)
	tm("updated_at", v.updated, false)
	tm("started_at", v.started, true)
	tm("finished_at", v.finished, true)
	tm("runnable_at", v.runnable, true)
	tm("deadline", v.deadline, true)
	str("artifact", v.artifact, true)
	str("workdir", v.workdir, true)
	str("feedback", v.feedback, true)
	if v.lease {
		dst = append(dst, `,"lease":{"owner":`...)
		dst = fastjson.AppendString(dst, v.leaseOwner)
		tm("expires_at", v.leaseExpires, false)
		if v.leasePID != 0 {
			num("pid", int64(v.leasePID))
		}
		if v.leasePIDStart != 0 {
			dst = append(dst, `,"pid_start":`...)
			dst = strconv.AppendUint(dst, v.leasePIDStart, 10)
		}
		dst = append(dst, '}')
	}
	str("fairness_key", v.fkey, true)
	str("conflict_key", v.ckey, true)
	if v.cost != 0 && err == nil {
		dst = append(dst, `,"cost_hint":`...)
		dst, err = fastjson.AppendFloat(dst, v.cost)
	}
	str("owner", v.owner, true)
	str("reason", v.reason, true)
	if err != nil {
		return dst[:n0], fmt.Errorf("loop %s: encode: %w", id, err)
	}
	return append(dst, '}'), nil
}

// WriteJSON writes the loops f selects to w as one JSON array in id order
// — the bytes of json.Marshal of what List(f) returns — and returns how
// many it wrote. Like Export, it reads one snapshot and holds it while w
// is written: give it a buffered w.
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
	n := 0
	buf := make([]byte, 0, 4096)
	err := s.View(func(tx *Tx) error {
		loops := tx.bucket(bucketLoops)
		if _, err := bw.WriteString("["); err != nil {
			return err
		}
		emit := func(id, v []byte) error {
			if f.Type != "" || f.HasParent != nil || len(f.Statuses) > 0 {
				st, parent, err := peekStatusParent(id, v)
				if err != nil {
					return err
				}
				if (f.HasParent != nil && *f.HasParent != (parent != "")) ||
					(len(f.Statuses) > 0 && !slices.Contains(f.Statuses, st)) {
					return nil
				}
				if f.Type != "" {
					r := recReader{b: v[1:]}
					if string(r.raw()) != f.Type {
						return nil
					}
				}
			}
			buf = buf[:0]
			if n > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendLoopJSON(buf, id, v); err != nil {
				return err
			}
			n++
			_, err = bw.Write(buf)
			return err
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
			_, err := bw.WriteString("]")
			return err
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
		_, err := bw.WriteString("]")
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	return n, err
}
