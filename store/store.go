package store

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loopr-dev/loopr/internal/safefile"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Sentinel errors to branch on with errors.Is. They are wrapped with the id
// they concern: "loop 01J…: not found".
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// SchemaError reports a store whose schema version this loopr cannot use:
// one written by a newer loopr, or an older one opened read-only (which
// cannot be migrated).
type SchemaError struct {
	Found, Supported int
}

func (e *SchemaError) Error() string {
	if e.Found > e.Supported {
		return fmt.Sprintf("store schema version %d is newer than this loopr supports (%d); upgrade loopr", e.Found, e.Supported)
	}
	return fmt.Sprintf("store schema version %d is older than this loopr's (%d) and the store is open read-only; open it read-write to migrate", e.Found, e.Supported)
}

// LockedError reports that another process holds the store's lock. PID is
// that process as its pid file names it, or 0 when unknown.
type LockedError struct {
	Path string
	PID  int
	// Holder, on etcd, is what the daemon holding the store wrote of
	// itself: "pid N on host H, home D".
	Holder string
}

func (e *LockedError) Error() string {
	if e.Holder != "" {
		return fmt.Sprintf("store %s is in use by the daemon %s; one daemon per store for now (docs/several-machines.md)", e.Path, e.Holder)
	}
	if e.PID > 0 {
		return fmt.Sprintf("store is in use by pid %d; is the daemon running?", e.PID)
	}
	return "store is in use by another process; is the daemon running?"
}

// DefaultTimeout is how long Open waits for the file lock by default.
const DefaultTimeout = time.Second

// Options configure Open.
type Options struct {
	// Timeout is how long to wait for the file lock; zero means
	// DefaultTimeout. Open never waits forever.
	Timeout time.Duration
	// ReadOnly opens the store with a shared lock: many readers may hold
	// it, never together with a writer. A read-only store is not created,
	// migrated, or given a pid file.
	ReadOnly bool
	// NoSync skips fsync on commit. For tests and benchmarks only: a crash
	// can lose or corrupt recent commits.
	NoSync bool
	// Now is the clock for the times the store itself stamps (import
	// events). Nil means time.Now.
	Now func() time.Time
	// Log gets what the etcd backend's follower cannot return to anyone
	// (a record it could not decode, a failed reload). Nil discards it.
	Log *slog.Logger
}

// Store is an open loopr store. Its methods are safe for concurrent use,
// except Close.
type Store struct {
	db      *bolt.DB
	path    string
	pidPath string // the pid file this Store wrote, "" if none
	now     func() time.Time
	w       *writePath // every write transaction goes through it (follow.go)
	etcd    *etcdStore // the etcd backend (etcd.go); nil on the bbolt file
}

// Open opens the store at path, creating it (and its directory, mode 0700)
// unless opt.ReadOnly, and migrates it to SchemaVersion. If another process
// holds the store it returns a *LockedError after opt.Timeout; if the store
// was written by a newer loopr it returns a *SchemaError and writes nothing.
func Open(path string, opt Options) (*Store, error) {
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultTimeout
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if !opt.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	var db *bolt.DB
	// bbolt reads the meta and freelist pages at open: a damaged file can
	// make it panic there already.
	err := guardPath(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{
			Timeout:  opt.Timeout,
			ReadOnly: opt.ReadOnly,
			NoSync:   opt.NoSync,
			// The freelist is written on every commit (one small page more,
			// no extra sync) instead of being rebuilt at open, which reads the
			// header of every page of the file: seconds and the whole file
			// resident at 100k loops (BENCHMARKS.md).
			NoFreelistSync: false,
			FreelistType:   bolt.FreelistMapType,
			// Map generously up front so growth rarely remaps (a remap waits
			// for every reader).
			InitialMmapSize: 64 << 20,
		})
		return err
	})
	if errors.Is(err, ErrCorrupt) {
		return nil, err
	}
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, &LockedError{Path: path, PID: readPID(pidPath(path))}
	}
	if errors.As(err, new(*fs.PathError)) {
		return nil, fmt.Errorf("open store: %w", err) // already names the file
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// Group commit: concurrent Batch calls share one fsynced transaction.
	// A short window keeps a lone writer's latency low.
	s := &Store{db: db, path: path, now: opt.Now,
		w: &writePath{maxDelay: 2 * time.Millisecond, maxSize: db.MaxBatchSize}}
	if !opt.ReadOnly {
		// Written while we hold the lock, so whoever times out waiting
		// for it reads our pid; removed by Close before the lock goes.
		if err := writePID(pidPath(path)); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store: %w", err)
		}
		s.pidPath = pidPath(path)
	}
	if err := guardPath(path, func() error { return s.migrate(opt.ReadOnly) }); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the store and its lock. It is not safe to call
// concurrently with other methods.
func (s *Store) Close() error {
	if s.etcd != nil {
		return s.etcd.close()
	}
	if s.pidPath != "" {
		os.Remove(s.pidPath) // best effort: a stale file only blurs an error message
		s.pidPath = ""
	}
	return s.db.Close()
}

// Path returns the file the store was opened from; on etcd, "etcd:" and
// the key prefix.
func (s *Store) Path() string { return s.path }

// Where says where the records are, for people: the file, or the etcd
// endpoints and key prefix.
func (s *Store) Where() string {
	if s.etcd != nil {
		return strings.TrimPrefix(s.etcd.where, "etcd ")
	}
	return s.path
}

// Backend names the store's backend: "bbolt" or "etcd".
func (s *Store) Backend() string {
	if s.etcd != nil {
		return BackendEtcd
	}
	return BackendBbolt
}

// The backends, as loopr.yml's store.backend names them.
const (
	BackendBbolt = "bbolt"
	BackendEtcd  = "etcd"
)

// View runs fn in a read-only transaction. Records fn reads are decoded
// copies; fn must not keep the *Tx.
//
// A damaged file makes it return a *CorruptError (ErrCorrupt), never panic.
func (s *Store) View(fn func(*Tx) error) error {
	if s.etcd != nil {
		return s.etcd.view(fn)
	}
	return s.guard(func() error {
		return s.db.View(func(btx *bolt.Tx) error { return fn(&Tx{kv: boltTx{btx}, path: s.path}) })
	})
}

// Update runs fn in a read-write transaction, committed if fn returns nil
// and rolled back otherwise. Put one logical change — a record and the event
// that explains it — in one Update. Like View, it answers a damaged file
// with a *CorruptError (the transaction is rolled back).
func (s *Store) Update(fn func(*Tx) error) error {
	fn = s.redacting(fn)
	if s.etcd != nil {
		return s.etcd.update(fn)
	}
	return s.guard(func() error { return s.update(fn) })
}

// Batch is Update for many small concurrent writes: several callers' fns
// may commit in one transaction (group commit, follow.go). fn may run more
// than once, so it must only touch the store (no other side effects), and
// it must not assume its writes commit until Batch returns nil. Group
// commit is bbolt's: on etcd, Batch is Update.
func (s *Store) Batch(fn func(*Tx) error) error {
	fn = s.redacting(fn)
	if s.etcd != nil {
		return s.etcd.update(fn)
	}
	return s.batched(fn)
}

// Check verifies bbolt's page structure and that the secondary indexes agree
// with the records, and returns the first problem found. On etcd, which
// keeps its own pages, it checks the indexes only.
func (s *Store) Check() error {
	return s.View(func(tx *Tx) error {
		var first error
		if btx := boltTxOf(tx); btx != nil {
			for err := range btx.Check() { // drain: the checker goroutine sends every error
				if first == nil {
					first = err
				}
			}
		}
		if first != nil {
			return fmt.Errorf("store check: %w", first)
		}
		if err := tx.checkIndexes(); err != nil {
			return fmt.Errorf("store check: %w", err)
		}
		return nil
	})
}

func pidPath(path string) string { return path + ".pid" }

func writePID(path string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readPID returns the pid in the pid file at path, or 0 if there is none or
// it names a process that no longer exists (left by a crash; the lock is then
// held by a read-only opener, which writes no pid file).
func readPID(path string) int {
	b, err := safefile.Read(path, 64) // never blocks on a planted FIFO
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !alive(pid) {
		return 0
	}
	return pid
}

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
