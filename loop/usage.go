package loop

import "math"

// Bounds of what loopr believes and records of agents' usage. An agent's
// output is untrusted text: a total_cost_usd of 1e308 or token counts of
// 5e18 are garbage (a bug, a hostile or broken agent), not spend. Read
// as they are, two of them overflow: a cost sum becomes +Inf, which no
// record can be encoded with, and token sums wrap to negative values that
// slip under any token budget.
const (
	// MaxRunTokens bounds each token count of one run (each kind): a
	// trillion tokens, far beyond any context window times any turn count.
	MaxRunTokens int64 = 1 << 40
	// MaxRunUSD bounds the cost of one run.
	MaxRunUSD = 1e6
	// MaxRunSeconds bounds the agent time of one run: a year.
	MaxRunSeconds = 366 * 24 * 3600
	// MaxLedgerUSD and MaxLedgerSeconds are where sums of costs and of agent
	// seconds saturate (token sums saturate at math.MaxInt64).
	MaxLedgerUSD     = 1e12
	MaxLedgerSeconds = 1e12
)

// Bounded returns u with every field in range for one run: negative and
// NaN values count as 0, larger ones as the Max*Run bound.
func (u Usage) Bounded() Usage {
	return Usage{
		InputTokens:         BoundTokens(u.InputTokens),
		OutputTokens:        BoundTokens(u.OutputTokens),
		CacheReadTokens:     BoundTokens(u.CacheReadTokens),
		CacheCreationTokens: BoundTokens(u.CacheCreationTokens),
		CostUSD:             bound(u.CostUSD, MaxRunUSD),
		AgentSeconds:        bound(u.AgentSeconds, MaxRunSeconds),
	}
}

// BoundTokens is one run's count of one kind of token, as believed: n in
// [0, MaxRunTokens].
func BoundTokens(n int64) int64 { return min(max(n, 0), MaxRunTokens) }

// BoundUSD is one run's cost as believed: v in [0, MaxRunUSD], 0 for NaN.
func BoundUSD(v float64) float64 { return bound(v, MaxRunUSD) }

func bound(v, hi float64) float64 {
	if math.IsNaN(v) || v < 0 {
		return 0
	}
	return min(v, hi)
}

// addTokens is a+b, saturating at the int64 bounds instead of wrapping.
func addTokens(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// addAmount is a+b saturating at ±hi; a NaN term counts as 0.
func addAmount(a, b, hi float64) float64 { return clamp(clamp(a, hi)+clamp(b, hi), hi) }

// clamp is v within [-hi, hi], 0 for NaN.
func clamp(v, hi float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return min(max(v, -hi), hi)
}
