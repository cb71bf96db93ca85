package store

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/loopr-dev/loopr/internal/termsafe"
)

// ErrCorrupt is what every error about a damaged store file wraps: bbolt
// met a page it cannot read (it panics on them), a record does not decode,
// or an index names a record that is not there. Branch on it with
// errors.Is; the way back is `loopr store repair`.
var ErrCorrupt = errors.New("store is damaged")

// CorruptError reports a damaged store. Detail is one line with every
// control character escaped: it may quote bytes read from the damaged
// file, and those must never reach a terminal raw.
type CorruptError struct {
	Path   string
	Detail string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("store %s is damaged (%s); stop the daemon and run `loopr store repair`", e.Path, e.Detail)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// damage marks an error found inside a transaction as the file's fault (a
// record that does not decode, a dangling index entry). View and Update
// turn it into a *CorruptError at the store's boundary.
type damage struct{ err error }

func (d *damage) Error() string { return d.err.Error() }
func (d *damage) Unwrap() error { return d.err }

func damaged(err error) error {
	if err == nil {
		return nil
	}
	return &damage{err}
}

// corruptPanic is the store's own panic about the file's structure (a
// bucket missing after migration), so guard knows it for damage.
type corruptPanic string

// maxDetail caps the detail of a CorruptError: a damaged key can be long.
const maxDetail = 300

func newCorruptError(path, detail string) *CorruptError {
	detail = termsafe.Line(detail)
	if r := []rune(detail); len(r) > maxDetail {
		detail = string(r[:maxDetail-1]) + "…"
	}
	return &CorruptError{Path: path, Detail: detail}
}

// guard runs fn, which reads or writes the bbolt file, and turns what a
// damaged file does to it into a *CorruptError: bbolt's assertion panics
// on pages that are not what their parent says, memory faults on offsets
// past the mapping (SetPanicOnFault makes them panics of this goroutine),
// and damage errors. A panic that has nothing to do with the file (a bug
// in fn) is not hidden: it goes on.
func (s *Store) guard(fn func() error) error { return guardPath(s.path, fn) }

func guardPath(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if !fromDamage(p) {
			panic(p)
		}
		err = newCorruptError(path, fmt.Sprint(p))
	}()
	err = fn()
	var d *damage
	if errors.As(err, &d) {
		return newCorruptError(path, err.Error())
	}
	return err
}

// fromDamage reports whether the panic p, being recovered, came from
// reading the file: it was raised in bbolt's code, it is a memory fault, or
// it is the store's own corruptPanic. A panic raised in loopr's code inside
// a transaction (a bug) is not damage, although bbolt's View is below it.
func fromDamage(p any) bool {
	if _, ok := p.(corruptPanic); ok {
		return true
	}
	if re, ok := p.(runtime.Error); ok {
		if _, fault := re.(interface{ Addr() uintptr }); fault {
			return true
		}
	}
	// Still inside the deferred call: the frames that panicked are on the
	// stack, just below runtime.gopanic.
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			panicking = true
		case panicking && !strings.HasPrefix(f.Function, "runtime."):
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}
