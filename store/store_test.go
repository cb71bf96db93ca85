package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/loopr-dev/loopr/loop"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)

// newLoop returns a valid loop with the fields the tests vary.
func newLoop(id string, st loop.Status, parent string) loop.Loop {
	return loop.Loop{
		ID: id, Type: loop.Ralph, Status: st, Parent: parent,
		Iteration: 1, MaxIterations: 3, CreatedAt: t0, UpdatedAt: t0,
		Title: "loop " + id,
	}
}

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "loopr.db"), Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open() error: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close() error: %v", err)
		}
	})
	return s
}

func mustUpdate(t *testing.T, s *Store, fn func(*Tx) error) {
	t.Helper()
	if err := s.Update(fn); err != nil {
		t.Fatalf("Update() error: %v", err)
	}
}

func mustCheck(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("Check() error: %v", err)
	}
}

func ids(loops []loop.Loop) []string {
	out := []string{}
	for _, l := range loops {
		out = append(out, l.ID)
	}
	return out
}

func byStatusIDs(t *testing.T, tx *Tx, st loop.Status) []string {
	t.Helper()
	out := []string{}
	if err := tx.ByStatus(st, func(l loop.Loop) bool {
		out = append(out, l.ID)
		return true
	}); err != nil {
		t.Fatalf("ByStatus(%s) error: %v", st, err)
	}
	return out
}

// storeSuite is the conformance suite: what every Store must do. Each case
// gets a fresh, empty store.
var storeSuite = []struct {
	name string
	run  func(t *testing.T, s *Store)
}{
	{"create then get", func(t *testing.T, s *Store) {
		want := newLoop("a", loop.Pending, "")
		want.Lease = &loop.Lease{Owner: "d1", ExpiresAt: t0.Add(time.Minute), PID: 42}
		mustUpdate(t, s, func(tx *Tx) error { return tx.Create(want) })
		got, err := s.Get("a")
		if err != nil {
			t.Fatalf("Get() error: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get() mismatch (-want +got):\n%s", diff)
		}
		err = s.Update(func(tx *Tx) error { return tx.Create(want) })
		if !errors.Is(err, ErrExists) || err.Error() != "loop a: already exists" {
			t.Errorf("second Create() error = %v, want loop a: already exists", err)
		}
		_, err = s.Get("nope")
		if !errors.Is(err, ErrNotFound) || err.Error() != "loop nope: not found" {
			t.Errorf("Get(nope) error = %v, want loop nope: not found", err)
		}
	}},
	{"put validates", func(t *testing.T, s *Store) {
		bad := newLoop("a", "bogus", "")
		err := s.Update(func(tx *Tx) error { return tx.Put(bad) })
		if err == nil || err.Error() != `loop a: status "bogus": unknown status` {
			t.Errorf("Put() error = %v, want the Validate error", err)
		}
		if _, err := s.Get("a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get() after a failed Put: error = %v, want ErrNotFound", err)
		}
	}},
	{"writes fail in a read-only transaction", func(t *testing.T, s *Store) {
		if err := s.View(func(tx *Tx) error { return tx.Put(newLoop("a", loop.Pending, "")) }); err == nil {
			t.Error("Put() in View: error = nil")
		}
	}},
	{"status index moves on transition", func(t *testing.T, s *Store) {
		l := newLoop("a", loop.Pending, "")
		mustUpdate(t, s, func(tx *Tx) error { return tx.Create(l) })
		mustUpdate(t, s, func(tx *Tx) error {
			before, err := tx.Get("a")
			if err != nil {
				return err
			}
			after, err := loop.Transition(before, loop.Running, t0.Add(time.Second))
			if err != nil {
				return err
			}
			if err := tx.Put(after); err != nil {
				return err
			}
			_, err = tx.AppendEvent(loop.TransitionEvent(before, after, "picked"))
			return err
		})
		s.View(func(tx *Tx) error {
			if got := byStatusIDs(t, tx, loop.Pending); len(got) != 0 {
				t.Errorf("ByStatus(pending) = %v, want none", got)
			}
			if diff := cmp.Diff([]string{"a"}, byStatusIDs(t, tx, loop.Running)); diff != "" {
				t.Errorf("ByStatus(running) mismatch (-want +got):\n%s", diff)
			}
			for st, want := range map[loop.Status]int{loop.Pending: 0, loop.Running: 1} {
				if n, err := tx.Count(st); err != nil || n != want {
					t.Errorf("Count(%s) = %d, %v; want %d", st, n, err, want)
				}
			}
			return nil
		})
		mustCheck(t, s)
	}},
	{"by status in id order, stops early, rejects unknown", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			for _, id := range []string{"c", "a", "d", "b"} {
				if err := tx.Create(newLoop(id, loop.Pending, "")); err != nil {
					return err
				}
			}
			return tx.Create(newLoop("e", loop.Failed, ""))
		})
		s.View(func(tx *Tx) error {
			if diff := cmp.Diff([]string{"a", "b", "c", "d"}, byStatusIDs(t, tx, loop.Pending)); diff != "" {
				t.Errorf("ByStatus() mismatch (-want +got):\n%s", diff)
			}
			var got []string
			tx.ByStatus(loop.Pending, func(l loop.Loop) bool {
				got = append(got, l.ID)
				return len(got) < 2
			})
			if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
				t.Errorf("ByStatus() stopping after 2 mismatch (-want +got):\n%s", diff)
			}
			if err := tx.ByStatus("bogus", func(loop.Loop) bool { return true }); err == nil {
				t.Error("ByStatus(bogus) error = nil")
			}
			return nil
		})
	}},
	{"by status may write while it scans", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			for i := range 50 {
				if err := tx.Create(newLoop(fmt.Sprintf("l%02d", i), loop.Pending, "")); err != nil {
					return err
				}
			}
			return nil
		})
		var visited int
		mustUpdate(t, s, func(tx *Tx) error {
			var err error
			scanErr := tx.ByStatus(loop.Pending, func(l loop.Loop) bool {
				visited++
				l, err = loop.Transition(l, loop.Running, t0)
				if err == nil {
					err = tx.Put(l)
				}
				return err == nil
			})
			return errors.Join(scanErr, err)
		})
		if visited != 50 {
			t.Errorf("ByStatus() visited %d loops, want 50", visited)
		}
		counts, _ := s.Counts()
		if diff := cmp.Diff(map[loop.Status]int{loop.Running: 50}, counts); diff != "" {
			t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
		}
		mustCheck(t, s)
	}},
	{"children by parent index", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			for _, l := range []loop.Loop{
				newLoop("p", loop.Complete, ""), newLoop("q", loop.Complete, ""),
				newLoop("p-002", loop.Pending, "p"), newLoop("p-001", loop.Pending, "p"),
				newLoop("q-001", loop.Pending, "q"), newLoop("p-003", loop.Running, "p"),
			} {
				if err := tx.Create(l); err != nil {
					return err
				}
			}
			return nil
		})
		children := func(parent string) []string {
			var got []loop.Loop
			err := s.View(func(tx *Tx) (err error) {
				got, err = tx.Children(parent)
				return err
			})
			if err != nil {
				t.Fatalf("Children(%s) error: %v", parent, err)
			}
			return ids(got)
		}
		if diff := cmp.Diff([]string{"p-001", "p-002", "p-003"}, children("p")); diff != "" {
			t.Errorf("Children(p) mismatch (-want +got):\n%s", diff)
		}
		// Re-parenting moves the index entry.
		mustUpdate(t, s, func(tx *Tx) error { return tx.Put(newLoop("p-002", loop.Pending, "q")) })
		if diff := cmp.Diff([]string{"p-001", "p-003"}, children("p")); diff != "" {
			t.Errorf("Children(p) after re-parenting mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"p-002", "q-001"}, children("q")); diff != "" {
			t.Errorf("Children(q) after re-parenting mismatch (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{}, children("p-001")); diff != "" {
			t.Errorf("Children(leaf) mismatch (-want +got):\n%s", diff)
		}
		mustCheck(t, s)
	}},
	{"counts from the status index", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			for i, st := range []loop.Status{loop.Pending, loop.Pending, loop.Running, loop.Failed, loop.Pending} {
				if err := tx.Create(newLoop(fmt.Sprint("l", i), st, "")); err != nil {
					return err
				}
			}
			return nil
		})
		got, err := s.Counts()
		if err != nil {
			t.Fatalf("Counts() error: %v", err)
		}
		want := map[loop.Status]int{loop.Pending: 3, loop.Running: 1, loop.Failed: 1}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Counts() mismatch (-want +got):\n%s", diff)
		}
	}},
	{"events in sequence order, per loop and globally", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			if err := tx.Create(newLoop("a", loop.Pending, "")); err != nil { // seq 1
				return err
			}
			if err := tx.Create(newLoop("b", loop.Pending, "")); err != nil { // seq 2
				return err
			}
			for i, id := range []string{"a", "", "b", "a"} { // seq 3..6
				ev := loop.Event{Time: t0, Loop: id, Kind: loop.EventIteration, Iteration: i + 2, Message: "m"}
				if id == "" {
					ev.Kind = loop.EventRateLimit
				}
				if _, err := tx.AppendEvent(ev); err != nil {
					return err
				}
			}
			return nil
		})
		created := func(seq uint64, id string) loop.Event {
			return loop.Event{Seq: seq, Time: t0, Loop: id, Kind: loop.EventCreated, To: loop.Pending, Iteration: 1}
		}
		iter := func(seq uint64, id string, it int) loop.Event {
			return loop.Event{Seq: seq, Time: t0, Loop: id, Kind: loop.EventIteration, Iteration: it, Message: "m"}
		}
		all := []loop.Event{
			created(1, "a"), created(2, "b"), iter(3, "a", 2),
			{Seq: 4, Time: t0, Kind: loop.EventRateLimit, Iteration: 3, Message: "m"},
			iter(5, "b", 4), iter(6, "a", 5),
		}
		s.View(func(tx *Tx) error {
			got, err := tx.Events("a")
			if err != nil {
				t.Fatalf("Events(a) error: %v", err)
			}
			if diff := cmp.Diff([]loop.Event{all[0], all[2], all[5]}, got); diff != "" {
				t.Errorf("Events(a) mismatch (-want +got):\n%s", diff)
			}
			for _, tc := range []struct {
				since uint64
				limit int
				want  []loop.Event
			}{
				{0, 0, all},
				{2, 2, all[2:4]},
				{5, 10, all[5:]},
				{6, 0, nil},
				{^uint64(0), 0, nil},
			} {
				got, err := tx.EventsSince(tc.since, tc.limit)
				if err != nil {
					t.Fatalf("EventsSince(%d, %d) error: %v", tc.since, tc.limit, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("EventsSince(%d, %d) mismatch (-want +got):\n%s", tc.since, tc.limit, diff)
				}
			}
			if got := tx.LastSeq(); got != 6 {
				t.Errorf("LastSeq() = %d, want 6", got)
			}
			return nil
		})
		for _, bad := range []loop.Event{{Loop: "a"}, {Kind: loop.EventIteration, Loop: "bad id"}} {
			if err := s.Update(func(tx *Tx) error { _, err := tx.AppendEvent(bad); return err }); err == nil {
				t.Errorf("AppendEvent(%+v) error = nil", bad)
			}
		}
	}},
	{"meta round trip", func(t *testing.T, s *Store) {
		type backoff struct {
			Until   time.Time `json:"until"`
			Strikes int       `json:"strikes"`
		}
		want := backoff{Until: t0, Strikes: 3}
		mustUpdate(t, s, func(tx *Tx) error { return tx.SetMeta("ratelimit", want) })
		s.View(func(tx *Tx) error {
			var got backoff
			ok, err := tx.Meta("ratelimit", &got)
			if err != nil || !ok {
				t.Fatalf("Meta(ratelimit) = %v, %v; want true, nil", ok, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Meta() mismatch (-want +got):\n%s", diff)
			}
			if ok, err := tx.Meta("absent", &got); ok || err != nil {
				t.Errorf("Meta(absent) = %v, %v; want false, nil", ok, err)
			}
			return nil
		})
		if err := s.Update(func(tx *Tx) error { return tx.SetMeta(keySchemaVersion, 99) }); err == nil {
			t.Error("SetMeta(schema_version) error = nil, want refused")
		}
	}},
	{"delete cleans indexes and events", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			for _, l := range []loop.Loop{newLoop("p", loop.Complete, ""), newLoop("p-001", loop.Pending, "p"), newLoop("p-002", loop.Pending, "p")} {
				if err := tx.Create(l); err != nil {
					return err
				}
			}
			_, err := tx.AppendEvent(loop.Event{Time: t0, Loop: "p-001", Kind: loop.EventIteration})
			return err
		})
		mustUpdate(t, s, func(tx *Tx) error { return tx.Delete("p-001") })
		s.View(func(tx *Tx) error {
			if _, err := tx.Get("p-001"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get() after Delete: error = %v, want ErrNotFound", err)
			}
			kids, _ := tx.Children("p")
			if diff := cmp.Diff([]string{"p-002"}, ids(kids)); diff != "" {
				t.Errorf("Children() after Delete mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"p-002"}, byStatusIDs(t, tx, loop.Pending)); diff != "" {
				t.Errorf("ByStatus() after Delete mismatch (-want +got):\n%s", diff)
			}
			if evs, _ := tx.Events("p-001"); len(evs) != 0 {
				t.Errorf("Events() after Delete = %v, want none", evs)
			}
			all, _ := tx.EventsSince(0, 0)
			for _, ev := range all {
				if ev.Loop == "p-001" {
					t.Errorf("EventsSince() still has %+v", ev)
				}
			}
			if len(all) != 2 {
				t.Errorf("EventsSince() has %d events, want 2", len(all))
			}
			return nil
		})
		mustCheck(t, s)
		if err := s.Update(func(tx *Tx) error { return tx.Delete("p-001") }); !errors.Is(err, ErrNotFound) {
			t.Errorf("second Delete() error = %v, want ErrNotFound", err)
		}
	}},
	{"a failed update writes nothing", func(t *testing.T, s *Store) {
		boom := errors.New("boom")
		err := s.Update(func(tx *Tx) error {
			if err := tx.Create(newLoop("a", loop.Pending, "")); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update() error = %v, want boom", err)
		}
		s.View(func(tx *Tx) error {
			if tx.Exists("a") || tx.LastSeq() != 0 {
				t.Errorf("after a rolled-back Update: Exists(a) = %v, LastSeq() = %d", tx.Exists("a"), tx.LastSeq())
			}
			return nil
		})
	}},
	{"batch from many goroutines", func(t *testing.T, s *Store) {
		errs := make(chan error)
		for i := range 20 {
			go func() {
				errs <- s.Batch(func(tx *Tx) error {
					return tx.Create(newLoop(fmt.Sprintf("b%02d", i), loop.Pending, ""))
				})
			}()
		}
		for range 20 {
			if err := <-errs; err != nil {
				t.Errorf("Batch() error: %v", err)
			}
		}
		if n, _ := s.Counts(); n[loop.Pending] != 20 {
			t.Errorf("Counts()[pending] = %d, want 20", n[loop.Pending])
		}
		mustCheck(t, s)
	}},
	{"times stored in UTC", func(t *testing.T, s *Store) {
		zone := time.FixedZone("X", 5*3600)
		l := newLoop("a", loop.Running, "")
		l.CreatedAt = t0.In(zone)
		l.Lease = &loop.Lease{Owner: "d", ExpiresAt: t0.In(zone)}
		mustUpdate(t, s, func(tx *Tx) error { return tx.Put(l) })
		got, _ := s.Get("a")
		if !got.CreatedAt.Equal(t0) || got.CreatedAt.Location() != time.UTC || got.Lease.ExpiresAt.Location() != time.UTC {
			t.Errorf("Get().CreatedAt = %v, lease %v; want %v in UTC", got.CreatedAt, got.Lease.ExpiresAt, t0)
		}
		if l.Lease.ExpiresAt.Location() != zone {
			t.Error("Put() changed the caller's lease")
		}
	}},
	{"list filters", func(t *testing.T, s *Store) {
		mustUpdate(t, s, func(tx *Tx) error {
			plan := newLoop("p", loop.Running, "")
			plan.Type = loop.Plan
			for _, l := range []loop.Loop{plan, newLoop("p-1", loop.Pending, "p"), newLoop("p-2", loop.Failed, "p"), newLoop("r", loop.Pending, "")} {
				if err := tx.Create(l); err != nil {
					return err
				}
			}
			return nil
		})
		yes, no := true, false
		for _, tc := range []struct {
			name string
			f    Filter
			want []string
		}{
			{"all", Filter{}, []string{"p", "p-1", "p-2", "r"}},
			{"statuses", Filter{Statuses: []loop.Status{loop.Running, loop.Pending, loop.Pending}}, []string{"p", "p-1", "r"}},
			{"type", Filter{Type: loop.Plan}, []string{"p"}},
			{"parent", Filter{Parent: "p"}, []string{"p-1", "p-2"}},
			{"parent and status", Filter{Parent: "p", Statuses: []loop.Status{loop.Failed}}, []string{"p-2"}},
			{"roots", Filter{HasParent: &no}, []string{"p", "r"}},
			{"children", Filter{HasParent: &yes, Statuses: []loop.Status{loop.Pending}}, []string{"p-1"}},
			{"none", Filter{Type: "nope"}, []string{}},
		} {
			got, err := s.List(tc.f)
			if err != nil {
				t.Fatalf("List(%s) error: %v", tc.name, err)
			}
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("List(%s) mismatch (-want +got):\n%s", tc.name, diff)
			}
		}
		if _, err := s.List(Filter{Statuses: []loop.Status{"bogus"}}); err == nil {
			t.Error("List(bogus status) error = nil")
		}
	}},
	{"set redact: text of records and events redacted", func(t *testing.T, s *Store) {
		// Any func will do: the store applies what it is given.
		s.SetRedact(func(v string) string { return strings.ReplaceAll(v, "SECRET", "[redacted X]") })
		defer s.SetRedact(nil)
		l := newLoop("r1", loop.NeedsHuman, "")
		l.Task, l.Feedback, l.Reason = "task SECRET", "log: SECRET", "SECRET failed"
		l.Needs = &loop.Needs{Reason: loop.NeedsQuestion, Detail: "may I print SECRET?"}
		l.Comments = []loop.Comment{{Seq: 1, Path: "a.go", Line: 1, Text: "SECRET here", Context: "1: SECRET", At: t0}}
		orig := l.Needs
		mustUpdate(t, s, func(tx *Tx) error {
			if err := tx.Create(l); err != nil {
				return err
			}
			_, err := tx.AppendEvent(loop.Event{Time: t0, Loop: "r1", Kind: loop.EventIteration, Message: "said SECRET"})
			return err
		})
		if orig.Detail != "may I print SECRET?" {
			t.Error("SetRedact changed the caller's Needs")
		}
		if err := s.Batch(func(tx *Tx) error {
			_, err := tx.AppendEvent(loop.Event{Time: t0, Kind: loop.EventDaemon, Message: "batched SECRET"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var got loop.Loop
		var evs []loop.Event
		if err := s.View(func(tx *Tx) error {
			var err error
			if got, err = tx.Get("r1"); err != nil {
				return err
			}
			evs, err = tx.EventsSince(0, 100)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprint(got.Task, got.Feedback, got.Reason, got.Needs.Detail, got.Comments[0].Text, got.Comments[0].Context)
		for _, e := range evs {
			text += e.Message
		}
		if strings.Contains(text, "SECRET") || strings.Count(text, "[redacted X]") != 8 {
			t.Errorf("stored text = %q, want 8 marks and no SECRET", text)
		}
	}},
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range storeSuite {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, openTest(t))
		})
	}
}

func TestOpenCreatesFilesPrivately(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "home", ".loopr")
	path := filepath.Join(dir, "loopr.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open() error: %v", err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Errorf("Stat(%s) mode = %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
	pid, err := os.ReadFile(path + ".pid")
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file = %q, %v; want our pid %d", pid, err, os.Getpid())
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close() error: %v", err)
	}
	if _, err := os.Stat(path + ".pid"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after Close: Stat error = %v, want not exist", err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	if _, err := Open(path, Options{ReadOnly: true}); err == nil {
		t.Fatal("Open(missing, ReadOnly) error = nil, want an error")
	}
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx *Tx) error { return tx.Create(newLoop("a", loop.Pending, "")) })
	s.Close()

	// Readers share the lock.
	r1, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(ReadOnly) error: %v", err)
	}
	defer r1.Close()
	r2, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("second Open(ReadOnly) error: %v", err)
	}
	defer r2.Close()
	if _, err := r2.Get("a"); err != nil {
		t.Errorf("Get() on a read-only store: %v", err)
	}
	if err := r1.Update(func(tx *Tx) error { return tx.Delete("a") }); err == nil {
		t.Error("Update() on a read-only store: error = nil")
	}
	// A writer cannot join them; no pid file names a reader.
	var le *LockedError
	if _, err := Open(path, Options{Timeout: 50 * time.Millisecond}); !errors.As(err, &le) || le.PID != 0 {
		t.Errorf("Open() while readers hold the store: error = %v, want a *LockedError without pid", err)
	}
}

func TestLockedErrorMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  LockedError
		want string
	}{
		{"pid known", LockedError{Path: "x", PID: 1234}, "store is in use by pid 1234; is the daemon running?"},
		{"pid unknown", LockedError{Path: "x"}, "store is in use by another process; is the daemon running?"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: Error() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestHelperProcess is not a test: TestOpenLockedByOtherProcess runs the
// test binary again with it to hold a store from another process.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv("LOOPR_STORE_HELPER_DB")
	if path == "" {
		return
	}
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin) // hold the store until the parent closes stdin
	s.Close()
	os.Exit(0)
}

func TestOpenLockedByOtherProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOOPR_STORE_HELPER_DB="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := false
	for sc := bufio.NewScanner(stdout); !ready && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "error:") {
			t.Fatalf("helper: %s", sc.Text())
		}
		ready = sc.Text() == "ready"
	}
	if !ready {
		t.Fatal("helper exited before opening the store")
	}

	for _, opt := range []Options{{}, {ReadOnly: true}} {
		start := time.Now()
		s, err := Open(path, opt)
		elapsed := time.Since(start)
		if err == nil {
			s.Close()
		}
		var le *LockedError
		if !errors.As(err, &le) {
			t.Fatalf("Open(%+v) error = %v, want a *LockedError", opt, err)
		}
		want := LockedError{Path: path, PID: cmd.Process.Pid}
		if diff := cmp.Diff(want, *le); diff != "" {
			t.Errorf("Open(%+v) LockedError mismatch (-want +got):\n%s", opt, diff)
		}
		if elapsed > 3*time.Second {
			t.Errorf("Open(%+v) took %v, want about 1s", opt, elapsed)
		}
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open() after the helper exited: %v", err)
	}
	s.Close()
}

// rawUpdate changes a closed store's file with bbolt directly.
func rawUpdate(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func TestOpenNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(keySchemaVersion), []byte("7"))
	})
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	for _, opt := range []Options{{}, {ReadOnly: true}} {
		_, err = Open(path, opt)
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Fatalf("Open(%+v) error = %v, want a *SchemaError", opt, err)
		}
		if diff := cmp.Diff(SchemaError{Found: 7, Supported: SchemaVersion}, *se); diff != "" {
			t.Errorf("Open(%+v) SchemaError mismatch (-want +got):\n%s", opt, diff)
		}
		if want := fmt.Sprintf("store schema version 7 is newer than this loopr supports (%d); upgrade loopr", SchemaVersion); err.Error() != want {
			t.Errorf("Error() = %q, want %q", err, want)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("Open() of a newer store changed the file")
	}
	if _, err := os.Stat(path + ".pid"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after a failed Open: Stat error = %v, want not exist", err)
	}
}

func TestOpenMigratesFromEmpty(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	rawUpdate(t, path, func(*bolt.Tx) error { return nil }) // a bbolt file with no buckets: version 0

	_, err := Open(path, Options{ReadOnly: true})
	var se *SchemaError
	if !errors.As(err, &se) || se.Found != 0 {
		t.Fatalf("Open(version 0, ReadOnly) error = %v, want a *SchemaError found 0", err)
	}

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open() error: %v", err)
	}
	defer s.Close()
	s.View(func(tx *Tx) error {
		var v int
		if ok, err := tx.Meta(keySchemaVersion, &v); !ok || err != nil || v != SchemaVersion {
			t.Errorf("schema version = %d, %v, %v; want %d", v, ok, err, SchemaVersion)
		}
		for _, b := range allBuckets {
			if boltTxOf(tx).Bucket(b) == nil {
				t.Errorf("bucket %s missing after migration", b)
			}
		}
		return nil
	})
	mustCheck(t, s)
}

func TestCheckFindsIndexDamage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		corrupt func(*bolt.Tx) error
		want    string
	}{
		{"dangling status entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIdxStatus).Put(indexKey("pending", "ghost"), empty)
		}, "store check: index idx_status: loop ghost: no record"},
		{"missing status entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIdxStatus).Delete(indexKey("pending", "a"))
		}, "store check: loop a: status pending: missing from idx_status"},
		{"stale parent entry", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIdxParent).Put(indexKey("x", "a"), empty)
		}, `store check: index idx_parent: loop a listed under "x", record has ""`},
		{"event without index", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIdxEvents).Delete(eventIndexKey("a", 1))
		}, "store check: event 1: loop a: missing from idx_events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "loopr.db")
			s, err := Open(path, Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			mustUpdate(t, s, func(tx *Tx) error { return tx.Create(newLoop("a", loop.Pending, "")) })
			mustCheck(t, s)
			if err := s.db.Update(tc.corrupt); err != nil {
				t.Fatal(err)
			}
			err = s.Check()
			s.Close()
			if err == nil || err.Error() != tc.want {
				t.Errorf("Check() error = %v, want %s", err, tc.want)
			}
		})
	}
}

func TestDeleteUndecodableRecord(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	mustUpdate(t, s, func(tx *Tx) error {
		if err := tx.Create(newLoop("p", loop.Pending, "")); err != nil {
			return err
		}
		return tx.Create(newLoop("p-1", loop.Running, "p"))
	})
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLoops).Put([]byte("p-1"), []byte("{garbage")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("p-1"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "(loop p-1: decode: ") ||
		!strings.Contains(err.Error(), "loopr store repair") {
		t.Errorf("Get(corrupt) error = %v, want ErrCorrupt with a decode error naming the loop and the repair", err)
	}
	mustUpdate(t, s, func(tx *Tx) error { return tx.Delete("p-1") })
	mustCheck(t, s)
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, bytes.Repeat([]byte("not a database\n"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		opt  Options
		want string
	}{
		{"missing, read-only", filepath.Join(dir, "missing.db"), Options{ReadOnly: true},
			"open store: open " + filepath.Join(dir, "missing.db") + ": no such file or directory"},
		{"not a bbolt file", notDB, Options{}, "open store " + notDB + ": invalid database"},
		{"directory is a file", filepath.Join(notDB, "loopr.db"), Options{},
			"open store: mkdir " + notDB + ": not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(tc.path, tc.opt)
			if err == nil {
				s.Close()
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("Open() error = %v, want %s", err, tc.want)
			}
			if _, err := os.Stat(tc.path + ".pid"); err == nil {
				t.Error("Open() failed but left a pid file")
			}
		})
	}
}
