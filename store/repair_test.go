package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/loopr-dev/loopr/loop"
)

// TestGuardKeepsBugsVisible: a panic raised by the caller's own code
// inside a transaction is a bug, not damage: it goes on. Damage the store
// itself detects is a *CorruptError.
func TestGuardKeepsBugsVisible(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	func() {
		defer func() {
			if p := recover(); p != "a bug" {
				t.Errorf("View(fn that panics) recovered %v, want the panic to go on", p)
			}
		}()
		_ = s.View(func(*Tx) error { panic("a bug") })
	}()
	err := s.View(func(*Tx) error { panic(corruptPanic("bucket loops missing")) })
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "loopr store repair") {
		t.Errorf("View(store damage) error = %v, want a *CorruptError naming the repair", err)
	}
	// Raw bytes from the file never reach the message unescaped.
	if e := newCorruptError("x.db", "key \x1b]52;c;eA==\a"); strings.ContainsAny(e.Error(), "\x1b\a") {
		t.Errorf("CorruptError carries raw control bytes: %q", e.Error())
	}
}

// TestRepairSoundStoreKeepsEverything: repairing a sound store copies
// every loop, event and meta key, keeps the journal's numbering, rebuilds
// the indexes, and keeps the old file.
func TestRepairSoundStoreKeepsEverything(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx *Tx) error {
		for _, l := range []loop.Loop{newLoop("p", loop.Complete, ""), newLoop("p-1", loop.Pending, "p"), newLoop("p-2", loop.Failed, "p")} {
			if err := tx.Create(l); err != nil {
				return err
			}
		}
		if _, err := tx.AppendEvent(loop.Event{Time: t0, Kind: "daemon_started"}); err != nil {
			return err
		}
		return tx.SetMeta("ratelimit", map[string]int{"hits": 3})
	})
	wantLoops, _ := s.List(Filter{})
	var wantEvents []loop.Event
	var wantSeq uint64
	_ = s.View(func(tx *Tx) (err error) {
		wantSeq = tx.LastSeq()
		wantEvents, err = tx.EventsSince(0, 0)
		return err
	})
	s.Close()

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rep, err := Repair(path, now)
	if err != nil {
		t.Fatalf("Repair() error: %v", err)
	}
	want := RepairReport{Loops: 3, Events: 4, Meta: 1, Backup: path + ".broken-20260102T030405Z"}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Errorf("Repair() report mismatch (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(rep.Backup); err != nil {
		t.Errorf("damaged file not kept: %v", err)
	}
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCheck(t, s)
	gotLoops, _ := s.List(Filter{})
	if diff := cmp.Diff(wantLoops, gotLoops); diff != "" {
		t.Errorf("loops after repair (-want +got):\n%s", diff)
	}
	_ = s.View(func(tx *Tx) error {
		got, err := tx.EventsSince(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantEvents, got); diff != "" {
			t.Errorf("journal after repair (-want +got):\n%s", diff)
		}
		if tx.LastSeq() != wantSeq {
			t.Errorf("LastSeq() = %d after repair, want %d", tx.LastSeq(), wantSeq)
		}
		var rl map[string]int
		if ok, err := tx.Meta("ratelimit", &rl); !ok || err != nil || rl["hits"] != 3 {
			t.Errorf("meta ratelimit after repair = %v (%v, %v)", rl, ok, err)
		}
		kids, err := tx.Children("p")
		if err != nil || len(kids) != 2 {
			t.Errorf("Children(p) = %d loops, %v; want 2", len(kids), err)
		}
		return nil
	})
}

// TestRepairRefusesWhileOpen: while a daemon holds the store, repair and
// check change nothing and say who holds it.
func TestRepairRefusesWhileOpen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, _ := os.ReadFile(path)
	var le *LockedError
	if _, err := Repair(path, t0); !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Errorf("Repair() of an open store error = %v, want a *LockedError naming pid %d", err, os.Getpid())
	}
	if _, err := CheckFile(path, 100*time.Millisecond); !errors.As(err, &le) {
		t.Errorf("CheckFile() of an open store error = %v, want a *LockedError", err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Error("the store changed")
	}
	if m, _ := filepath.Glob(path + ".*"); len(m) != 1 { // the pid file only
		t.Errorf("files next to the store: %v", m)
	}
}

// TestCheckFileFindsIndexProblems: loopr's own rules, one line each.
func TestCheckFileFindsIndexProblems(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loopr.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, func(tx *Tx) error {
		if err := tx.Create(newLoop("p", loop.Pending, "")); err != nil {
			return err
		}
		return tx.Create(newLoop("p-1", loop.Pending, "p"))
	})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketIdxStatus).Delete(indexKey("pending", "p")); err != nil {
			return err
		}
		if err := tx.Bucket(bucketIdxParent).Put(indexKey("p", "ghost"), empty); err != nil {
			return err
		}
		return tx.Bucket(bucketLoops).Put([]byte("p-1"), []byte("\x01\x1b[2Jgarbage"))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := CheckFile(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"loop p: status pending: missing from idx_status",
		"index idx_parent: loop ghost: no record",
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("CheckFile() lacks %q; got %q", w, got)
		}
	}
	for _, g := range got {
		if strings.ContainsAny(g, "\x1b") {
			t.Errorf("CheckFile() line carries a raw escape: %q", g)
		}
	}
	if len(got) < 3 {
		t.Errorf("CheckFile() = %q, want the undecodable record too", got)
	}

	// Repair keeps what decodes, drops the dangling entry, names the loss.
	rep, err := Repair(path, t0)
	if err != nil {
		t.Fatalf("Repair() error: %v", err)
	}
	if rep.Loops != 1 || !cmp.Equal(rep.SkippedLoops, []string{"p-1"}) || rep.DroppedIndexEntries != 1 {
		t.Errorf("Repair() = %+v, want 1 loop, p-1 skipped, 1 dangling entry dropped", rep)
	}
	if got, err := CheckFile(path, time.Second); err != nil || len(got) != 0 {
		t.Errorf("CheckFile() after repair = %q, %v; want clean", got, err)
	}
}
