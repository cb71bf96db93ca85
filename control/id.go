package control

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
	idLastMs  uint64
)

// NewID returns a new loop id: a ULID for time t, so ids sort by creation.
// Every id is greater than the one made before it in this process, even
// when t goes back (another clock, a retried transaction): the siblings a
// parent spawns keep their order while creations with other clocks
// interleave. The id's time is then the latest seen, never earlier than t.
func NewID(t time.Time) string {
	idMu.Lock()
	defer idMu.Unlock()
	ms := max(ulid.Timestamp(t), idLastMs)
	idLastMs = ms
	return ulid.MustNew(ms, idEntropy).String()
}
