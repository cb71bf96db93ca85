package preset

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/loopr-dev/loopr/loop"
)

// extremeInts and extremeCosts are the numbers a broken or hostile agent
// may print where its usage goes, as JSON literals.
var (
	extremeInts  = []string{"0", "1", "-1", "1000", "5000000000000000000", strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(math.MinInt64, 10), "1099511627776", "4611686018427387904"}
	extremeCosts = []string{"0", "0.1", "-0.1", "1e308", "-1e308", "1.7976931348623157e308", "5e-324", "1e6", "1e15", "123456789.5"}
)

// extremeRun is one agent run of preset name whose usage fields are
// picked from the extremes (several events for the presets that sum).
func extremeRun(rng *rand.Rand, name string) []byte {
	i := func() string { return extremeInts[rng.IntN(len(extremeInts))] }
	c := func() string { return extremeCosts[rng.IntN(len(extremeCosts))] }
	var ls []string
	switch name {
	case Claude:
		ls = append(ls, fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":%s,"usage":{"input_tokens":%s,"output_tokens":%s,"cache_read_input_tokens":%s,"cache_creation_input_tokens":%s}}`, c(), i(), i(), i(), i()))
	case Codex:
		for range 1 + rng.IntN(4) {
			ls = append(ls, fmt.Sprintf(`{"type":"turn.completed","usage":{"input_tokens":%s,"cached_input_tokens":%s,"cache_write_input_tokens":%s,"output_tokens":%s}}`, i(), i(), i(), i()))
		}
	case Gemini:
		ls = append(ls, fmt.Sprintf(`{"type":"result","status":"success","stats":{"models":{"a":{"tokens":{"prompt":%s,"candidates":%s,"cached":%s,"thoughts":%s}},"b":{"tokens":{"prompt":%s,"candidates":%s,"cached":%s,"thoughts":%s}}}}}`, i(), i(), i(), i(), i(), i(), i(), i()))
	case OpenCode:
		for range 1 + rng.IntN(4) {
			ls = append(ls, fmt.Sprintf(`{"type":"step_finish","part":{"cost":%s,"tokens":{"input":%s,"output":%s,"reasoning":%s,"cache":{"read":%s,"write":%s}}}}`, c(), i(), i(), i(), i(), i()))
		}
	}
	return lines(ls...)
}

// TestUsageExtremes is a property test of the usage parsers and the
// ledger: whatever numbers the agents print, each run's usage is within
// loop's per-run bounds, and the sums of any number of runs (a loop's
// record, a tree, today's total) never wrap, never leave the encodable
// range, and never fall as runs are added, so a spent budget stays spent.
func TestUsageExtremes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(20, 5))
	budget := loop.Budget{USD: 1, Tokens: 1000}
	for _, name := range []string{Claude, Codex, Gemini, OpenCode} {
		var ledger loop.Usage
		spent := false
		for run := range 200 {
			out := extremeRun(rng, name)
			u := Parse(name, out, 0, now, defaultPattern).Usage
			if !within(u) {
				t.Fatalf("%s run %d: usage %+v out of the per-run bounds; output:\n%s", name, run, u, out)
			}
			before := ledger
			ledger = ledger.Add(u)
			if ledger.Tokens() < before.Tokens() || ledger.CostUSD < before.CostUSD || ledger.InputTokens < 0 || ledger.Tokens() < 0 {
				t.Fatalf("%s run %d: the ledger went from %+v to %+v adding %+v", name, run, before, ledger, u)
			}
			if _, err := json.Marshal(ledger); err != nil {
				t.Fatalf("%s run %d: ledger %+v cannot be recorded: %v", name, run, ledger, err)
			}
			if spent && !budget.Spent(ledger) {
				t.Fatalf("%s run %d: budget %+v no longer spent at %+v", name, run, budget, ledger)
			}
			spent = budget.Spent(ledger)
		}
		if ledger.CostUSD > loop.MaxLedgerUSD || math.IsInf(ledger.CostUSD, 0) {
			t.Errorf("%s: ledger cost %v beyond the saturation %v", name, ledger.CostUSD, loop.MaxLedgerUSD)
		}
	}
}

// within reports whether u is one run's usage as loop bounds it.
func within(u loop.Usage) bool {
	for _, n := range []int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens} {
		if n < 0 || n > loop.MaxRunTokens {
			return false
		}
	}
	return u.CostUSD >= 0 && u.CostUSD <= loop.MaxRunUSD && !math.IsNaN(u.CostUSD)
}

// TestUsageSaturates: sums at the edges of int64 and float64 saturate
// instead of wrapping or becoming +Inf, including records written before
// the bounds (a stored 1e308 or a wrapped negative count).
func TestUsageSaturates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b loop.Usage
		want loop.Usage
	}{
		{"tokens at int64 max", loop.Usage{InputTokens: math.MaxInt64 - 1}, loop.Usage{InputTokens: 5e18}, loop.Usage{InputTokens: math.MaxInt64}},
		{"a stored 1e308", loop.Usage{CostUSD: 1e308}, loop.Usage{CostUSD: 1e308}, loop.Usage{CostUSD: loop.MaxLedgerUSD}},
		{"+Inf and NaN", loop.Usage{CostUSD: math.Inf(1), AgentSeconds: math.NaN()}, loop.Usage{CostUSD: 1, AgentSeconds: 2}, loop.Usage{CostUSD: loop.MaxLedgerUSD, AgentSeconds: 2}},
		{"wrapped negatives", loop.Usage{OutputTokens: math.MinInt64 + 1}, loop.Usage{OutputTokens: -5e18}, loop.Usage{OutputTokens: math.MinInt64}},
		{"ordinary", loop.Usage{InputTokens: 1, CostUSD: 0.25}, loop.Usage{InputTokens: 2, CostUSD: 0.5}, loop.Usage{InputTokens: 3, CostUSD: 0.75}},
	}
	for _, tt := range tests {
		if got := tt.a.Add(tt.b); got != tt.want {
			t.Errorf("%s: Add() = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	full := loop.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, CacheReadTokens: 1, CacheCreationTokens: 1}
	if got := full.Tokens(); got != math.MaxInt64 {
		t.Errorf("Tokens() = %d, want it saturated at %d", got, int64(math.MaxInt64))
	}
	if got := (loop.Usage{CostUSD: 1e308, InputTokens: -3, AgentSeconds: math.Inf(1)}).Bounded(); got != (loop.Usage{CostUSD: loop.MaxRunUSD, AgentSeconds: loop.MaxRunSeconds}) {
		t.Errorf("Bounded() = %+v", got)
	}
}
