package store

import (
	"bytes"
	"errors"
	"github.com/go-json-experiment/json/v1"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
)

// fullTree returns a plan → spec → phase → ralph chain plus a standalone
// ralph, with every field of loop.Loop set.
func fullTree() []loop.Loop {
	full := func(id, typ, parent string, depth int, st loop.Status) loop.Loop {
		at := func(d time.Duration) time.Time { return t0.Add(d) }
		return loop.Loop{
			ID: id, Type: typ, Status: st, Parent: parent, Depth: depth,
			TriggeredBy: "loops/" + parent + "/iter-1/artifact.md",
			Task:        "do " + id + "\nwith \"quotes\" and ünïcode",
			Title:       "title " + id,
			Iteration:   2, MaxIterations: 5,
			CreatedAt: at(0), UpdatedAt: at(time.Second), StartedAt: at(2 * time.Second),
			FinishedAt: at(3 * time.Second), RunnableAt: at(4 * time.Second), Deadline: at(time.Hour),
			Artifact: "loops/" + id + "/artifact.md", Workdir: "/w/" + id, Feedback: "test failed: x",
			Lease:       &loop.Lease{Owner: "daemon-1", ExpiresAt: at(time.Minute), PID: 99, PIDStart: 12345},
			FairnessKey: "fk", ConflictKey: "ck", CostHint: 2.5, Owner: "me", Reason: "because",
		}
	}
	return []loop.Loop{
		full("01PLAN", loop.Plan, "", 0, loop.Complete),
		full("01PLAN-001", loop.Spec, "01PLAN", 1, loop.Complete),
		full("01PLAN-001-001", loop.Phase, "01PLAN-001", 2, loop.Running),
		full("01PLAN-001-001-001", loop.Ralph, "01PLAN-001-001", 3, loop.Pending),
		full("02SOLO", loop.Ralph, "", 0, loop.Failed),
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src := openTest(t)
	want := fullTree()
	mustUpdate(t, src, func(tx *Tx) error {
		for _, l := range want {
			if err := tx.Create(l); err != nil {
				return err
			}
		}
		return nil
	})
	var exported bytes.Buffer
	n, err := src.Export(&exported)
	if err != nil || n != len(want) {
		t.Fatalf("Export() = %d, %v; want %d, nil", n, err, len(want))
	}
	if lines := strings.Count(exported.String(), "\n"); lines != len(want) {
		t.Errorf("Export() wrote %d lines, want %d", lines, len(want))
	}

	read, err := ReadJSONL(bytes.NewReader(exported.Bytes()))
	if err != nil {
		t.Fatalf("ReadJSONL() error: %v", err)
	}
	if diff := cmp.Diff(want, read); diff != "" {
		t.Errorf("ReadJSONL() mismatch (-want +got):\n%s", diff)
	}
	importedAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dst, err := Open(t.TempDir()+"/loopr.db", Options{NoSync: true, Now: func() time.Time { return importedAt }})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if n, err := dst.Import(read); err != nil || n != len(want) {
		t.Fatalf("Import() = %d, %v; want %d, nil", n, err, len(want))
	}
	got, err := dst.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() after Import mismatch (-want +got):\n%s", diff)
	}
	var again bytes.Buffer
	if _, err := dst.Export(&again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(exported.String(), again.String()); diff != "" {
		t.Errorf("re-Export() mismatch (-want +got):\n%s", diff)
	}
	dst.View(func(tx *Tx) error {
		evs, err := tx.Events("02SOLO")
		if err != nil {
			t.Fatal(err)
		}
		wantEv := []loop.Event{{Seq: 5, Time: importedAt, Loop: "02SOLO", Kind: loop.EventImported, To: loop.Failed, Iteration: 2}}
		if diff := cmp.Diff(wantEv, evs); diff != "" {
			t.Errorf("Events() after Import mismatch (-want +got):\n%s", diff)
		}
		return nil
	})
	mustCheck(t, dst)
}

func TestImportDepths(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	root := newLoop("root", loop.Complete, "")
	mid := newLoop("mid", loop.Complete, "root")
	mid.Depth = 1
	mustUpdate(t, s, func(tx *Tx) error {
		if err := tx.Create(root); err != nil {
			return err
		}
		return tx.Create(mid)
	})
	// Children before parents, wrong depths, one chain hanging off the store.
	in := []loop.Loop{
		newLoop("c", loop.Pending, "b"),
		newLoop("b", loop.Pending, "a"),
		newLoop("a", loop.Pending, ""),
		newLoop("x", loop.Pending, "y"),
		newLoop("y", loop.Pending, "mid"),
	}
	for i := range in {
		in[i].Depth = 7
	}
	if _, err := s.Import(in); err != nil {
		t.Fatalf("Import() error: %v", err)
	}
	got := map[string]int{}
	all, _ := s.List(Filter{})
	for _, l := range all {
		got[l.ID] = l.Depth
	}
	want := map[string]int{"root": 0, "mid": 1, "a": 0, "b": 1, "c": 2, "y": 2, "x": 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("depths after Import mismatch (-want +got):\n%s", diff)
	}
}

// TestImportAllOrNothing: every rejected import leaves the store as it was.
func TestImportAllOrNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		loops   []loop.Loop
		want    string
		wantErr error
	}{
		{"id already in the store", []loop.Loop{newLoop("new", loop.Pending, ""), newLoop("old", loop.Pending, "")},
			"import: loop old: already exists in the store", ErrExists},
		{"unknown parent", []loop.Loop{newLoop("a", loop.Pending, ""), newLoop("b", loop.Pending, "a"), newLoop("c", loop.Pending, "nowhere")},
			"import: loop c: parent nowhere: not in the import or the store", nil},
		{"cycle", []loop.Loop{newLoop("a", loop.Pending, "c"), newLoop("b", loop.Pending, "a"), newLoop("c", loop.Pending, "b")},
			"import: loop a: parent chain is a cycle: a → c → b → a", nil},
		{"repeated id", []loop.Loop{newLoop("a", loop.Pending, ""), newLoop("a", loop.Pending, "")},
			"import: loop a: appears twice in the import", nil},
		{"invalid record", []loop.Loop{newLoop("a", loop.Pending, ""), newLoop("b", "bogus", "")},
			`import: loop b: status "bogus": unknown status`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t)
			mustUpdate(t, s, func(tx *Tx) error { return tx.Create(newLoop("old", loop.Running, "")) })
			var before bytes.Buffer
			s.Export(&before)

			n, err := s.Import(tc.loops)
			if err == nil || err.Error() != tc.want || n != 0 {
				t.Fatalf("Import() = %d, %v; want 0, %s", n, err, tc.want)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Import() error = %v, want errors.Is %v", err, tc.wantErr)
			}
			var after bytes.Buffer
			s.Export(&after)
			if diff := cmp.Diff(before.String(), after.String()); diff != "" {
				t.Errorf("store changed by a failed Import (-before +after):\n%s", diff)
			}
			s.View(func(tx *Tx) error {
				if seq := tx.LastSeq(); seq != 1 {
					t.Errorf("LastSeq() = %d after a failed Import, want 1", seq)
				}
				return nil
			})
		})
	}
}

func jsonLine(t testing.TB, l loop.Loop) string {
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadJSONL(t *testing.T) {
	t.Parallel()
	a, b := newLoop("a", loop.Pending, ""), newLoop("b", loop.Running, "a")
	la, lb := jsonLine(t, a), jsonLine(t, b)
	withField := func(line, field string) string { return strings.Replace(line, "{", "{"+field+",", 1) }
	bad := strings.Replace(jsonLine(t, newLoop("c", loop.Pending, "")), `"pending"`, `"bogus"`, 1)

	for _, tc := range []struct {
		name    string
		in      string
		want    []loop.Loop
		wantErr string
	}{
		{"empty", "", nil, ""},
		{"two records", la + "\n" + lb + "\n", []loop.Loop{a, b}, ""},
		{"blank lines, CRLF, no final newline", "\n" + la + "\r\n  \r\n\t\n" + lb, []loop.Loop{a, b}, ""},
		{"line over MaxLineSize", la + "\n" + la + strings.Repeat(" ", MaxLineSize), nil, "line 2: longer than 16 MiB"},
		{"bad status on line 3", la + "\n" + lb + "\n" + bad + "\n", nil, `line 3: status "bogus": unknown status`},
		{"invalid JSON on line 4", la + "\n\n" + lb + "\n{\"id\": \n", nil, "line 4: invalid JSON: unexpected end of JSON input"},
		{"wrong type", `{"id": 5}`, nil, "line 1: invalid JSON: cannot unmarshal number into Go struct field Loop.id of type string"},
		{"bad time", `{"id":"a","created_at":"yesterday"}`, nil,
			`line 1: invalid JSON: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`},
		{"unknown field", withField(la, `"bogus":1`), nil, `line 1: unknown field "bogus"`},
		{"field name in the wrong case", strings.Replace(la, `"status"`, `"Status"`, 1), nil, `line 1: unknown field "Status"`},
		{"unknown lease field", withField(la, `"lease":{"owner":"d","own":"x"}`), nil, `line 1: lease: unknown field "own"`},
		{"trailing data", la + " {}", nil, "line 1: invalid JSON: invalid character '{' after top-level value"},
		{"not an object", "[1]", nil, "line 1: invalid JSON: cannot unmarshal array into Go value of type loop.Loop"},
		{"null", "null", nil, `line 1: id "": must be 1-64 characters of letters, digits, '-' or '_'`},
		{"duplicate id", la + "\n" + lb + "\n" + la, nil, `line 3: id "a": duplicate of line 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ReadJSONL(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("ReadJSONL() error = %v, want %s", err, tc.wantErr)
				}
				var le *LineError
				if !errors.As(err, &le) {
					t.Errorf("ReadJSONL() error is %T, want *LineError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadJSONL() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadJSONL() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadJSONLLineLimit checks the boundary with a small limit: reading
// 16 MiB lines is slow under -race.
func TestReadJSONLLineLimit(t *testing.T) {
	t.Parallel()
	const max = 1 << 10
	a := newLoop("a", loop.Pending, "")
	la := jsonLine(t, a)
	padded := la + strings.Repeat(" ", max-len(la))
	for _, tc := range []struct {
		name    string
		in      string
		want    []loop.Loop
		wantErr string
	}{
		{"exactly the limit, CRLF", padded + "\r\n", []loop.Loop{a}, ""},
		{"exactly the limit, no newline", padded, []loop.Loop{a}, ""},
		{"one byte over", "\n" + padded + " \n", nil, "line 2: longer than 1024 bytes"},
		{"one byte over, a CR", "\n" + padded + "\r\r\n", nil, "line 2: longer than 1024 bytes"},
		{"far over", "\n\n" + padded + padded + padded, nil, "line 3: longer than 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := readJSONL(strings.NewReader(tc.in), max)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("readJSONL() error = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("readJSONL() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readJSONL() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzReadJSONL: the parser never panics, everything it accepts is valid
// and unique, and what it accepts survives a write and a re-read unchanged.
func FuzzReadJSONL(f *testing.F) {
	for _, l := range fullTree() {
		f.Add([]byte(jsonLine(f, l) + "\n"))
	}
	f.Add([]byte(`{"id":"a","type":"ralph","status":"pending","iteration":1,"max_iterations":1,"created_at":"2025-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z","depth":0}`))
	f.Add([]byte("\n\r\n{}\n[]\nnull\n"))
	f.Add([]byte(`{"id":"a","lease":{"owner":"x","Owner":"y"}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := ReadJSONL(bytes.NewReader(in))
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("ReadJSONL() error %v does not name a line", err)
			}
			return
		}
		seen := map[string]bool{}
		var out bytes.Buffer
		for _, l := range got {
			if err := l.Validate(); err != nil {
				t.Fatalf("ReadJSONL() accepted an invalid record: %v", err)
			}
			if seen[l.ID] {
				t.Fatalf("ReadJSONL() accepted id %q twice", l.ID)
			}
			seen[l.ID] = true
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatalf("json.Marshal(accepted record) error: %v", err)
			}
			out.Write(append(b, '\n'))
		}
		again, err := ReadJSONL(&out)
		if err != nil {
			t.Fatalf("re-reading accepted records: %v", err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Fatalf("re-read mismatch (-first +second):\n%s", diff)
		}
	})
}
