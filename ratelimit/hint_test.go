package ratelimit

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestParseHint(t *testing.T) {
	t.Parallel()
	berlin := mustZone(t, "Europe/Berlin")
	recife := mustZone(t, "America/Recife")
	tokyo := mustZone(t, "Asia/Tokyo")
	newYork := mustZone(t, "America/New_York")

	// 2026-04-20 12:00 UTC = 14:00 in Berlin (CEST), 09:00 in Recife, 21:00 in Tokyo.
	now := time.Date(2026, 4, 20, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		output string
		now    time.Time
		want   time.Time // zero: no hint
	}{
		// retry-after: N seconds
		{"retry-after", "HTTP 429\nretry-after: 30\n", now, now.Add(30 * time.Second)},
		{"Retry-After header", "Retry-After: 120", now, now.Add(120 * time.Second)},
		{"upper case, no space", "RETRY-AFTER:7", now, now.Add(7 * time.Second)},
		{"json field", `{"error":"rate_limited","retry_after": 12}`, now, now.Add(12 * time.Second)},
		{"fractional seconds", "retry-after: 1.5", now, now.Add(1500 * time.Millisecond)},
		{"http date", "Retry-After: Mon, 20 Apr 2026 12:05:00 GMT", now, now.Add(5 * time.Minute)},

		// Retrying in N seconds
		{"retrying in seconds", "API Error (429). Retrying in 5 seconds… (attempt 1/10)", now, now.Add(5 * time.Second)},
		{"retrying in 1 second", "Retrying in 1 second", now, now.Add(time.Second)},
		{"retrying in second(s)", "Retrying in 2 second(s)...", now, now.Add(2 * time.Second)},
		{"retrying in Ns", "rate limited; retrying in 30s", now, now.Add(30 * time.Second)},
		{"retrying in ms", "Retrying in 500ms", now, now.Add(500 * time.Millisecond)},
		{"retrying in minutes", "Retrying in 2 minutes", now, now.Add(2 * time.Minute)},
		{"try again compound", "Rate limit reached. Please try again in 1m30s.", now, now.Add(90 * time.Second)},
		{"resets in hours", "limit resets in 3 hours", now, now.Add(3 * time.Hour)},

		// usage limit reached|<epoch>
		{"epoch seconds", "Claude AI usage limit reached|1776700800", now, time.Unix(1776700800, 0)},
		{"epoch milliseconds", "Claude AI usage limit reached|1776700800000", now, time.Unix(1776700800, 0)},
		{"epoch already past", "usage limit reached|1776682800", now, time.Unix(1776682800, 0)},

		// Clock times in a zone: the next occurrence at or after now.
		{"resets 5pm Berlin", "You've hit your limit · resets 5pm (Europe/Berlin)", now,
			time.Date(2026, 4, 20, 17, 0, 0, 0, berlin)},
		{"resets 5pm Berlin, rolls over to tomorrow", "resets 5pm (Europe/Berlin)",
			time.Date(2026, 4, 20, 18, 30, 0, 0, berlin), time.Date(2026, 4, 21, 17, 0, 0, 0, berlin)},
		{"resets 5pm Berlin, rollover across month end", "resets 5pm (Europe/Berlin)",
			time.Date(2026, 4, 30, 23, 0, 0, 0, berlin), time.Date(2026, 5, 1, 17, 0, 0, 0, berlin)},
		{"resets exactly now", "resets 5pm (Europe/Berlin)",
			time.Date(2026, 4, 20, 17, 0, 0, 0, berlin), time.Date(2026, 4, 20, 17, 0, 0, 0, berlin)},
		{"just past is the reset that happened", "resets 5pm (Europe/Berlin)",
			time.Date(2026, 4, 20, 17, 2, 0, 0, berlin), time.Date(2026, 4, 20, 17, 0, 0, 0, berlin)},
		{"will reset at 7pm Tokyo", "Claude usage limit reached. Your limit will reset at 7pm (Asia/Tokyo).", now,
			time.Date(2026, 4, 21, 19, 0, 0, 0, tokyo)}, // 21:00 in Tokyo already
		{"will reset at 7pm Tokyo, same day", "Your limit will reset at 7pm (Asia/Tokyo).",
			time.Date(2026, 4, 20, 8, 0, 0, 0, time.UTC), time.Date(2026, 4, 20, 19, 0, 0, 0, tokyo)},
		{"resets 4:30pm", "5-hour limit reached ∙ resets 4:30pm (America/New_York)", now,
			time.Date(2026, 4, 20, 16, 30, 0, 0, newYork)},
		{"12am is midnight", "resets 12am (Europe/Berlin)", now, time.Date(2026, 4, 21, 0, 0, 0, 0, berlin)},
		{"12pm is noon", "resets 12pm (Asia/Tokyo)", now, time.Date(2026, 4, 21, 12, 0, 0, 0, tokyo)},
		{"p.m. spelled out", "resets 5 p.m. (Europe/Berlin)", now, time.Date(2026, 4, 20, 17, 0, 0, 0, berlin)},
		{"24-hour clock", "limit resets 17:00 (Europe/Berlin)", now, time.Date(2026, 4, 20, 17, 0, 0, 0, berlin)},
		{"bare UTC", "resets 5pm UTC", now, time.Date(2026, 4, 20, 17, 0, 0, 0, time.UTC)},
		{"no zone: now's location", "5-hour limit reached ∙ resets 3pm",
			time.Date(2026, 4, 20, 9, 0, 0, 0, recife), time.Date(2026, 4, 20, 15, 0, 0, 0, recife)},

		// Daylight saving time: wall clock, not 24 hours.
		{"DST spring forward: tomorrow 7pm is 23h away", "resets 7pm (America/New_York)",
			time.Date(2026, 3, 7, 20, 0, 0, 0, newYork),   // EST, the day before the switch
			time.Date(2026, 3, 8, 23, 0, 0, 0, time.UTC)}, // 19:00 EDT
		{"DST fall back: tomorrow 7pm is 25h away", "resets 7pm (Europe/Berlin)",
			time.Date(2026, 10, 24, 20, 0, 0, 0, berlin),    // CEST, the day before the switch
			time.Date(2026, 10, 25, 18, 0, 0, 0, time.UTC)}, // 19:00 CET
		{"DST zone seen from UTC", "resets 5pm (Europe/Berlin)",
			time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 15, 16, 0, 0, 0, time.UTC)},

		// Month-day forms: this year, or next year when already past.
		{"resets Apr 23 at 4pm Recife", "Weekly limit reached ∙ resets Apr 23 at 4pm (America/Recife)", now,
			time.Date(2026, 4, 23, 16, 0, 0, 0, recife)},
		{"month day already past: next year", "resets Apr 23 at 4pm (America/Recife)",
			time.Date(2026, 4, 24, 12, 0, 0, 0, time.UTC), time.Date(2027, 4, 23, 16, 0, 0, 0, recife)},
		{"year rollover", "resets Jan 2 at 9am (Europe/Berlin)",
			time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC), time.Date(2027, 1, 2, 9, 0, 0, 0, berlin)},
		{"full month name and on", "limit resets on October 9th at 10:15am (Europe/Berlin)", now,
			time.Date(2026, 10, 9, 10, 15, 0, 0, berlin)},
		{"month day in the zone, not in UTC", "resets Apr 21 at 1am (Asia/Tokyo)",
			time.Date(2026, 4, 20, 15, 0, 0, 0, time.UTC), // Apr 21 00:00 in Tokyo
			time.Date(2026, 4, 21, 1, 0, 0, 0, tokyo)},

		// The forms of limits.md (issue 11).
		{"codex try again at clock time", "You've hit your usage limit. ... or try again at 3:42 PM.", now,
			time.Date(2026, 4, 20, 15, 42, 0, 0, time.UTC)},
		{"codex try again at, tomorrow", "Try again at 3:42 AM.", now, time.Date(2026, 4, 21, 3, 42, 0, 0, time.UTC)},
		{"codex try again at full date", "You've hit your usage limit. Try again at Jul 5th, 2026 8:19 PM.", now,
			time.Date(2026, 7, 5, 20, 19, 0, 0, time.UTC)},
		{"codex full date, 1st", "Try again at May 1st, 2026 9:05 AM", now, time.Date(2026, 5, 1, 9, 5, 0, 0, time.UTC)},
		{"codex full date already past", "Try again at Jan 2nd, 2026 8:19 PM", now, time.Date(2026, 1, 2, 20, 19, 0, 0, time.UTC)},
		{"codex days hours minutes", "■ You've hit your usage limit. … try again in 5 days 22 hours 11 minutes.", now,
			now.Add(5*24*time.Hour + 22*time.Hour + 11*time.Minute)},
		{"days with commas and and", "resets in 2 days, 3 hours and 4 minutes", now, now.Add(51*time.Hour + 4*time.Minute)},
		{"retrying in ~6 days", "[retrying in ~6 days attempt #1]", now, now.Add(6 * 24 * time.Hour)},
		{"gemini reset after compound", "Your quota will reset after 8h44m7s.", now, now.Add(8*time.Hour + 44*time.Minute + 7*time.Second)},
		{"gemini retrying after ms", "Your quota will reset after 5s.. Retrying after 6173ms...", now, now.Add(6173 * time.Millisecond)},
		{"claude resetsAt field", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1776700800}}`, now, time.Unix(1776700800, 0)},
		{"codex resets_at field", `{"error":{"type":"usage_limit_reached","resets_at":1776700800}}`, now, time.Unix(1776700800, 0)},
		{"codex resets_in_seconds", `{"error":{"type":"usage_limit_reached","resets_in_seconds":600}}`, now, now.Add(10 * time.Minute)},
		{"claude resets 11:25pm (UTC)", "You've hit your session limit · resets 11:25pm (UTC)", now, time.Date(2026, 4, 20, 23, 25, 0, 0, time.UTC)},
		{"claude resets Nov 26, 10:26pm (UTC)", "You've hit your weekly limit · resets Nov 26, 10:26pm (UTC)", now, time.Date(2026, 11, 26, 22, 26, 0, 0, time.UTC)},
		{"claude resets Jul 31, 2am (UTC)", "You've hit your weekly limit · resets Jul 31, 2am (UTC)", now, time.Date(2026, 7, 31, 2, 0, 0, 0, time.UTC)},
		{"claude resets Sep 15 at 7pm", "You've hit your weekly limit · resets Sep 15 at 7pm", now, time.Date(2026, 9, 15, 19, 0, 0, 0, time.UTC)},
		{"limits will reset at 9:30 AM", "Limits will reset at 9:30 AM.", now, time.Date(2026, 4, 21, 9, 30, 0, 0, time.UTC)},
		{"6173ms is not 6173 minutes", "Retrying after 6173ms", now, now.Add(6173 * time.Millisecond)},

		// Several hints: the latest wins.
		{"latest of several", "Retrying in 5 seconds\nretry-after: 60\nRetrying in 10 seconds", now, now.Add(time.Minute)},
		{"clock beats seconds", "retry-after: 30; resets 5pm (Europe/Berlin)", now, time.Date(2026, 4, 20, 17, 0, 0, 0, berlin)},

		// No hint.
		{"empty", "", now, time.Time{}},
		{"plain failure", "FAIL github.com/x/y 0.3s\nexit status 1", now, time.Time{}},
		{"rate limit without a wait", "Error: 429 rate limit exceeded", now, time.Time{}},
		{"reset without a time", "connection reset by peer", now, time.Time{}},
		{"a bare number is not a time", "resets 5 (Europe/Berlin)", now, time.Time{}},
		{"hour out of range", "resets 13pm (Europe/Berlin)", now, time.Time{}},
		{"minute out of range", "resets 4:75pm (Europe/Berlin)", now, time.Time{}},
		{"unknown zone", "resets 5pm (Mars/Olympus_Mons)", now, time.Time{}},
		{"no such day", "resets Apr 31 at 4pm (America/Recife)", now, time.Time{}},
		{"implausibly far", "retry-after: 99999999999", now, time.Time{}},
		{"huge number overflows nothing", "retry-after: 99999999999999999999999999999", now, time.Time{}},
		{"retrying without a unit", "Retrying in 5", now, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseHint(tt.output, tt.now)
			if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
				t.Errorf("ParseHint(%q, %v) = %v, %v; want %v, %v", tt.output, tt.now, got, ok, tt.want, !tt.want.IsZero())
			}
		})
	}
}

func TestParseHintLongOutput(t *testing.T) {
	t.Parallel()
	out := strings.Repeat("ok  github.com/x/y  0.1s\n", 20000) + "usage limit reached|1776700800\n"
	got, ok := ParseHint(out, t0)
	if !ok || !got.Equal(time.Unix(1776700800, 0)) {
		t.Errorf("ParseHint(long output) = %v, %v; want %v, true", got, ok, time.Unix(1776700800, 0))
	}
}

// FuzzParseHint checks that ParseHint never panics, is deterministic, and
// only returns instants within MaxHint of now.
func FuzzParseHint(f *testing.F) {
	for _, s := range []string{
		"retry-after: 30", "Retrying in 5 seconds", "usage limit reached|1776700800",
		"resets 5pm (Europe/Berlin)", "resets Apr 23 at 4pm (America/Recife)",
		"will reset at 7pm (Asia/Tokyo)", "resets 4:30pm", "Retry-After: Mon, 20 Apr 2026 12:05:00 GMT",
	} {
		f.Add(s, t0.Unix())
	}
	f.Fuzz(func(t *testing.T, output string, sec int64) {
		// Keep now within years 1970–2286 so that it means something.
		now := time.Unix(sec%10_000_000_000, 0).UTC()
		if sec < 0 {
			now = time.Unix(-sec%10_000_000_000, 0).UTC()
		}
		got, ok := ParseHint(output, now)
		again, okAgain := ParseHint(output, now)
		if ok != okAgain || !got.Equal(again) {
			t.Fatalf("ParseHint(%q) not deterministic: %v,%v then %v,%v", output, got, ok, again, okAgain)
		}
		if !ok {
			if !got.IsZero() {
				t.Fatalf("ParseHint(%q) = %v, false: want the zero time", output, got)
			}
			return
		}
		if d := got.Sub(now); d > MaxHint || d < -MaxHint {
			t.Fatalf("ParseHint(%q, %v) = %v: %v from now, beyond MaxHint", output, now, got, d)
		}
	})
}

// TestDefaultPattern: every limit message of limits.md matches, ordinary
// prose about rate limiting and transient provider errors do not.
func TestDefaultPattern(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(DefaultPattern)
	limits := []string{
		"API Error: Request rejected (429) · This request would exceed the rate limit for your organization (fake-org) of 50 requests per minute.",
		"API Error: Request rejected (429) · Claude AI usage limit reached|1795472573",
		"API Error: Server is temporarily limiting requests (not your usage limit) · Claude AI usage limit reached|1795473377",
		"You've hit your session limit · resets 11:25pm (UTC)",
		"You've hit your weekly limit · resets Nov 26, 10:26pm (UTC)",
		"You've hit your Opus limit · resets 10:26pm (UTC)",
		"You've hit your Sonnet limit · resets 12:26am (UTC)",
		"You've hit your limit · resets 5pm (Europe/Vilnius)",
		"Claude AI usage limit reached|1755615600",
		"Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
		"5-hour limit reached ∙ resets 5am",
		"You’ve hit your limit for Claude messages. Limits will reset at 9:30 AM.",
		"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:42 PM.",
		"You've hit your usage limit. Try again at Jul 5th, 2026 8:19 PM.",
		"You've hit your usage limit. Try again later.",
		"■ You've hit your usage limit. … try again in 5 days 22 hours 11 minutes.",
		"stream error: exceeded retry limit, last status: 429 Too Many Requests, request id: 1",
		"Quota exceeded. Check your plan and billing details.",
		`{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"free","resets_at":1775317531,"resets_in_seconds":602705}}`,
		"You have exhausted your capacity on this model. Your quota will reset after 8h44m7s.",
		"Attempt 1 failed: You have exhausted your capacity on this model. Your quota will reset after 5s.. Retrying after 6173ms...",
		"[API Error: You have exhausted your daily quota on this model.]",
		"Usage limit reached for all Pro models.",
		"Free usage exceeded, add credits https://opencode.ai/zen",
		"Too Many Requests",
		"Rate Limited",
		"Error: 429 Too Many Requests, retry-after: 2",
		"Rate limit exceeded. Please wait.",
		"This request would exceed your account's rate limit. Please try again later. [retrying in ~6 days attempt #1]",
		`litellm.RateLimitError: AnthropicException - {"type":"error","error":{"type":"rate_limit_error","message":"x"}}`,
		`API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
	}
	for _, l := range limits {
		if !re.MatchString(l) {
			t.Errorf("DefaultPattern misses %q", l)
		}
	}
	notLimits := []string{
		"Implemented the token-bucket rate limiter (answers HTTP 429 when the bucket is empty).",
		"Added @upstash/ratelimit to the API routes.",
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1778565600,"rateLimitType":"five_hour"}}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1778565600,"rateLimitType":"seven_day"}}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","overageStatus":"rejected","overageDisabledReason":"org_level_disabled_until"}}`,
		"The handler returns 429 Too Many Requests with a Retry-After header.",
		"Rate limited requests are logged at debug level.",
		"Too many requests are now rejected by the limiter.",
		"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
		"API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment.",
		"We're currently experiencing high demand, which may cause temporary errors.",
		"Provider is overloaded",
		"Switching to the gemini-2.5-flash model for the rest of this session.",
		"",
	}
	for _, l := range notLimits {
		if re.MatchString(l) {
			t.Errorf("DefaultPattern matches %q: %q", l, re.FindString(l))
		}
	}
}
