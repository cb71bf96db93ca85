package control

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/readyset"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// metaCache keeps in memory, on an etcd store with the index on, what a
// decision reads besides the loops: the rate-limit state of every profile
// and the fairness state. On etcd every read is a network round trip and
// other daemons write the same store, so the values are kept in step by
// the store follower: a commit that wrote one of their meta keys (this
// daemon's or another's, Commit.Meta) makes the next decision read them
// again. A decision on an unchanged store reads no etcd at all.
//
// The spent-trees cache (budget.go) is kept cluster-wide the same way:
// every followed loop whose usage or budget may have changed is queued, and
// the next decision rechecks the budget of its tree (TreeSpent on its root)
// before it decides. On bbolt nothing of this runs: one daemon owns the
// file, and a read of meta costs microseconds.
type metaCache struct {
	gen atomic.Uint64 // bumped by the follower when a cached key changed

	mu     sync.Mutex
	loaded bool
	at     uint64 // gen when limits and fair were read
	limits map[string]ratelimit.State
	fair   scheduler.Fairness
	durs   scheduler.Durations
	dirty  map[string]loop.Loop // followed loops whose tree's budget must be rechecked
}

// maxDirty is how many queued loops are rechecked one tree at a time; past
// it the next decision works every spent tree out again.
const maxDirty = 512

// cachesMeta reports whether decisions read meta through metaCache.
func (s *Service) cachesMeta() bool {
	return s.Store.Backend() == store.BackendEtcd && s.Index() != nil
}

// followed notes, from the store follower, what a commit changed that the
// caches depend on. It runs with the store's delivery order held: it only
// notes, and reads nothing.
func (s *Service) followed(c store.Commit) {
	if s.Store.Backend() != store.BackendEtcd {
		return
	}
	for _, k := range c.Meta {
		switch k {
		case LimitsKey, RateLimitKey, FairnessKey, DurationsKey:
			s.meta.gen.Add(1)
		case BudgetsKey:
			s.budgets.Store(budgetsUnknown)
		}
	}
	if s.budgets.Load() == budgetsNone {
		return // no loop has a budget: no tree can be spent
	}
	m := &s.meta
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range c.Changes {
		ch := &c.Changes[i]
		if ch.Deleted || (ch.Loop.Usage == (loop.Usage{}) && ch.Loop.Budget == (loop.Budget{})) {
			continue
		}
		if m.dirty == nil {
			m.dirty = map[string]loop.Loop{}
		}
		m.dirty[ch.ID] = ch.Loop
	}
}

// cachedEnv is env's store part on etcd: the rate limits, fairness,
// learned durations and spent trees from memory, read from the store only
// when a followed commit changed them.
func (s *Service) cachedEnv(fair, tree bool) (readyset.Env, scheduler.Durations, error) {
	var env readyset.Env
	var d scheduler.Durations
	m := &s.meta
	gen := m.gen.Load()
	m.mu.Lock()
	hit := m.loaded && m.at == gen
	if hit {
		env.Limits = maps.Clone(m.limits)
		if fair {
			env.Fairness = m.fair.Clone()
		}
		if tree {
			d = maps.Clone(m.durs)
		}
	}
	dirty := m.dirty
	m.dirty = nil
	m.mu.Unlock()
	if spent, ok := s.cachedSpent(); hit && ok && len(dirty) == 0 {
		env.Spent = spent
		return env, d, nil
	}
	err := s.Store.View(func(tx *store.Tx) error {
		if !hit {
			limits, err := LoadLimits(tx)
			if err != nil {
				return err
			}
			f, err := loadFairness(tx)
			if err != nil {
				return err
			}
			durs, err := loadDurations(tx)
			if err != nil {
				return err
			}
			m.mu.Lock()
			m.loaded, m.at, m.limits, m.fair, m.durs = true, gen, limits, f, durs
			m.mu.Unlock()
			env.Limits = maps.Clone(limits)
			if fair {
				env.Fairness = f.Clone()
			}
			if tree {
				d = maps.Clone(durs)
			}
		}
		if err := s.recheckTrees(tx, dirty); err != nil {
			return err
		}
		var err error
		env.Spent, err = s.spentTrees(tx)
		return err
	})
	if err != nil && len(dirty) > 0 { // recheck them next time
		m.mu.Lock()
		if m.dirty == nil {
			m.dirty = map[string]loop.Loop{}
		}
		for id, l := range dirty {
			if _, ok := m.dirty[id]; !ok {
				m.dirty[id] = l
			}
		}
		m.mu.Unlock()
	}
	return env, d, err
}

// cachedSpent returns the spent trees without reading the store, ok false
// when they must be read.
func (s *Service) cachedSpent() (map[string]string, bool) {
	switch s.budgets.Load() {
	case budgetsNone:
		return nil, true
	case budgetsSome:
		s.spent.mu.Lock()
		defer s.spent.mu.Unlock()
		if !s.spent.loaded {
			return nil, false
		}
		if len(s.spent.m) == 0 {
			return nil, true
		}
		return maps.Clone(s.spent.m), true
	}
	return nil, false
}

// recheckTrees rechecks, in tx, the budget of the tree of every loop in
// dirty (each root once), so that usage recorded by another daemon holds
// back the rest of its tree here too.
func (s *Service) recheckTrees(tx *store.Tx, dirty map[string]loop.Loop) error {
	if len(dirty) == 0 {
		return nil
	}
	if used, err := s.budgetsUsed(tx); err != nil || !used {
		return err
	}
	if len(dirty) > maxDirty {
		s.forgetSpent()
		return nil
	}
	done := map[string]bool{}
	for _, l := range dirty {
		var root loop.Loop
		var err error
		if l.Parent == "" {
			root, err = tx.Get(l.ID) // the record now, not as followed
		} else {
			root, err = RootOf(tx, l)
		}
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if done[root.ID] {
			continue
		}
		done[root.ID] = true
		if _, _, err := s.RecheckBudget(tx, root); err != nil {
			return err
		}
	}
	return nil
}
