package scheduler

import (
	"maps"
	"math"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// DefaultCost is the estimated cost, in seconds of wall time, of a loop
// whose type sets no default cost and whose key has not been observed yet.
const DefaultCost = 60.0

// FairnessPolicy configures fair queuing between fairness keys (seed 002,
// loopr.yml scheduler.fairness and the types' default_cost).
type FairnessPolicy struct {
	Enabled bool `json:"enabled"`
	// Alpha is the smoothing factor of the learned cost: each observed wall
	// time w moves the estimate e to Alpha·w + (1−Alpha)·e. 0 < Alpha ≤ 1.
	Alpha float64 `json:"alpha,omitzero"`
	// IdleTTL is how long a key stays known after it was last charged or
	// observed; an idle key is forgotten and comes back at the current
	// minimum. 0: keys are never forgotten.
	IdleTTL time.Duration `json:"idle_ttl_ns,omitzero"`
	// DefaultCost is the cost, in seconds, of a loop type before anything
	// was learned for its key; missing or <= 0: DefaultCost.
	DefaultCost map[string]float64 `json:"default_cost,omitempty"`
}

// defaultCost returns the starting estimate of type t.
func (p FairnessPolicy) defaultCost(t string) float64 {
	if c := p.DefaultCost[t]; c > 0 {
		return c
	}
	return DefaultCost
}

// Fairness is the learned state of fair queuing: per fairness key, the
// accumulated cost of what it was admitted and the learned cost of its
// loops by type. It is a plain value the caller persists between plans (the
// daemon keeps it in a store meta key); Plan only reads it. The methods that
// change it take now and never look at a clock. It holds maps: Clone a
// Fairness before changing a copy that others hold.
type Fairness struct {
	Keys map[string]KeyUsage `json:"keys,omitempty"`
}

// KeyUsage is what Fairness knows about one fairness key.
type KeyUsage struct {
	// Used is the accumulated estimated cost, in seconds, of the loops
	// admitted for the key: the lower, the sooner its next loop.
	Used float64 `json:"used"`
	// Seen is when the key was last charged or observed.
	Seen time.Time `json:"seen"`
	// Cost is the learned cost, in seconds, of the key's loops by type: an
	// exponential moving average of their observed wall time.
	Cost map[string]float64 `json:"cost,omitempty"`
}

// Charge is one admission's cost, charged to its fairness key (Decision.Charges).
type Charge struct {
	ID   string  `json:"id"`
	Type string  `json:"type"`
	Key  string  `json:"key"`
	Cost float64 `json:"cost"` // estimated cost in seconds
	// Floor is what an unknown (new or idle) key starts from: the lowest
	// Used of the known keys when the plan was made.
	Floor float64 `json:"floor"`
}

// FairnessKey returns the key l is queued under: its fairness_key when set,
// else root, the id of the root of its tree (a root loop is its own root).
// A child whose root is not known falls back to its parent.
func FairnessKey(l *loop.Loop, root string) string {
	switch {
	case l.FairnessKey != "":
		return l.FairnessKey
	case root != "":
		return root
	case l.Parent != "":
		return l.Parent
	}
	return l.ID
}

// live reports whether u is still known at now.
func live(u KeyUsage, now time.Time, ttl time.Duration) bool {
	return ttl <= 0 || now.Sub(u.Seen) < ttl
}

// Lookup returns the state of key at now; false when the key is unknown or
// has been idle for ttl or longer.
func (f Fairness) Lookup(key string, now time.Time, ttl time.Duration) (KeyUsage, bool) {
	u, ok := f.Keys[key]
	if !ok || !live(u, now, ttl) {
		return KeyUsage{}, false
	}
	return u, true
}

// Floor returns the lowest Used among the keys known at now, 0 when none:
// where a new or returning key starts, so that it neither waits behind
// everyone's history nor jumps ahead of it for long.
func (f Fairness) Floor(now time.Time, ttl time.Duration) float64 {
	floor, any := math.Inf(1), false
	for _, u := range f.Keys {
		if live(u, now, ttl) && u.Used < floor {
			floor, any = u.Used, true
		}
	}
	if !any {
		return 0
	}
	return floor
}

// Estimate returns the cost, in seconds, of a loop of type typ under key: its
// cost hint when positive, else the key's learned cost for the type, else
// the type's default cost.
func (f Fairness) Estimate(typ, key string, hint float64, now time.Time, p FairnessPolicy) float64 {
	if hint > 0 {
		return hint
	}
	if u, ok := f.Lookup(key, now, p.IdleTTL); ok {
		if c, ok := u.Cost[typ]; ok {
			return c
		}
	}
	return p.defaultCost(typ)
}

// Charge adds c's cost to its key. A key unknown at now (new, or idle for
// IdleTTL) starts from c.Floor and forgets what it had learned.
func (f *Fairness) Charge(c Charge, now time.Time, p FairnessPolicy) {
	u := f.touch(c.Key, c.Floor, now, p.IdleTTL)
	u.Used += c.Cost
	u.Seen = now
	f.Keys[c.Key] = u
}

// Record forgets the keys idle at now, then charges the loops started at
// now: what a caller does with the Decision.Charges of the loops it started.
func (f *Fairness) Record(charges []Charge, now time.Time, p FairnessPolicy) {
	f.Evict(now, p.IdleTTL)
	for _, c := range charges {
		f.Charge(c, now, p)
	}
}

// Observe learns from a loop of type typ under key that ran for wall:
// the key's cost for the type moves toward wall by Alpha, starting from the
// type's default cost. An unknown key starts at the current Floor.
func (f *Fairness) Observe(typ, key string, wall time.Duration, now time.Time, p FairnessPolicy) {
	u := f.touch(key, f.Floor(now, p.IdleTTL), now, p.IdleTTL)
	prev, ok := u.Cost[typ]
	if !ok {
		prev = p.defaultCost(typ)
	}
	alpha := p.Alpha
	if !(alpha > 0 && alpha <= 1) {
		alpha = 1
	}
	u.Cost = maps.Clone(u.Cost)
	if u.Cost == nil {
		u.Cost = map[string]float64{}
	}
	u.Cost[typ] = alpha*max(wall.Seconds(), 0) + (1-alpha)*prev
	u.Seen = now
	f.Keys[key] = u
}

// touch returns key's state, or a fresh one starting at floor when the key
// is unknown at now.
func (f *Fairness) touch(key string, floor float64, now time.Time, ttl time.Duration) KeyUsage {
	if f.Keys == nil {
		f.Keys = map[string]KeyUsage{}
	}
	if u, ok := f.Keys[key]; ok && live(u, now, ttl) {
		return u
	}
	return KeyUsage{Used: floor}
}

// Evict forgets the keys idle at now for ttl or longer and returns how many
// it removed. ttl <= 0 keeps every key.
func (f *Fairness) Evict(now time.Time, ttl time.Duration) int {
	n := 0
	for k, u := range f.Keys {
		if !live(u, now, ttl) {
			delete(f.Keys, k)
			n++
		}
	}
	return n
}

// Clone returns a deep copy of f.
func (f Fairness) Clone() Fairness {
	if f.Keys == nil {
		return Fairness{}
	}
	out := Fairness{Keys: make(map[string]KeyUsage, len(f.Keys))}
	for k, u := range f.Keys {
		u.Cost = maps.Clone(u.Cost)
		out.Keys[k] = u
	}
	return out
}
