// Package control implements loopr's operations on the loop store: create,
// list, the user actions (cancel, reset, pause, resume, approve, reject,
// iterate), the scheduler snapshot and the explanations built from it.
//
// The CLI calls it directly when no daemon runs; the daemon calls the same
// code behind its API, so both paths behave identically. Each operation is
// one store transaction that writes the records and their events together.
package control

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
	"github.com/loopr-dev/loopr/workspace"
)

// RateLimitKey is the store meta key of the persisted shared 429 state.
const RateLimitKey = "ratelimit"

// InputError is bad user input; the CLI exits 2 on it. Field names the flag
// or field at fault.
type InputError struct {
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// Invalid returns an *InputError.
func Invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is the user's mistake rather than a runtime
// failure: bad input, an unknown id, an illegal transition, a bad config.
func IsUsage(err error) bool {
	var ie *InputError
	var te *loop.TransitionError
	var ce *config.Error
	var le *LimitError
	var ae *AmbiguousError
	return errors.As(err, &ae) || errors.As(err, &ie) || errors.As(err, &te) || errors.As(err, &ce) || errors.As(err, &le) ||
		errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrExists)
}

// Service runs operations against one store with one configuration.
type Service struct {
	Store *store.Store
	Paths workspace.Paths
	now   func() time.Time
	cfg   func() *config.Config
	disk  func(path string) (float64, error)

	admMu sync.Mutex
	adm   admissionCount // the waiting loops counted in the last write transaction

	idx     indexState   // the in-memory scheduling index, once enabled (index.go)
	spent   spentCache   // the trees whose budget is spent, with the index on (budget.go)
	budgets atomic.Int32 // whether any loop has a budget: budgetsUnknown, None or Some (budget.go)
	meta    metaCache    // rate limits and fairness in memory on etcd, with the index on (metacache.go)

	gates gateState                         // preflight and no_git (preflight.go)
	arts  storeArtifacts                    // artifact copies seen in the store (artifacts.go)
	look  func(file string) (string, error) // finds a program on PATH; nil: exec.LookPath
}

// New returns a Service. cfg is called on every operation so a daemon can
// swap configurations; now is the clock.
func New(st *store.Store, paths workspace.Paths, cfg func() *config.Config, now func() time.Time) *Service {
	return &Service{Store: st, Paths: paths, cfg: cfg, now: now, disk: FreeGB}
}

// Config returns the configuration in force.
func (s *Service) Config() *config.Config { return s.cfg() }

// Now returns the service clock's time, truncated to milliseconds so that
// what is stored round-trips exactly through JSON.
func (s *Service) Now() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

// Policy builds the scheduler policy from a configuration.
func Policy(c *config.Config) scheduler.Policy {
	p := scheduler.Policy{
		Base: map[string]int{},
		Weights: scheduler.Weights{
			AgeBoostPerMinute:        c.Scheduler.Priority.AgeBoostPerMinute,
			AgeBoostMax:              c.Scheduler.Priority.AgeBoostMax,
			DepthBoostPerLevel:       c.Scheduler.Priority.DepthBoostPerLevel,
			RetryPenaltyPerIteration: c.Scheduler.Priority.RetryPenaltyPerIteration,
			RetryPenaltyMax:          c.Scheduler.Priority.RetryPenaltyMax,
			TreeBoostMax:             c.Scheduler.Priority.TreeBoostMax,
			TreeAgeBoostPerMinute:    c.Scheduler.Priority.TreeAgeBoostPerMinute,
			TreeAgeBoostMax:          c.Scheduler.Priority.TreeAgeBoostMax,
		},
		MaxLoops: c.Concurrency.MaxLoops,
		TypeCap:  map[string]int{},
	}
	for _, t := range c.Types() {
		p.Base[t] = c.Base(t)
		if cp := c.TypeCap(t); cp > 0 {
			p.TypeCap[t] = cp
		}
	}
	addTypePolicies(&p, c)
	p.Agents = scheduler.Agents{Default: config.DefaultProfile, ByType: map[string]string{}, Fallback: map[string][]string{}}
	for _, name := range c.Profiles() {
		a, _ := c.Profile(name)
		p.Agents.Fallback[name] = a.Fallback
	}
	for _, t := range c.Types() {
		if a := c.Loop(t).Agent; a != config.DefaultProfile {
			p.Agents.ByType[t] = a
		}
	}
	return p
}

// RateLimitConfig builds the backoff settings from a configuration.
func RateLimitConfig(c *config.Config) ratelimit.Config {
	return ratelimit.Config{
		Initial:  time.Duration(c.RateLimit.InitialBackoffSecs) * time.Second,
		Max:      time.Duration(c.RateLimit.MaxBackoffSecs) * time.Second,
		Recovery: time.Duration(c.RateLimit.RecoveryPeriodSecs) * time.Second,
	}
}

// titleFrom makes a short display name from a task text.
func titleFrom(task string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(task), "\n")
	line = strings.TrimLeft(line, "#* ")
	const max = 60
	if r := []rune(line); len(r) > max {
		line = string(r[:max-1]) + "…"
	}
	return line
}
