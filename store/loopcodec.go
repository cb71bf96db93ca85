package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"math"
	"time"
	"unsafe"

	"github.com/loopr-dev/loopr/loop"
)

// The loop record codec of schema version 2: a compact binary layout that
// costs a fraction of encoding/json's CPU per durable transition and lets
// the scheduler's index read a record's head without the long texts.
//
//	0x01 or 0x02                          format tag (a JSON record starts with '{')
//	head:  type  status  parent  depth  iteration  max_iterations
//	       created_at  updated_at  started_at  finished_at  runnable_at  deadline
//	       triggered_by  title  fairness_key  conflict_key  owner  cost_hint
//	ext:   (0x02 only) the extension block of extcodec.go
//	body:  task  artifact  workdir  feedback  reason  lease
//
// Strings are a uvarint length and the bytes; ints are zig-zag varints; a
// time is 0x00 (zero) or 0x01, a varint of Unix seconds and a uvarint of
// nanoseconds (always decoded in UTC); the status is its index in
// codecStatuses (0xff and a string for anything else); cost_hint is 0x00 or
// 0x01 and 8 little-endian bytes of the float; the lease is 0x00 or 0x01,
// owner, expires_at, pid, pid_start. The id is the key and is not repeated.
//
// Schema version 1 stored encoding/json objects; decodeLoop still reads
// them (the migration to version 2 does), and export/import stay JSON Lines.

// tagBinary starts every record of the binary layout; tagBinaryExt one
// whose head is followed by the extension block (extcodec.go). A record
// without extension fields is written with tagBinary, byte for byte as
// before the extension existed.
const (
	tagBinary    = 0x01
	tagBinaryExt = 0x02
)

// isBinary reports whether b is a record of the binary layout (either tag).
func isBinary(b []byte) bool { return len(b) > 0 && (b[0] == tagBinary || b[0] == tagBinaryExt) }

// codecStatuses fixes each status's byte in the layout: the order of
// loop.Statuses is for people and may change, these numbers may not.
var codecStatuses = []loop.Status{
	loop.Pending, loop.Paused, loop.Running, loop.AwaitingApproval, loop.Complete,
	loop.Failed, loop.Cancelled, loop.Expired, loop.Invalidated, loop.NeedsHuman,
	loop.Merging, loop.AwaitingReview,
}

// errTruncated reports a record that ends before its last field.
var errTruncated = errors.New("truncated record")

// recWriter appends the fields of a record.
type recWriter struct{ b []byte }

func (w *recWriter) str(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *recWriter) int(v int) { w.b = binary.AppendVarint(w.b, int64(v)) }

func (w *recWriter) time(t time.Time) {
	if t.IsZero() {
		w.b = append(w.b, 0)
		return
	}
	w.b = append(w.b, 1)
	w.b = binary.AppendVarint(w.b, t.Unix())
	w.b = binary.AppendUvarint(w.b, uint64(t.Nanosecond()))
}

func (w *recWriter) status(st loop.Status) {
	for i, s := range codecStatuses {
		if s == st {
			w.b = append(w.b, byte(i))
			return
		}
	}
	w.b = append(w.b, 0xff)
	w.str(string(st))
}

func (w *recWriter) float(f float64) {
	if f == 0 && !math.Signbit(f) {
		w.b = append(w.b, 0)
		return
	}
	w.b = append(w.b, 1)
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f))
}

// appendLoop appends the binary encoding of l to b.
func appendLoop(b []byte, l *loop.Loop) []byte {
	start := len(b)
	w := recWriter{b: append(b, tagBinary)}
	w.str(l.Type)
	w.status(l.Status)
	w.str(l.Parent)
	w.int(l.Depth)
	w.int(l.Iteration)
	w.int(l.MaxIterations)
	w.time(l.CreatedAt)
	w.time(l.UpdatedAt)
	w.time(l.StartedAt)
	w.time(l.FinishedAt)
	w.time(l.RunnableAt)
	w.time(l.Deadline)
	w.str(l.TriggeredBy)
	w.str(l.Title)
	w.str(l.FairnessKey)
	w.str(l.ConflictKey)
	w.str(l.Owner)
	w.float(l.CostHint)
	if hasExt(l) {
		w.b[start] = tagBinaryExt
		w.ext(l)
	}
	// body
	w.str(l.Task)
	w.str(l.Artifact)
	w.str(l.Workdir)
	w.str(l.Feedback)
	w.str(l.Reason)
	if l.Lease == nil {
		w.b = append(w.b, 0)
	} else {
		w.b = append(w.b, 1)
		w.str(l.Lease.Owner)
		w.time(l.Lease.ExpiresAt)
		w.int(l.Lease.PID)
		w.b = binary.AppendUvarint(w.b, l.Lease.PIDStart)
	}
	return w.b
}

// recReader reads the fields of a record; the first error sticks. With
// borrow set, its strings are views of the record's bytes, not copies:
// valid only while those bytes are (the read transaction).
type recReader struct {
	b      []byte
	err    error
	borrow bool
	// headOnly: the extension block's long fields (comments) are skipped.
	headOnly bool
}

func (r *recReader) fail() {
	if r.err == nil {
		r.err = errTruncated
	}
	r.b = nil
}

func (r *recReader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *recReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recReader) int() int {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *recReader) raw() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *recReader) str() string {
	s := r.raw()
	switch {
	case len(s) == 0:
		return ""
	case r.borrow:
		return unsafe.String(&s[0], len(s))
	}
	return string(s)
}

// skip passes over a string without copying it.
func (r *recReader) skip() { r.raw() }

// typ reads a loop type, without allocating for the built-in ones.
func (r *recReader) typ() string {
	s := r.raw()
	for _, t := range loop.BuiltinTypes {
		if string(s) == t {
			return t
		}
	}
	return string(s)
}

func (r *recReader) time() time.Time {
	switch r.byte() {
	case 0:
		return time.Time{}
	case 1:
		sec := r.int()
		nsec := r.uvarint()
		if nsec >= 1e9 {
			r.err = errors.New("bad time")
			return time.Time{}
		}
		return time.Unix(int64(sec), int64(nsec)).UTC()
	}
	if r.err == nil {
		r.err = errors.New("bad time")
	}
	return time.Time{}
}

func (r *recReader) status() loop.Status {
	c := r.byte()
	if int(c) < len(codecStatuses) {
		return codecStatuses[c]
	}
	if c == 0xff {
		return loop.Status(r.str())
	}
	if r.err == nil {
		r.err = fmt.Errorf("bad status %d", c)
	}
	return ""
}

func (r *recReader) float() float64 {
	switch r.byte() {
	case 0:
		return 0
	case 1:
		if len(r.b) < 8 {
			r.fail()
			return 0
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		r.b = r.b[8:]
		return f
	}
	if r.err == nil {
		r.err = errors.New("bad float")
	}
	return 0
}

// head decodes the head of a record into l.
func (r *recReader) head(l *loop.Loop) {
	l.Type = r.typ()
	l.Status = r.status()
	l.Parent = r.str()
	l.Depth = r.int()
	l.Iteration = r.int()
	l.MaxIterations = r.int()
	l.CreatedAt = r.time()
	l.UpdatedAt = r.time()
	l.StartedAt = r.time()
	l.FinishedAt = r.time()
	l.RunnableAt = r.time()
	l.Deadline = r.time()
	l.TriggeredBy = r.str()
	l.Title = r.str()
	l.FairnessKey = r.str()
	l.ConflictKey = r.str()
	l.Owner = r.str()
	l.CostHint = r.float()
}

// body decodes the rest of a record after its head.
func (r *recReader) body(l *loop.Loop) {
	l.Task = r.str()
	l.Artifact = r.str()
	l.Workdir = r.str()
	l.Feedback = r.str()
	l.Reason = r.str()
	switch r.byte() {
	case 0:
	case 1:
		var ls loop.Lease
		ls.Owner = r.str()
		ls.ExpiresAt = r.time()
		ls.PID = r.int()
		ls.PIDStart = r.uvarint()
		l.Lease = &ls
	default:
		if r.err == nil {
			r.err = errors.New("bad lease")
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the record", len(r.b))
	}
}

// decodeLoopInto decodes a whole record, binary or (schema 1) JSON.
func decodeLoopInto(id, b []byte, l *loop.Loop, headOnly bool) error {
	return decodeRecord(id, b, l, headOnly, false)
}

// decodeRecord is decodeLoopInto; with borrow set, the strings of a binary
// record are views of b and id (see recReader).
func decodeRecord(id, b []byte, l *loop.Loop, headOnly, borrow bool) error {
	if len(b) > 0 && !isBinary(b) {
		if err := json.Unmarshal(b, l); err != nil {
			return damaged(fmt.Errorf("loop %s: decode: %w", id, err))
		}
		l.ID = string(id)
		if headOnly {
			l.Task, l.Artifact, l.Workdir, l.Feedback, l.Reason, l.Lease = "", "", "", "", "", nil
			l.Comments = nil
		}
		return nil
	}
	if len(b) == 0 {
		return damaged(fmt.Errorf("loop %s: decode: empty record", id))
	}
	r := recReader{b: b[1:], borrow: borrow, headOnly: headOnly}
	r.head(l)
	if b[0] == tagBinaryExt {
		r.ext(l)
	}
	if !headOnly {
		r.body(l)
	}
	if r.err != nil {
		return damaged(fmt.Errorf("loop %s: decode: %w", id, r.err))
	}
	if borrow && len(id) > 0 {
		l.ID = unsafe.String(&id[0], len(id))
	} else {
		l.ID = string(id)
	}
	return nil
}

// peekStatusParent reads only the status and parent of a stored record.
func peekStatusParent(id, b []byte) (loop.Status, string, error) {
	if len(b) > 0 && !isBinary(b) {
		l, err := decodeLoop(id, b)
		return l.Status, l.Parent, err
	}
	r := recReader{b: b}
	if len(b) > 0 {
		r.b = b[1:]
	}
	r.skip() // type
	st := r.status()
	parent := r.str()
	if r.err != nil {
		return "", "", damaged(fmt.Errorf("loop %s: decode: %w", id, r.err))
	}
	return st, parent, nil
}
