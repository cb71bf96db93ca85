package control

import (
	"errors"
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// FairnessKey is the store meta key of the persisted fair-queuing state
// (scheduler.Fairness).
const FairnessKey = "fairness"

// addTypePolicies sets the policies of seeds 001–003 on p: tiers, conflict
// groups and default costs per type, owners' running quotas, fairness.
func addTypePolicies(p *scheduler.Policy, c *config.Config) {
	p.Fairness = scheduler.FairnessPolicy{
		Enabled:     c.Scheduler.Fairness.Enabled,
		Alpha:       c.Scheduler.Fairness.Alpha,
		IdleTTL:     c.Scheduler.Fairness.IdleTTL(),
		DefaultCost: map[string]float64{},
	}
	for _, t := range c.Types() {
		tp := c.Policy(t)
		p.Fairness.DefaultCost[t] = float64(tp.DefaultCost)
		if tp.Tier > 0 {
			if p.Tier == nil {
				p.Tier = map[string]int{}
			}
			p.Tier[t] = tp.Tier
		}
		if tp.ConflictGroup != "" {
			if p.ConflictGroup == nil {
				p.ConflictGroup = map[string]string{}
			}
			p.ConflictGroup[t] = tp.ConflictGroup
		}
	}
	for owner, q := range c.Quotas {
		if q.MaxRunning > 0 {
			if p.OwnerCap == nil {
				p.OwnerCap = map[string]int{}
			}
			p.OwnerCap[owner] = q.MaxRunning
		}
	}
}

// roots finds the root of each loop's tree by walking parents, each
// ancestor read once: a plan's thousands of tasks share a handful of
// ancestors. known holds records already read (nil entries: missing).
type roots struct {
	tx    *store.Tx
	known map[string]*loop.Loop
	root  map[string]string // id → root id
}

// of returns the id of the root above the loop with parent parent ("" for a
// root loop). A missing ancestor ends the walk: the highest record found is
// the root.
func (r *roots) of(parent string) (string, error) {
	if parent == "" {
		return "", nil
	}
	var chain []string
	cur := parent
	root := ""
	for i := 0; i < 1000; i++ {
		if got, ok := r.root[cur]; ok {
			root = got
			break
		}
		rec, ok := r.known[cur]
		if !ok {
			l, err := r.tx.Get(cur)
			switch {
			case err == nil:
				rec = &l
			case !errors.Is(err, store.ErrNotFound):
				return "", err
			}
			r.known[cur] = rec
		}
		chain = append(chain, cur)
		if rec == nil || rec.Parent == "" {
			root = cur
			break
		}
		cur = rec.Parent
	}
	if root == "" {
		root = cur // a cycle or a chain over 1000 long: stop somewhere stable
	}
	for _, id := range chain {
		r.root[id] = root
	}
	return root, nil
}

// KeyOf returns the fairness key of l, reading its ancestors in tx: its
// fairness_key, else the id of its root.
func KeyOf(tx *store.Tx, l loop.Loop) (string, error) {
	r := roots{tx: tx, known: map[string]*loop.Loop{}, root: map[string]string{}}
	root, err := r.of(l.Parent)
	if err != nil {
		return "", err
	}
	return scheduler.FairnessKey(&l, root), nil
}

// loadFairness reads the fair-queuing state in tx; none yet is the zero state.
func loadFairness(tx *store.Tx) (scheduler.Fairness, error) {
	var f scheduler.Fairness
	_, err := tx.Meta(FairnessKey, &f)
	return f, err
}

// Charge adds the costs of loops that started to their fairness keys, and
// forgets keys idle longer than scheduler.fairness.idle_ttl_secs. The
// manager calls it with the Decision.Charges of the loops it started.
func (s *Service) Charge(charges []scheduler.Charge, now time.Time) error {
	if len(charges) == 0 {
		return nil
	}
	fp := Policy(s.cfg()).Fairness
	return s.Store.Update(func(tx *store.Tx) error {
		f, err := loadFairness(tx)
		if err != nil {
			return err
		}
		f.Record(charges, now, fp)
		return tx.SetMeta(FairnessKey, f)
	})
}

// ObserveCost learns, in tx, that an iteration of l took wall, on the
// agent profile l.Agent: the learned iteration time of l's type and of its
// type and profile (store meta "durations", the tree term's estimates)
// moves toward wall, always; with fairness on, so does the learned cost of
// (l's type, l's fairness key). Both are EMAs with scheduler.fairness.alpha.
func (s *Service) ObserveCost(tx *store.Tx, l loop.Loop, wall time.Duration, now time.Time) error {
	fp := Policy(s.cfg()).Fairness
	d, err := loadDurations(tx)
	if err != nil {
		return err
	}
	d.Observe(l.Type, l.Agent, wall, fp.Alpha)
	if err := tx.SetMeta(DurationsKey, d); err != nil {
		return err
	}
	if !fp.Enabled {
		return nil
	}
	key, err := KeyOf(tx, l)
	if err != nil {
		return err
	}
	f, err := loadFairness(tx)
	if err != nil {
		return err
	}
	f.Evict(now, fp.IdleTTL)
	f.Observe(l.Type, key, wall, now, fp)
	return tx.SetMeta(FairnessKey, f)
}

// Observe is ObserveCost in a transaction of its own.
func (s *Service) Observe(l loop.Loop, wall time.Duration, now time.Time) error {
	return s.Store.Update(func(tx *store.Tx) error { return s.ObserveCost(tx, l, wall, now) })
}

// DurationsKey is the store meta key of the learned iteration times
// (scheduler.Durations) the tree term estimates a tree's work left with.
const DurationsKey = "durations"

// loadDurations reads the learned iteration times in tx; none yet is empty.
func loadDurations(tx *store.Tx) (scheduler.Durations, error) {
	d := scheduler.Durations{}
	if _, err := tx.Meta(DurationsKey, &d); err != nil {
		return nil, err
	}
	if d == nil {
		d = scheduler.Durations{}
	}
	return d, nil
}

// LimitError refuses a new loop because an admission limit is reached:
// admission.max_pending (Code api.CodeQueueFull) or quotas.<owner>.max_pending
// (api.CodeQuotaExceeded). It is the caller's to retry later; the API
// answers it with 429 and the code.
type LimitError struct {
	Code string
	Msg  string
}

func (e *LimitError) Error() string { return e.Msg }

// admissionCount is the number of waiting loops, in total and by owner,
// counted once per write transaction: a batch creates up to MaxBatch loops
// in one transaction, each checked against the limits.
type admissionCount struct {
	tx      *store.Tx // the transaction counted; holding it keeps its address unique
	total   int
	byOwner map[string]int // nil until an owner's quota needs it
}

// admit checks the admission limits for a new loop of owner in tx, and
// counts it as waiting when admitted.
func (s *Service) admit(tx *store.Tx, owner string) error {
	c := s.cfg()
	limit := c.Admission.MaxPending
	quota := 0
	if owner != "" {
		quota = c.Quotas[owner].MaxPending
	}
	if limit == 0 && quota == 0 {
		return nil
	}
	s.admMu.Lock()
	defer s.admMu.Unlock()
	a := &s.adm
	if a.tx != tx {
		*a = admissionCount{tx: tx}
		for _, st := range []loop.Status{loop.Pending, loop.Paused} {
			n, err := tx.Count(st)
			if err != nil {
				*a = admissionCount{}
				return err
			}
			a.total += n
		}
	}
	if quota > 0 && a.byOwner == nil {
		a.byOwner = map[string]int{}
		for _, st := range []loop.Status{loop.Pending, loop.Paused} {
			if err := tx.ByStatus(st, func(l loop.Loop) bool { a.byOwner[l.Owner]++; return true }); err != nil {
				*a = admissionCount{}
				return err
			}
		}
	}
	if limit > 0 && a.total >= limit {
		return &LimitError{Code: api.CodeQueueFull,
			Msg: fmt.Sprintf("queue full: %d loops waiting (admission.max_pending %d); retry when some have started", a.total, limit)}
	}
	if quota > 0 && a.byOwner[owner] >= quota {
		return &LimitError{Code: api.CodeQuotaExceeded,
			Msg: fmt.Sprintf("quota exceeded: owner %s has %d loops waiting (quotas.%s.max_pending %d)", owner, a.byOwner[owner], owner, quota)}
	}
	a.count(owner, 1)
	return nil
}

func (a *admissionCount) count(owner string, n int) {
	a.total += n
	if a.byOwner != nil {
		a.byOwner[owner] += n
	}
}

// unadmit takes back admit's count when the loop was not stored after all.
func (s *Service) unadmit(tx *store.Tx, owner string) {
	s.admMu.Lock()
	defer s.admMu.Unlock()
	if s.adm.tx == tx {
		s.adm.count(owner, -1)
	}
}
