package scheduler

import (
	"fmt"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// Agents says which agent profile a loop runs on and which profiles take
// its next iteration while that one is limited (loopr.yml agent:,
// agents:, loops.<type>.agent, fallback:). The zero value puts every loop
// on the profile "".
type Agents struct {
	// Default is the profile of loops whose type names none.
	Default string `json:"default,omitempty"`
	// ByType is loops.<type>.agent; missing or "": Default.
	ByType map[string]string `json:"by_type,omitempty"`
	// Fallback lists, for every known profile (a profile absent here is
	// unknown: a loop naming it runs on its type's), who takes over while
	// it is limited, in order; fallbacks are followed transitively.
	Fallback map[string][]string `json:"fallback,omitempty"`
}

// Of returns the profile l runs on when nothing is limited: its own agent
// when known, else its type's, else Default.
func (a *Agents) Of(l *loop.Loop) string {
	if l.Agent != "" {
		if _, ok := a.Fallback[l.Agent]; ok {
			return l.Agent
		}
	}
	if p := a.ByType[l.Type]; p != "" {
		return p
	}
	return a.Default
}

// Pick returns the profile l's next iteration runs on at now: its own
// profile when it is not limited, else the first of its fallbacks (depth
// first, in order) that is not. ok is false when every one of them is
// limited; profile is then l's own.
func (a *Agents) Pick(l *loop.Loop, limits map[string]ratelimit.State, now time.Time) (profile string, ok bool) {
	return a.PickFunc(l, func(p string) bool { return !limits[p].Blocked(now) })
}

// PickFunc is Pick with free saying which profiles may take an iteration.
func (a *Agents) PickFunc(l *loop.Loop, free func(profile string) bool) (profile string, ok bool) {
	own := a.Of(l)
	if free(own) {
		return own, true
	}
	seen := map[string]bool{own: true}
	var walk func(p string) (string, bool)
	walk = func(p string) (string, bool) {
		for _, f := range a.Fallback[p] {
			if seen[f] {
				continue
			}
			seen[f] = true
			if free(f) {
				return f, true
			}
			if g, ok := walk(f); ok {
				return g, true
			}
		}
		return "", false
	}
	if f, ok := walk(own); ok {
		return f, true
	}
	return own, false
}

// budgetSpent reports whether a loop's own budget is spent by its own usage.
func budgetSpent(l *loop.Loop) bool { return l.Budget.Spent(l.Usage) }

// BudgetText says how a budget b was spent by u: "budget spent: $1.20 of
// $1.00", or in tokens when the dollar ceiling is not the one reached.
func BudgetText(what string, b loop.Budget, u loop.Usage) string {
	if b.USD > 0 && u.CostUSD >= b.USD {
		return fmt.Sprintf("%s spent: $%.2f of $%.2f", what, u.CostUSD, b.USD)
	}
	return fmt.Sprintf("%s spent: %d of %d tokens", what, u.Tokens(), b.Tokens)
}

func profileLimitedText(profile string, remaining time.Duration) string {
	if profile == "" {
		return rateLimitedText(remaining)
	}
	return "agent " + profile + " rate limited for " + Wait(remaining)
}

func profileRecoveryText(profile string) string {
	if profile == "" {
		return recoveryText
	}
	return "agent " + profile + " " + recoveryText
}
