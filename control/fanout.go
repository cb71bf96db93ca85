package control

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/fanout"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/store"
)

// Best-of-N groups (package fanout): a task asked to fan out is stored as
// k candidate loops, siblings of one parent, each with its own worktree
// and branch; the manager lets only the winner merge (loopmgr/fanout.go).
// Their usage stays on their records, so the tree's usage (TreeUsage)
// counts every candidate's, winner or not.

// fanoutN returns how many candidates a new loop of type typ asks for:
// asked when set, else loops.<type>.fanout, else one per profile of a list
// of two or more agents; 1 means a loop of its own.
func (s *Service) fanoutN(typ string, asked int, agents []string) int {
	n := asked
	if n == 0 {
		n = s.cfg().Loop(typ).Fanout
	}
	if n == 0 && len(agents) > 1 {
		n = len(agents)
	}
	return max(n, 1)
}

// checkFanout validates a request's fanout and agents, naming flag.
func (s *Service) checkFanout(typ string, n int, agents []string, flag, agentsFlag string) error {
	c := s.cfg()
	if n < 0 || n > fanout.MaxN {
		return Invalid(flag, "%d: must be 1 to %d", n, fanout.MaxN)
	}
	if _, spawns := loop.ChildType(typ); spawns && (n > 1 || len(agents) > 1) {
		return Invalid(flag, "only tasks fan out (ralph and user types): a %s writes an artifact, not code to merge", typ)
	}
	if len(agents) > fanout.MaxN {
		return Invalid(agentsFlag, "%d profiles: at most %d", len(agents), fanout.MaxN)
	}
	if eff := s.fanoutN(typ, n, agents); len(agents) > eff {
		return Invalid(agentsFlag, "%d profiles for %d candidate(s): the candidates take the profiles in turn, so the last %d would never run; name at most %d, or ask for %d candidates", len(agents), eff, len(agents)-eff, eff, len(agents))
	}
	for _, a := range agents {
		if _, ok := c.Profile(a); !ok {
			return Invalid(agentsFlag, "unknown agent profile %q (known: %s)", a, strings.Join(c.Profiles(), ", "))
		}
	}
	return nil
}

// launches returns how many of n candidates of l may start (fanout.Launches
// with the budget of l's tree and l's own budget, each candidate's), and a
// note for the journal when it is fewer than n.
func launches(tx *store.Tx, l loop.Loop, n int) (int, string, error) {
	if l.Parent == "" || l.Budget == (loop.Budget{}) {
		return n, "", nil
	}
	p, err := tx.Get(l.Parent)
	if err != nil {
		return n, "", err
	}
	root, err := RootOf(tx, p)
	if err != nil || root.Budget == (loop.Budget{}) {
		return n, "", err
	}
	spent, err := TreeUsage(tx, root)
	if err != nil {
		return n, "", err
	}
	b := func(x loop.Budget) fanout.Budget { return fanout.Budget{USD: x.USD, Tokens: x.Tokens} }
	k := fanout.Launches(n, b(root.Budget), b(l.Budget), fanout.Budget{USD: spent.CostUSD, Tokens: spent.Tokens()})
	if k >= n {
		return n, "", nil
	}
	return k, fmt.Sprintf("; only %d of the %d asked started: the tree's budget (%s, %s spent%s) has room for %d candidates' own budgets (%s each)",
		k, n, budgetString(root.Budget), usageString(spent), loop.TreeBudgetRoot+root.ID+")", k, budgetString(l.Budget)), nil
}

// usageString words what was spent, in the units budgets use.
func usageString(u loop.Usage) string {
	return fmt.Sprintf("$%.2f and %d tokens", u.CostUSD, u.Tokens())
}

// createGroup stores l as the candidates of a best-of-N group of n (fewer
// when the tree's budget allows fewer: launches), in tx, each with the
// next profile of agents (fanout.Agents; none: l's own), and journals the
// group on each. It returns the candidates, the first (the group's id)
// first.
func (s *Service) createGroup(tx *store.Tx, l loop.Loop, n int, agents []string, now time.Time) ([]loop.Loop, error) {
	k, note, err := launches(tx, l, n)
	if err != nil {
		return nil, err
	}
	pick := s.cfg().Loop(l.Type).FanoutPick
	if pick == "" {
		pick = fanout.PickFirst
	}
	out := make([]loop.Loop, 0, k)
	for i := 1; i <= k; i++ {
		c := l
		c.DependsOn = slices.Clone(l.DependsOn)
		if i > 1 {
			c.ID = NewID(now)
		}
		if a := fanout.Agents(agents, i); a != "" {
			c.Agent = a
		}
		c.Title = fmt.Sprintf("%s [%d/%d]", l.Title, i, k)
		c.Fanout = &loop.Fanout{Group: l.ID, Index: i, Of: k}
		if err := tx.Create(c); err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("best-of-%d: candidate %d of %d (group %s, fanout_pick: %s; only the winner merges)%s", k, i, k, loop.ShortID(l.ID), pick, note)
		if _, err := tx.AppendEvent(loop.Event{Time: now, Loop: c.ID, Kind: loop.EventFanout, Iteration: c.Iteration, Message: msg}); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// createFanout is CreateIn for a request whose loop fans out (n > 1): the
// candidates are admitted one by one, and the first is returned.
func (s *Service) createFanout(tx *store.Tx, req api.CreateRequest, l loop.Loop, n int, now time.Time) (loop.Loop, error) {
	group, err := s.createGroup(tx, l, n, req.Agents, now)
	if err != nil {
		return loop.Loop{}, err
	}
	for range group[1:] {
		if err := s.admit(tx, l.Owner); err != nil {
			return loop.Loop{}, err
		}
	}
	return group[0], nil
}
