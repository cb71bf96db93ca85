package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/v1"

	"github.com/loopr-dev/loopr/internal/termsafe"
	"github.com/loopr-dev/loopr/loop"
)

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns a tabwriter that aligns columns with two spaces.
func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// age formats a duration compactly: 45s, 5m, 1h4m, 2d3h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	default:
		days, h := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour)
		if h == 0 {
			return fmt.Sprintf("%dd", days)
		}
		return fmt.Sprintf("%dd%dh", days, h)
	}
}

// lastColumn is the room a table's last column has at width columns
// (0: not a terminal, def) right of rows' other columns (each two spaces
// apart, as table pads them), at least 20.
func lastColumn(rows [][]string, width, def int) int {
	if width <= 0 || len(rows) == 0 {
		return def
	}
	used := 0
	for col := range rows[0] {
		wid := 0
		for _, r := range rows {
			wid = max(wid, utf8.RuneCountInString(r[col]))
		}
		used += wid + 2
	}
	return max(width-used, 20)
}

// oneLine squeezes s to a single line of at most n runes for table cells,
// with the characters a terminal would act on escaped (agents write titles).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = strings.TrimRight(string(r[:n-1]), " ") + "…" // "exited…", not "exited …"
	}
	return termsafe.Line(s)
}

// parseTime accepts RFC 3339 (with or without fractional seconds).
func parseTime(flag, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &UsageError{fmt.Errorf("%s: %q is not an RFC 3339 time (e.g. 2026-01-25T12:00:00Z)", flag, v)}
	}
	return t.UTC(), nil
}

// costText reads "$1.23", or "-" for nothing spent.
func costText(u loop.Usage) string {
	if u.CostUSD == 0 {
		if u.Tokens() > 0 {
			return "$0.00"
		}
		return "-"
	}
	return fmt.Sprintf("$%.2f", u.CostUSD)
}

// usageText reads "$1.23, 45.6k tokens (in 1.2k, out 3.4k, cache read 40k,
// cache write 1k), agent 3m20s"; "nothing" for none.
func usageText(u loop.Usage) string {
	if u == (loop.Usage{}) {
		return "nothing"
	}
	agent := (time.Duration(u.AgentSeconds * float64(time.Second))).Round(time.Second)
	if u.Tokens() == 0 { // an agent that reports no usage: no row of zeros
		return fmt.Sprintf("$%.2f, no tokens reported, agent %s", u.CostUSD, agent)
	}
	return fmt.Sprintf("$%.2f, %s tokens (in %s, out %s, cache read %s, cache write %s), agent %s",
		u.CostUSD, tokens(u.Tokens()), tokens(u.InputTokens), tokens(u.OutputTokens), tokens(u.CacheReadTokens),
		tokens(u.CacheCreationTokens), agent)
}

// budgetText reads "$5.00 and 100k tokens", "none".
func budgetText(b loop.Budget) string {
	switch {
	case b.USD > 0 && b.Tokens > 0:
		return fmt.Sprintf("$%.2f and %s tokens", b.USD, tokens(b.Tokens))
	case b.USD > 0:
		return fmt.Sprintf("$%.2f", b.USD)
	case b.Tokens > 0:
		return tokens(b.Tokens) + " tokens"
	}
	return "none"
}

// tokens reads a token count as 950, 12.3k, 4.5M.
func tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
