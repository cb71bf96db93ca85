package store

import (
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/loopr-dev/loopr/loop"
)

// randomLoop fills every exported field of loop.Loop by reflection, so a
// field added to the record and forgotten by the codec fails the round trip.
func randomLoop(r *rand.Rand) loop.Loop {
	var l loop.Loop
	fill(r, reflect.ValueOf(&l).Elem())
	l.ID = fmt.Sprintf("L%d", r.IntN(1e6))
	return l
}

var timeType = reflect.TypeFor[time.Time]()

func fill(r *rand.Rand, v reflect.Value) {
	if r.IntN(4) == 0 {
		return // leave a zero value: zero times, empty strings, nil lease
	}
	switch {
	case v.Type() == timeType:
		sec := r.Int64N(1<<34) - 1<<33 // about ±270 years around 1970
		v.Set(reflect.ValueOf(time.Unix(sec, r.Int64N(1e9)).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		alphabet := []string{"a", "Z", "9", "-", "é", "\x00", "\n", "\"", "日本", " "}
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		v.SetString(b.String())
	case reflect.Int, reflect.Int64:
		v.SetInt(r.Int64N(1<<40) - 1<<39)
	case reflect.Uint64:
		v.SetUint(r.Uint64())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float64:
		v.SetFloat([]float64{0.5, 1e300, -3, math.SmallestNonzeroFloat64, 60}[r.IntN(5)])
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(r, v.Elem())
	case reflect.Slice: // never empty: the codec writes an empty list as none (nil)
		s := reflect.MakeSlice(v.Type(), 1+r.IntN(3), 3)
		for i := range s.Len() {
			for s.Index(i).IsZero() {
				fill(r, s.Index(i))
			}
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i))
			}
		}
	default:
		panic(fmt.Sprintf("fill: %s: add this kind to the test and to the codec", v.Type()))
	}
}

func TestLoopCodecRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 2))
	for i := range 5000 {
		l := randomLoop(r)
		if st := r.IntN(len(loop.Statuses) + 1); st < len(loop.Statuses) {
			l.Status = loop.Statuses[st]
		} // else: a status the codec spells out
		b, err := encodeLoop(l)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeLoop([]byte(l.ID), b)
		if err != nil {
			t.Fatalf("case %d: decodeLoop() error: %v", i, err)
		}
		if diff := cmp.Diff(l, got); diff != "" {
			t.Fatalf("case %d: round trip mismatch (-want +got):\n%s", i, diff)
		}
		// The head is the record without its long texts and lease.
		head, err := decodeHead([]byte(l.ID), b)
		if err != nil {
			t.Fatalf("case %d: decodeHead() error: %v", i, err)
		}
		want := l
		want.Task, want.Artifact, want.Workdir, want.Feedback, want.Reason, want.Lease = "", "", "", "", "", nil
		want.Comments = nil // skipped with the long texts
		if diff := cmp.Diff(want, head); diff != "" {
			t.Fatalf("case %d: head mismatch (-want +got):\n%s", i, diff)
		}
		st, parent, err := peekStatusParent([]byte(l.ID), b)
		if err != nil || st != l.Status || parent != l.Parent {
			t.Fatalf("case %d: peekStatusParent() = %q, %q, %v; want %q, %q", i, st, parent, err, l.Status, l.Parent)
		}
		// Every cut is an error, never a panic or a silent success.
		for _, n := range []int{0, 1, len(b) / 2, len(b) - 1} {
			if _, err := decodeLoop([]byte(l.ID), b[:n]); err == nil {
				t.Fatalf("case %d: decodeLoop(first %d of %d bytes) error = nil", i, n, len(b))
			}
		}
	}
}

// TestLoopCodecKnowsEveryField fails when loop.Loop gains a field: add it
// to appendLoop and recReader (head or body), then to this list.
func TestLoopCodecKnowsEveryField(t *testing.T) {
	t.Parallel()
	known := []string{"ID", "Type", "Status", "Parent", "Depth", "TriggeredBy", "Task", "Title", "Iteration",
		"MaxIterations", "CreatedAt", "UpdatedAt", "StartedAt", "FinishedAt", "RunnableAt", "Deadline", "Artifact",
		"Workdir", "Feedback", "Lease", "FairnessKey", "ConflictKey", "CostHint", "Owner", "Reason",
		// the extension block (extcodec.go)
		"Agent", "Usage", "Budget", "Needs", "Answer", "RateLimitStreak", "TransientRetries", "Stalls",
		"FailureFingerprint", "FailureRepeats", "Branch", "Base", "DependsOn", "SubtreeDoneAt", "Commit", "Evidence",
		"Review", "Comments", "Landed", "Session", "Progress"}
	var got []string
	rt := reflect.TypeFor[loop.Loop]()
	for i := range rt.NumField() {
		got = append(got, rt.Field(i).Name)
	}
	if diff := cmp.Diff(known, got); diff != "" {
		t.Errorf("loop.Loop fields changed (-codec knows +record has): update loopcodec.go\n%s", diff)
	}
	if n := reflect.TypeFor[loop.Lease]().NumField(); n != 4 {
		t.Errorf("loop.Lease has %d fields, the codec knows 4: update loopcodec.go", n)
	}
}

// TestMigrateJSONRecords opens a schema-1 store (JSON records) and finds
// every record intact, now in the binary layout, with its indexes.
func TestMigrateJSONRecords(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	r := rand.New(rand.NewPCG(3, 3))
	var want []loop.Loop
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		for i := range 200 {
			l := randomLoop(r)
			l.ID = fmt.Sprintf("L%03d", i)
			l.Status = loop.Statuses[i%len(loop.Statuses)]
			l.Parent = []string{"", "L000", "L001", "gone"}[i%4]
			l = utc(l)
			v, err := json.Marshal(l)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketLoops).Put([]byte(l.ID), v); err != nil {
				return err
			}
			if err := tx.Bucket(bucketIdxStatus).Put(indexKey(string(l.Status), l.ID), empty); err != nil {
				return err
			}
			if l.Parent != "" {
				if err := tx.Bucket(bucketIdxParent).Put(indexKey(l.Parent, l.ID), empty); err != nil {
					return err
				}
			}
			want = append(want, l)
		}
		return tx.Bucket(bucketMeta).Put([]byte(keySchemaVersion), []byte("1"))
	})
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open(schema 1) error: %v", err)
	}
	defer s.Close()
	got, err := s.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records after migration (-want +got):\n%s", diff)
	}
	s.View(func(tx *Tx) error {
		c := tx.bucket(bucketLoops).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if !isBinary(v) {
				t.Errorf("loop %s still JSON after migration", k)
			}
		}
		return nil
	})
	mustCheck(t, s)
}

func BenchmarkLoopCodec(b *testing.B) {
	l := loop.Loop{ID: "01JD3K9Q5ZB7X0000000000000", Type: loop.Ralph, Status: loop.Pending, Parent: "01JD3K9Q5ZB7X0000000000001",
		Depth: 3, Title: "Add the OAuth callback handler", Task: strings.Repeat("Implement the thing. ", 20),
		Iteration: 2, MaxIterations: 100, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(),
		TriggeredBy: "/home/u/repo/.loopr/loops/01JD3K9Q5ZB7X0000000000001/iterations/001/phase.md"}
	b.Run("binary/encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encodeLoop(l)
		}
	})
	enc, _ := encodeLoop(l)
	b.Run("binary/decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeLoop([]byte(l.ID), enc)
		}
	})
	b.Run("binary/head", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			decodeHead([]byte(l.ID), enc)
		}
	})
	b.Run("json/encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(l)
		}
	})
	js, _ := json.Marshal(l)
	b.Run("json/decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var x loop.Loop
			json.Unmarshal(js, &x)
		}
	})
}

func TestForEachHead(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	r := rand.New(rand.NewPCG(9, 9))
	var want []loop.Loop
	mustUpdate(t, s, func(tx *Tx) error {
		for i := range 50 {
			l := randomLoop(r)
			l.ID, l.Parent, l.Status, l.Type = fmt.Sprintf("L%02d", i), "", loop.Pending, loop.Ralph
			l.DependsOn = nil
			if i%3 == 1 {
				l.DependsOn = []string{fmt.Sprintf("L%02d", i-1)}
			}
			if i%2 == 0 { // a complete loop: its subtree_done_at is read even when not full
				l.Status = loop.Complete
			}
			l.Iteration, l.MaxIterations, l.Depth = 1+i%3, 5, i%4
			l.CreatedAt = time.Unix(int64(1e9+i), 0).UTC()
			if err := tx.Put(l); err != nil {
				return err
			}
			l = utc(l)
			l.Task, l.Artifact, l.Workdir, l.Feedback, l.Reason, l.Lease = "", "", "", "", "", nil
			l.Comments = nil // a head skips them
			want = append(want, l)
		}
		return nil
	})
	var got []loop.Loop
	s.View(func(tx *Tx) error {
		return tx.ForEachHead(nil, func(l *loop.Loop) bool { got = append(got, *l); return true })
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ForEachHead() mismatch (-want +got):\n%s", diff)
	}
	got = nil
	s.View(func(tx *Tx) error {
		return tx.ForEachHead(func(loop.Status) bool { return false }, func(l *loop.Loop) bool { got = append(got, *l); return true })
	})
	for i, w := range want {
		want[i] = loop.Loop{ID: w.ID, Status: w.Status, Parent: w.Parent}
		if w.Status == loop.Complete {
			want[i].SubtreeDoneAt = w.SubtreeDoneAt
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ForEachHead(none full) mismatch (-want +got):\n%s", diff)
	}
}

// TestLoopJSONMatchesMarshal: a record's JSON (encodeRecord, the bytes of
// list --json and export) is exactly json.Marshal's for the decoded
// record, or fails where it fails.
func TestLoopJSONMatchesMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	var scratch loop.Loop
	for i := range 5000 {
		l := randomLoop(r)
		if st := r.IntN(len(loop.Statuses) + 1); st < len(loop.Statuses) {
			l.Status = loop.Statuses[st]
		}
		if r.IntN(50) == 0 {
			l.UpdatedAt = time.Date(10000+r.IntN(100), 1, 1, 0, 0, 0, 0, time.UTC) // json.Marshal refuses
		}
		if r.IntN(10) == 0 {
			l.CostHint = math.Copysign(0, -1)
		}
		if r.IntN(10) == 0 {
			l.Title = "<b> & \u2028 \u2029 \x7f" // escaped for HTML and JavaScript
		}
		b, _ := encodeLoop(l)
		dec, err := decodeLoop([]byte(l.ID), b)
		if err != nil {
			t.Fatal(err)
		}
		want, werr := json.Marshal(dec)
		var got bytes.Buffer
		gerr := encodeRecord(newJSONEncoder(&got), &scratch, []byte(l.ID), b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("case %d: encodeRecord error %v, json.Marshal error %v", i, gerr, werr)
		}
		if werr == nil && got.String() != string(want)+"\n" {
			t.Fatalf("case %d: encodeRecord mismatch\n got %s\nwant %s", i, got.String(), want)
		}
	}
}

func TestWriteJSONMatchesList(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	r := rand.New(rand.NewPCG(13, 14))
	mustUpdate(t, s, func(tx *Tx) error {
		for i := range 300 {
			l := newLoop(fmt.Sprintf("L%03d", (i*37)%1000), loop.Statuses[r.IntN(len(loop.Statuses))], "")
			if i > 0 && r.IntN(2) == 0 {
				l.Parent = fmt.Sprintf("L%03d", r.IntN(40)*37%1000)
			}
			l.Type = []string{loop.Ralph, loop.Phase, "review"}[r.IntN(3)]
			l.Task = randomLoop(r).Task
			if err := tx.Put(l); err != nil && !strings.Contains(err.Error(), "own parent") {
				return err
			}
		}
		return nil
	})
	yes, no := true, false
	for _, f := range []Filter{{}, {Statuses: []loop.Status{loop.Pending}}, {Statuses: []loop.Status{loop.Failed, loop.Pending, loop.Failed}},
		{Type: "review"}, {Parent: "L037"}, {HasParent: &yes}, {HasParent: &no, Statuses: []loop.Status{loop.Running}},
		{Parent: "L074", Type: loop.Ralph}, {Type: "nothing"}} {
		list, err := s.List(f)
		if err != nil {
			t.Fatal(err)
		}
		if list == nil {
			list = []loop.Loop{}
		}
		want, _ := json.Marshal(list)
		want = append(want, '\n')
		var got strings.Builder
		n, err := s.WriteJSON(&got, f)
		if err != nil || n != len(list) || got.String() != string(want) {
			t.Errorf("WriteJSON(%+v) = %d, %v:\n%s\nwant %d:\n%s", f, n, err, got.String(), len(list), want)
		}
	}
}

// TestExtensionTag: a record without extension fields keeps the 0x01
// layout byte for byte; one with any is tagged 0x02 and round-trips.
func TestExtensionTag(t *testing.T) {
	t.Parallel()
	base := loop.Loop{ID: "L1", Type: loop.Ralph, Status: loop.Pending, Iteration: 1, MaxIterations: 3,
		CreatedAt: time.Unix(1, 0).UTC()}
	b, err := encodeLoop(base)
	if err != nil || b[0] != tagBinary {
		t.Fatalf("encodeLoop(no extension) = tag %#x, %v; want %#x", b[0], err, tagBinary)
	}
	withExt := base
	withExt.Status = loop.NeedsHuman
	withExt.Needs = &loop.Needs{Reason: loop.NeedsQuestion, Detail: "which db?", Since: time.Unix(5, 0).UTC()}
	withExt.Usage = loop.Usage{InputTokens: 10, CostUSD: 0.25}
	b, err = encodeLoop(withExt)
	if err != nil || b[0] != tagBinaryExt {
		t.Fatalf("encodeLoop(extension) = tag %#x, %v; want %#x", b[0], err, tagBinaryExt)
	}
	got, err := decodeHead([]byte("L1"), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(withExt, got); diff != "" {
		t.Errorf("decodeHead() mismatch (-want +got):\n%s", diff)
	}
	// The review fields: the flag and the comments, which a head skips.
	reviewed := base
	reviewed.Status, reviewed.Review = loop.AwaitingReview, true
	reviewed.Comments = []loop.Comment{{Seq: 1, Path: "a/b.go", Line: 7, Text: "why?", On: "P1", Commit: "abc",
		Context: "7: x := 1", At: time.Unix(9, 0).UTC(), AnsweredBy: 2, Outcome: "passed"}, {Seq: 2, Path: "c", Line: 1, Text: "t"}}
	b, err = encodeLoop(reviewed)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeLoop([]byte("L1"), b); err != nil || !cmp.Equal(reviewed, got) {
		t.Errorf("decodeLoop(review fields) = %v; want a round trip: %s", err, cmp.Diff(reviewed, got))
	}
	if got, err := decodeHead([]byte("L1"), b); err != nil || got.Comments != nil || !got.Review || got.Status != loop.AwaitingReview {
		t.Errorf("decodeHead(review fields) = %+v, %v; want review, awaiting_review, no comments", got, err)
	}
	// An unknown extension field is an error, never dropped.
	// base has an empty body: five empty strings and no lease, 6 bytes.
	plain := appendLoop(nil, &base)
	headEnd := len(plain) - 6
	bad := append(append(append([]byte{tagBinaryExt}, plain[1:headEnd]...), 2, 99, 0), plain[headEnd:]...)
	if _, err := decodeLoop([]byte("L1"), bad); err == nil || !strings.Contains(err.Error(), "unknown extension field 99") {
		t.Errorf("decodeLoop(unknown extension field) error = %v; want unknown extension field 99", err)
	}
}

// TestLandedRoundTrip: a plan's landing (`loopr land`, tag 18) survives
// the codec, alone in the extension block, and the store.
func TestLandedRoundTrip(t *testing.T) {
	t.Parallel()
	l := loop.Loop{ID: "P1", Type: loop.Plan, Status: loop.Complete, Iteration: 1, MaxIterations: 3,
		CreatedAt: time.Unix(1, 0).UTC(),
		Landed: loop.Landed{Into: "main", Commit: "0123456789abcdef0123456789abcdef01234567", Mode: loop.LandMerge,
			From: "89abcdef0123456789abcdef0123456789abcdef", At: time.Unix(1700000000, 123456789).UTC()}}
	b, err := encodeLoop(l)
	if err != nil || b[0] != tagBinaryExt {
		t.Fatalf("encodeLoop(landed) = tag %#x, %v; want %#x", b[0], err, tagBinaryExt)
	}
	got, err := decodeLoop([]byte(l.ID), b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l, got); diff != "" {
		t.Errorf("decodeLoop() mismatch (-want +got):\n%s", diff)
	}
	s := openTest(t)
	mustUpdate(t, s, func(tx *Tx) error { return tx.Put(l) })
	s.View(func(tx *Tx) error {
		got, err = tx.Get(l.ID)
		return err
	})
	if diff := cmp.Diff(l, got); diff != "" {
		t.Errorf("store Get() mismatch (-want +got):\n%s", diff)
	}
}

// TestRootsByStatus: only the loops without a parent, of that status.
func TestRootsByStatus(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	mk := func(id, parent string, st loop.Status) loop.Loop {
		return loop.Loop{ID: id, Parent: parent, Type: loop.Plan, Status: st, Iteration: 1, MaxIterations: 1, CreatedAt: time.Unix(1, 0).UTC()}
	}
	mustUpdate(t, s, func(tx *Tx) error {
		for _, l := range []loop.Loop{mk("A", "", loop.Complete), mk("B", "A", loop.Complete), mk("C", "", loop.Pending), mk("D", "", loop.Complete)} {
			if err := tx.Put(l); err != nil {
				return err
			}
		}
		return nil
	})
	var got []string
	s.View(func(tx *Tx) error {
		return tx.RootsByStatus(loop.Complete, func(l loop.Loop) bool { got = append(got, l.ID); return true })
	})
	if diff := cmp.Diff([]string{"A", "D"}, got); diff != "" {
		t.Errorf("RootsByStatus(complete) mismatch (-want +got):\n%s", diff)
	}
}
