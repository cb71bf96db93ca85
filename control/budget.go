package control

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
	"github.com/loopr-dev/loopr/store"
)

// LimitsKey is the store meta key of the rate-limit state of every agent
// profile, a JSON object by profile name. RateLimitKey, the one shared
// state of earlier versions, is read as the default profile's while
// LimitsKey does not exist yet.
const LimitsKey = "ratelimits"

// BudgetsKey is the store meta key that says some loop was ever given a
// budget: until then no tree can be spent, and no decision looks for one.
const BudgetsKey = "budgets"

// UsageDayKey is the store meta key of what agents consumed today (UTC).
const UsageDayKey = "usage_day"

// UsageDay is what agents consumed on one day (UTC), by the iterations
// recorded that day.
type UsageDay struct {
	Day   string     `json:"day"` // 2006-01-02
	Usage loop.Usage `json:"usage"`
}

// LoadLimits reads the rate-limit state of every agent profile.
func LoadLimits(tx *store.Tx) (map[string]ratelimit.State, error) {
	m := map[string]ratelimit.State{}
	ok, err := tx.Meta(LimitsKey, &m)
	if err != nil || ok {
		return m, err
	}
	var legacy ratelimit.State
	if ok, err := tx.Meta(RateLimitKey, &legacy); err != nil {
		return m, err
	} else if ok && legacy != (ratelimit.State{}) {
		m[config.DefaultProfile] = legacy
	}
	return m, nil
}

// SaveLimits writes the rate-limit state of every agent profile.
func SaveLimits(tx *store.Tx, m map[string]ratelimit.State) error { return tx.SetMeta(LimitsKey, m) }

// AddUsageToday adds u to today's usage (UTC) in tx.
func AddUsageToday(tx *store.Tx, u loop.Usage, now time.Time) error {
	if u == (loop.Usage{}) {
		return nil
	}
	var d UsageDay
	if _, err := tx.Meta(UsageDayKey, &d); err != nil {
		return err
	}
	if day := now.UTC().Format(time.DateOnly); d.Day != day {
		d = UsageDay{Day: day}
	}
	d.Usage = d.Usage.Add(u)
	return tx.SetMeta(UsageDayKey, d)
}

// UsageToday returns what agents consumed today (UTC) as of now.
func UsageToday(tx *store.Tx, now time.Time) (loop.Usage, error) {
	var d UsageDay
	if _, err := tx.Meta(UsageDayKey, &d); err != nil {
		return loop.Usage{}, err
	}
	if d.Day != now.UTC().Format(time.DateOnly) {
		return loop.Usage{}, nil
	}
	return d.Usage, nil
}

// TreeUsage returns the usage of l and all its descendants.
func TreeUsage(tx *store.Tx, l loop.Loop) (loop.Usage, error) {
	u := l.Usage
	desc, err := Descendants(tx, l.ID)
	if err != nil {
		return u, err
	}
	for _, d := range desc {
		u = u.Add(d.Usage)
	}
	return u, nil
}

// RootOf returns the root of l's tree (l itself when it has no parent; the
// highest ancestor found when one is missing).
func RootOf(tx *store.Tx, l loop.Loop) (loop.Loop, error) {
	cur := l
	for i := 0; cur.Parent != "" && i < 1000; i++ {
		p, err := tx.Get(cur.Parent)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return cur, nil
			}
			return cur, err
		}
		cur = p
	}
	return cur, nil
}

// TreeSpent reports whether the budget of root's tree is spent, with the
// reason text of the budget gate.
func TreeSpent(tx *store.Tx, root loop.Loop) (string, bool, error) {
	if root.Budget == (loop.Budget{}) {
		return "", false, nil
	}
	u, err := TreeUsage(tx, root)
	if err != nil || !root.Budget.Spent(u) {
		return "", false, err
	}
	return scheduler.BudgetText("tree budget", root.Budget, u) + loop.TreeBudgetRoot + root.ID + ")", true, nil
}

// spentCache holds the trees whose budget is spent while the daemon runs
// (the index is on): usage changes only when an iteration is recorded and
// budgets only by `loopr budget` and import, which update it. On etcd,
// where other daemons record iterations too, the store follower queues
// every changed loop with usage or a budget and the next decision rechecks
// its tree (metacache.go).
type spentCache struct {
	mu     sync.Mutex
	loaded bool
	m      map[string]string
}

// spentTrees returns the spent trees among those of the waiting loops (the
// only ones a gate can hold back): from the cache with the index on,
// otherwise worked out in tx.
func (s *Service) spentTrees(tx *store.Tx) (map[string]string, error) {
	if used, err := s.budgetsUsed(tx); err != nil || !used {
		return nil, err
	}
	if s.Index() != nil {
		s.spent.mu.Lock()
		defer s.spent.mu.Unlock()
		if s.spent.loaded {
			if len(s.spent.m) == 0 {
				return nil, nil
			}
			return maps.Clone(s.spent.m), nil
		}
	}
	out := map[string]string{}
	// Each distinct root once; ancestors read once (roots memoizes).
	r := roots{tx: tx, known: map[string]*loop.Loop{}, root: map[string]string{}}
	rootIDs := map[string]bool{}
	var err error
	for _, st := range []loop.Status{loop.Pending, loop.Paused, loop.Running, loop.NeedsHuman} {
		e := tx.ByStatus(st, func(l loop.Loop) bool {
			if l.Parent == "" {
				rootIDs[l.ID] = true
				return true
			}
			var id string
			if id, err = r.of(l.Parent); err != nil {
				return false
			}
			rootIDs[id] = true
			return true
		})
		if e != nil {
			return nil, e
		}
		if err != nil {
			return nil, err
		}
	}
	for id := range rootIDs {
		root, err := tx.Get(id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		text, spent, err := TreeSpent(tx, root)
		if err != nil {
			return nil, err
		}
		if spent {
			out[id] = text
		}
	}
	if s.Index() != nil {
		s.spent.loaded, s.spent.m = true, out
		return maps.Clone(out), nil
	}
	return out, nil
}

// RecheckBudget works out again whether the tree of root is spent, in tx,
// and keeps the answer for the scheduler. It returns the gate's text.
func (s *Service) RecheckBudget(tx *store.Tx, root loop.Loop) (string, bool, error) {
	text, spent, err := TreeSpent(tx, root)
	if err != nil {
		return "", false, err
	}
	s.spent.mu.Lock()
	defer s.spent.mu.Unlock()
	if s.spent.loaded {
		if spent {
			s.spent.m[root.ID] = text
		} else {
			delete(s.spent.m, root.ID)
		}
	}
	return text, spent, nil
}

// forgetSpent drops the cache: the next decision works it out again.
func (s *Service) forgetSpent() {
	s.spent.mu.Lock()
	s.spent.loaded, s.spent.m = false, nil
	s.spent.mu.Unlock()
}

// budgetHeld reports whether l may not start an iteration for its budget,
// in tx: its own budget is spent, or its tree's.
func budgetHeld(tx *store.Tx, l loop.Loop) (string, bool, error) {
	if l.Budget.Spent(l.Usage) {
		return scheduler.BudgetText("budget", l.Budget, l.Usage), true, nil
	}
	root, err := RootOf(tx, l)
	if err != nil {
		return "", false, err
	}
	if root.ID == l.ID && l.Parent == "" {
		return TreeSpent(tx, l)
	}
	return TreeSpent(tx, root)
}

// HoldForBudget moves the waiting loops of l's tree whose budget (their
// own, or the tree's) is spent to needs_human (reason budget), in tx, and
// returns their ids. A running loop finishes its iteration first: the
// manager calls this again once it is recorded.
func (s *Service) HoldForBudget(tx *store.Tx, l loop.Loop, now time.Time) ([]string, error) {
	root, err := RootOf(tx, l)
	if err != nil {
		return nil, err
	}
	_, treeSpent, err := s.RecheckBudget(tx, root)
	if err != nil {
		return nil, err
	}
	tree := []loop.Loop{l} // only l's own budget can have changed
	if treeSpent {
		desc, err := Descendants(tx, root.ID)
		if err != nil {
			return nil, err
		}
		tree = append([]loop.Loop{root}, desc...)
	}
	var held []string
	for _, cur := range tree {
		if cur.Status != loop.Pending && cur.Status != loop.Paused {
			continue
		}
		text, spent, err := budgetHeld(tx, cur)
		if err != nil {
			return held, err
		}
		if !spent {
			continue
		}
		needs := &loop.Needs{Reason: loop.NeedsBudget, Detail: text, Since: now}
		parked := cur
		parked.Needs = needs
		if err := Move(tx, cur, loop.NeedsHuman, now, "needs a person: "+text+"; raise it with `"+parked.NeedsAction()+"`",
			func(n *loop.Loop) { n.Needs = needs }); err != nil {
			return held, err
		}
		held = append(held, cur.ID)
	}
	return held, nil
}

// SetBudget changes the budget of loop id (`loopr budget`) and puts back
// to pending the loops of its tree that waited in needs_human for a budget
// that is no longer spent.
func (s *Service) SetBudget(id string, req api.BudgetRequest) (api.BudgetResult, error) {
	if req.USD == nil && req.Tokens == nil {
		return api.BudgetResult{}, Invalid("budget", "give --usd N, --tokens N or both (0 removes that ceiling)")
	}
	if req.USD != nil && (math.IsNaN(*req.USD) || math.IsInf(*req.USD, 0) || *req.USD < 0) {
		return api.BudgetResult{}, Invalid("--usd", "must be a number >= 0 (0 = no dollar ceiling)")
	}
	if req.Tokens != nil && *req.Tokens < 0 {
		return api.BudgetResult{}, Invalid("--tokens", "must be >= 0 (0 = no token ceiling)")
	}
	now := s.Now()
	var res api.BudgetResult
	err := s.Store.Update(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		b := l.Budget
		if req.USD != nil {
			b.USD = *req.USD
		}
		if req.Tokens != nil {
			b.Tokens = *req.Tokens
		}
		l.Budget = b
		l.UpdatedAt = now
		if err := s.noteBudget(tx, b); err != nil {
			return err
		}
		if err := tx.Put(l); err != nil {
			return err
		}
		msg := fmt.Sprintf("budget set to %s", budgetString(b))
		if _, err := tx.AppendEvent(loop.Event{Time: now, Loop: id, Kind: loop.EventConfig, Iteration: l.Iteration, Message: msg}); err != nil {
			return err
		}
		root, err := RootOf(tx, l)
		if err != nil {
			return err
		}
		if _, _, err := s.RecheckBudget(tx, root); err != nil {
			return err
		}
		desc, err := Descendants(tx, root.ID)
		if err != nil {
			return err
		}
		for _, cur := range append([]loop.Loop{root}, desc...) {
			if cur.Status != loop.NeedsHuman || cur.Needs == nil || cur.Needs.Reason != loop.NeedsBudget {
				continue
			}
			if _, spent, err := budgetHeld(tx, cur); err != nil || spent {
				if err != nil {
					return err
				}
				continue
			}
			if err := Move(tx, cur, loop.Pending, now, "budget raised: "+msg, func(n *loop.Loop) { n.Needs = nil }); err != nil {
				return err
			}
			res.Resumed = append(res.Resumed, cur.ID)
		}
		// A lowered budget may be spent already: its waiting loops wait
		// for a person now, not after the next iteration.
		cur, err := tx.Get(id)
		if err != nil {
			return err
		}
		if res.Held, err = s.HoldForBudget(tx, cur, now); err != nil {
			return err
		}
		if res.Loop, err = tx.Get(id); err != nil {
			return err
		}
		res.Usage, err = TreeUsage(tx, res.Loop)
		return err
	})
	if res.Resumed == nil {
		res.Resumed = []string{}
	}
	if res.Held == nil {
		res.Held = []string{}
	}
	return res, err
}

// budgetString reads "$5.00 and 100000 tokens", "none".
func budgetString(b loop.Budget) string {
	switch {
	case b.USD > 0 && b.Tokens > 0:
		return fmt.Sprintf("$%.2f and %d tokens", b.USD, b.Tokens)
	case b.USD > 0:
		return fmt.Sprintf("$%.2f", b.USD)
	case b.Tokens > 0:
		return fmt.Sprintf("%d tokens", b.Tokens)
	}
	return "none"
}

// BudgetSpentFor reports, in tx, whether the budget l's iteration may have
// spent is spent: l's own, or its tree's. It writes nothing.
func (s *Service) BudgetSpentFor(tx *store.Tx, l loop.Loop) (bool, error) {
	if used, err := s.budgetsUsed(tx); err != nil || !used {
		return false, err
	}
	if l.Budget.Spent(l.Usage) {
		return true, nil
	}
	root, err := RootOf(tx, l)
	if err != nil {
		return false, err
	}
	_, spent, err := s.RecheckBudget(tx, root)
	return spent, err
}

// TreeUsageOf returns what loop id and all its descendants consumed.
func (s *Service) TreeUsageOf(id string) (api.TreeUsage, error) {
	out := api.TreeUsage{ID: id}
	err := s.Store.View(func(tx *store.Tx) error {
		l, err := tx.Get(id)
		if err != nil {
			return err
		}
		desc, err := Descendants(tx, id)
		if err != nil {
			return err
		}
		out.Usage, out.Loops = l.Usage, 1+len(desc)
		for _, d := range desc {
			out.Usage = out.Usage.Add(d.Usage)
		}
		return nil
	})
	return out, err
}

// budgetsUsed reports whether any loop was ever given a budget (BudgetsKey),
// remembered once read.
func (s *Service) budgetsUsed(tx *store.Tx) (bool, error) {
	switch s.budgets.Load() {
	case budgetsNone:
		return false, nil
	case budgetsSome:
		return true, nil
	}
	var used bool
	if _, err := tx.Meta(BudgetsKey, &used); err != nil {
		return false, err
	}
	// Every write of a budget goes through this Service (noteBudget): one
	// daemon, or one command, owns the store; on etcd the store follower
	// forgets the answer when another daemon writes BudgetsKey (metacache.go).
	if used {
		s.budgets.Store(budgetsSome)
	} else {
		s.budgets.Store(budgetsNone)
	}
	return used, nil
}

// The states of Service.budgets.
const (
	budgetsUnknown int32 = iota
	budgetsNone
	budgetsSome
)

// noteBudget records in tx that a loop has budget b (BudgetsKey), once.
func (s *Service) noteBudget(tx *store.Tx, b loop.Budget) error {
	if b == (loop.Budget{}) || s.budgets.Load() == budgetsSome {
		return nil
	}
	if err := tx.SetMeta(BudgetsKey, true); err != nil {
		return err
	}
	s.budgets.Store(budgetsSome) // a rolled-back write only costs a needless look later
	return nil
}
