package preset

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

var defaultPattern = regexp.MustCompile(ratelimit.DefaultPattern)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// now is 2026-11-23 20:00 UTC: the epochs in limits.md's samples
// (1795472573 = 22:22:53 UTC that day) lie ahead of it.
var now = time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)

// verdict is what a test expects of a Report.
type verdict int

const (
	none verdict = iota
	limit
	transient
	spend
)

func (v verdict) String() string {
	if v < 0 {
		return "contradictory"
	}
	return [...]string{"none", "limit", "transient", "spend"}[v]
}

func verdictOf(r Report) verdict {
	switch {
	case r.Limited && r.Transient, r.SpendCap && (r.Limited || r.Transient):
		return -1
	case r.SpendCap:
		return spend
	case r.Limited:
		return limit
	case r.Transient:
		return transient
	}
	return none
}

// TestParseTextLimits feeds every line of limits.md, verbatim, as the last
// output of a run that exited 1 with the command preset (text only): each
// limit is recognized with its reset, each overload is transient.
func TestParseTextLimits(t *testing.T) {
	t.Parallel()
	berlin, vilnius, warsaw := zone(t, "Europe/Berlin"), zone(t, "Europe/Vilnius"), zone(t, "Europe/Warsaw")
	utc := time.UTC
	tests := []struct {
		out   string
		want  verdict
		reset time.Time // zero: none announced (or already past)
	}{
		// Claude Code, text mode.
		{"API Error: Request rejected (429) · This request would exceed the rate limit for your organization (fake-org) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.", limit, time.Time{}},
		{"API Error: Request rejected (429) · Claude AI usage limit reached|1795472573", limit, time.Unix(1795472573, 0)},
		{"API Error: Server is temporarily limiting requests (not your usage limit) · Claude AI usage limit reached|1795473377", limit, time.Unix(1795473377, 0)},
		{"You've hit your session limit · resets 11:25pm (UTC)\n/login to switch to an API usage-billed account.", limit, time.Date(2026, 11, 23, 23, 25, 0, 0, utc)},
		{"You've hit your session limit · resets 5:40pm (Europe/Berlin)", limit, time.Date(2026, 11, 24, 17, 40, 0, 0, berlin)},
		{"You've hit your weekly limit · resets Nov 26, 10:26pm (UTC)\n/upgrade to increase your usage limit.", limit, time.Date(2026, 11, 26, 22, 26, 0, 0, utc)},
		// Months ahead of now: beyond ratelimit.Horizon (7 days), not believed.
		{"You've hit your weekly limit · resets Jul 31, 2am (UTC)", limit, time.Time{}},
		{"You've hit your weekly limit · resets Sep 15 at 7pm", limit, time.Time{}},
		{"You've hit your Opus limit · resets 10:26pm (UTC)", limit, time.Date(2026, 11, 23, 22, 26, 0, 0, utc)},
		{"You've hit your Sonnet limit · resets 12:26am (UTC)", limit, time.Date(2026, 11, 24, 0, 26, 0, 0, utc)},
		{"You've hit your limit · resets 5pm (Europe/Vilnius)", limit, time.Date(2026, 11, 24, 17, 0, 0, 0, vilnius)},
		{"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18081).", transient, time.Time{}},
		{"API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:18084).", transient, time.Time{}},
		{`API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, transient, time.Time{}},
		{"API Error: Repeated 529 Overloaded errors", transient, time.Time{}},
		// Older Claude forms. 1755615600 (2025) is long past: not trusted.
		{"Claude AI usage limit reached|1755615600", limit, time.Time{}},
		{"Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).", limit, time.Date(2026, 11, 24, 17, 0, 0, 0, warsaw)},
		{"5-hour limit reached ∙ resets 5am", limit, time.Date(2026, 11, 24, 5, 0, 0, 0, utc)},
		{"You’ve hit your limit for Claude messages. Limits will reset at 9:30 AM.", limit, time.Date(2026, 11, 24, 9, 30, 0, 0, utc)},

		// Codex CLI.
		{"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing), visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:42 PM.", limit, time.Date(2026, 11, 24, 15, 42, 0, 0, utc)},
		{"You've hit your usage limit. Try again at Jul 5th, 2027 8:19 PM.", limit, time.Time{}}, // beyond the horizon
		{"You've hit your usage limit. Try again at Nov 29th, 2026 8:19 PM.", limit, time.Date(2026, 11, 29, 20, 19, 0, 0, utc)},
		{"You've hit your usage limit. Try again later.", limit, time.Time{}},
		{"■ You've hit your usage limit. … try again in 5 days 22 hours 11 minutes.", limit, now.Add(5*24*time.Hour + 22*time.Hour + 11*time.Minute)},
		{"ERROR: stream error: exceeded retry limit, last status: 429 Too Many Requests, request id: 8f1c", limit, time.Time{}},
		{"Quota exceeded. Check your plan and billing details.", limit, time.Time{}},
		{"We're currently experiencing high demand, which may cause temporary errors.", transient, time.Time{}},
		{`ERROR: {"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"free","resets_at":1795500000,"resets_in_seconds":36000}}`, limit, time.Unix(1795500000, 0).Add(0)},

		// Gemini CLI.
		{"You have exhausted your capacity on this model. Your quota will reset after 8h44m7s.", limit, now.Add(8*time.Hour + 44*time.Minute + 7*time.Second)},
		{"Attempt 1 failed: You have exhausted your capacity on this model. Your quota will reset after 5s.. Retrying after 6173ms...", limit, now.Add(6173 * time.Millisecond)},
		{"[API Error: You have exhausted your daily quota on this model.]", limit, time.Time{}},
		{"Usage limit reached for all Pro models.\nAccess resets at {time}.", limit, time.Time{}},
		{"We are currently experiencing high demand for this model. Please try again later.", transient, time.Time{}},
		{"No capacity available for model gemini-3-flash-preview on the server", transient, time.Time{}},

		// opencode, aider.
		{"Free usage exceeded, add credits https://opencode.ai/zen", limit, time.Time{}},
		{"Provider is overloaded", transient, time.Time{}},
		{"Too Many Requests", limit, time.Time{}},
		{"Rate Limited", limit, time.Time{}},
		{"This request would exceed your account's rate limit. Please try again later. [retrying in ~6 days attempt #1]", limit, now.Add(6 * 24 * time.Hour)},
		{`litellm.RateLimitError: AnthropicException - {"type":"error","error":{"type":"rate_limit_error","message":"x"}}` + "\nRetry in 0.7 seconds.", limit, now.Add(700 * time.Millisecond)},
	}
	for _, tt := range tests {
		t.Run(firstLine(tt.out), func(t *testing.T) {
			t.Parallel()
			out := "Working on the task...\n" + tt.out + "\n"
			r := Parse(Command, []byte(out), 1, now, defaultPattern)
			if got := verdictOf(r); got != tt.want {
				t.Fatalf("Parse() = %v (%+v), want %v", got, r, tt.want)
			}
			if !r.ResetAt.Equal(tt.reset) {
				t.Errorf("ResetAt = %v, want %v", r.ResetAt, tt.reset)
			}
			if !tt.reset.IsZero() && r.RetryAfter != tt.reset.Sub(now) {
				t.Errorf("RetryAfter = %v, want %v", r.RetryAfter, tt.reset.Sub(now))
			}
			if r.Detail == "" || strings.Contains(r.Detail, "\n") {
				t.Errorf("Detail = %q, want one non-empty line", r.Detail)
			}
		})
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return clip(s, 60)
}

// TestParseNeverALimit: ordinary output is never a limit, whether the run
// passed or failed.
func TestParseNeverALimit(t *testing.T) {
	t.Parallel()
	prose := []string{
		"Implemented the token-bucket rate limiter (answers HTTP 429 when the bucket is empty).",
		"Added @upstash/ratelimit to the API routes.",
		"The middleware returns 429 Too Many Requests with a Retry-After header once a client exceeds its quota.",
		"Rate limiting: each key gets 100 requests per minute; the usage limit is configurable.",
		"TestRateLimiter/limit_reached: got 429, want 200",
		"Switching to the gemini-2.5-flash model for the rest of this session.",
		"All tests pass. The quota checker now warns users before they hit the limit.",
	}
	for _, p := range prose {
		for _, exit := range []int{0, 1} {
			for _, name := range Names {
				r := Parse(name, []byte("Done.\n"+p+"\n"), exit, now, defaultPattern)
				if r.Limited {
					t.Errorf("Parse(%s, exit %d, %q) = limited (%s), want not", name, exit, p, r.Detail)
				}
			}
		}
	}
}

// TestExitZeroLastLines: on exit 0 only a usage-limit line among the last
// three counts; the same line further up, or prose matching the pattern,
// does not.
func TestExitZeroLastLines(t *testing.T) {
	t.Parallel()
	loose := regexp.MustCompile(`(?i)\b429\b|rate.?limit|usage limit|hit your limit|quota exceeded`) // loopr's old default
	tests := []struct {
		name string
		out  string
		re   *regexp.Regexp
		want bool
	}{
		{"old epoch form last", "working\nClaude AI usage limit reached|1795472573\n", defaultPattern, true},
		{"subscriber line then hint", "You've hit your session limit · resets 11:25pm (UTC)\n/upgrade to increase your usage limit.\n", defaultPattern, true},
		{"epoch form too far up", "Claude AI usage limit reached|1795472573\na\nb\nc\n", defaultPattern, false},
		{"prose with the old loose pattern", "implemented the token-bucket rate limiter (answers HTTP 429)\n", loose, false},
		{"prose about usage limits with the old pattern", "Explained that users hit your limit page after 5 calls.\n", loose, false},
		{"nil pattern", "Claude AI usage limit reached|1795472573\n", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Parse(Command, []byte(tt.out), 0, now, tt.re).Limited; got != tt.want {
				t.Errorf("Parse(exit 0) limited = %v, want %v", got, tt.want)
			}
		})
	}
}

// Claude Code stream-json, as 2.1.197 prints it.
const (
	claudeInit    = `{"type":"system","subtype":"init","cwd":"/w","session_id":"s","tools":["Bash","Write"],"model":"claude-sonnet-4-5"}`
	claudeAllowed = `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1795472573,"rateLimitType":"five_hour","overageStatus":"rejected","overageDisabledReason":"org_level_disabled_until","isUsingOverage":false}}`
	claudeWarning = `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1795472573,"rateLimitType":"seven_day"}}`
	claudeReject  = `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795472573,"rateLimitType":"five_hour","overageStatus":"rejected","overageDisabledReason":"org_level_disabled_until","isUsingOverage":false}}`
	claudeText    = `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Implemented the token-bucket rate limiter (answers HTTP 429). You've hit your limit handling is tested."}]}}`
	claudeOK      = `{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":2210,"num_turns":3,"result":"Implemented the token-bucket rate limiter (answers HTTP 429 when the bucket is empty).","session_id":"cab2aa88","total_cost_usd":0.00853,"usage":{"input_tokens":1666,"cache_creation_input_tokens":120,"cache_read_input_tokens":4000,"output_tokens":8,"server_tool_use":{"web_search_requests":0}},"modelUsage":{"claude-opus-4-8[1m]":{"inputTokens":1666,"outputTokens":8,"costUSD":0.00853}}}`
	claudeSession = `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":340,"num_turns":1,"result":"You've hit your session limit · resets 11:36pm (UTC)","session_id":"008724f8","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`
	claudeAPI429  = `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":340,"num_turns":1,"result":"API Error: Request rejected (429) · This request would exceed the rate limit for your organization (fake-org) of 50 requests per minute.","session_id":"s","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}`
	claude529     = `{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"num_turns":1,"result":"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.","session_id":"s","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":0}}`
	claude500Null = `{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"num_turns":1,"result":"API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment.","session_id":"s"}`
	claudeFailed  = `{"type":"result","subtype":"error_max_turns","is_error":true,"api_error_status":null,"num_turns":30,"result":"","session_id":"s","total_cost_usd":0.5,"usage":{"input_tokens":100,"output_tokens":50}}`
)

// checkReport asserts what Parse returned: its verdict, IsError, reset
// and usage.
func checkReport(t *testing.T, r Report, want verdict, isError bool, reset time.Time, usage loop.Usage) {
	t.Helper()
	if got := verdictOf(r); got != want {
		t.Fatalf("Parse() = %v (%+v), want %v", got, r, want)
	}
	if r.IsError != isError {
		t.Errorf("IsError = %v, want %v", r.IsError, isError)
	}
	if !r.ResetAt.Equal(reset) {
		t.Errorf("ResetAt = %v, want %v", r.ResetAt, reset)
	}
	if diff := cmp.Diff(usage, r.Usage); diff != "" {
		t.Errorf("Usage mismatch (-want +got):\n%s", diff)
	}
	if want != none && (r.Detail == "" || strings.Contains(r.Detail, "\n")) {
		t.Errorf("Detail = %q, want one non-empty line", r.Detail)
	}
}

func lines(l ...string) []byte { return []byte(strings.Join(l, "\n") + "\n") }

func TestParseClaude(t *testing.T) {
	t.Parallel()
	okUsage := loop.Usage{InputTokens: 1666, OutputTokens: 8, CacheReadTokens: 4000, CacheCreationTokens: 120, CostUSD: 0.00853}
	tests := []struct {
		name    string
		out     []byte
		exit    int
		want    verdict
		isError bool
		reset   time.Time
		usage   loop.Usage
	}{
		{"passing run with allowed events and rate-limit prose", lines(claudeInit, claudeAllowed, claudeWarning, claudeText, claudeOK), 0, none, false, time.Time{}, okUsage},
		{"json output format: the result alone", lines(claudeOK), 0, none, false, time.Time{}, okUsage},
		{"subscriber session limit", lines(claudeInit, claudeAllowed, claudeSession), 1, limit, true, time.Date(2026, 11, 23, 23, 36, 0, 0, time.UTC), loop.Usage{}},
		{"rejected event gives the reset", lines(claudeInit, claudeReject, claudeSession), 1, limit, true, time.Unix(1795472573, 0), loop.Usage{}},
		{"api key 429", lines(claudeInit, claudeAllowed, claudeAPI429), 1, limit, true, time.Time{}, loop.Usage{}},
		{"529 overloaded", lines(claudeInit, claude529), 1, transient, true, time.Time{}, loop.Usage{InputTokens: 10, CostUSD: 0.001}},
		{"500 with a null status", lines(claudeInit, claude500Null), 1, transient, true, time.Time{}, loop.Usage{}},
		{"ordinary failure", lines(claudeInit, claudeFailed), 1, none, true, time.Time{}, loop.Usage{InputTokens: 100, OutputTokens: 50, CostUSD: 0.5}},
		{"rejected event, killed before the result", lines(claudeInit, claudeReject), 143, limit, false, time.Unix(1795472573, 0), loop.Usage{}},
		// resetsAt in milliseconds is read as such, not as the year 58865;
		// one in the year 5138 is not believed (the next start probes).
		{"rejected event, resetsAt in milliseconds", lines(claudeInit, strings.Replace(claudeReject, "1795472573", "1795472573000", 1), claudeSession), 1, limit, true, time.Unix(1795472573, 0), loop.Usage{}},
		{"rejected event, resetsAt 99999999999", lines(claudeInit, strings.Replace(claudeReject, "1795472573", "99999999999", 1), claudeSession), 1, limit, true, time.Time{}, loop.Usage{}},
		{"killed while retrying a 429", lines(claudeInit, `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":30000,"error_status":429,"error":"rate_limit","session_id":"s"}`), -1, limit, false, time.Time{}, loop.Usage{}},
		{"killed while retrying a 529", lines(claudeInit, `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":529,"error":"overloaded","session_id":"s"}`), -1, transient, false, time.Time{}, loop.Usage{}},
		{"text output after all (command replaced)", []byte("You've hit your session limit · resets 11:25pm (UTC)\n"), 1, limit, false, time.Date(2026, 11, 23, 23, 25, 0, 0, time.UTC), loop.Usage{}},
		{"exit 0 but the result says error", lines(claudeInit, claudeSession), 0, limit, true, time.Date(2026, 11, 23, 23, 36, 0, 0, time.UTC), loop.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkReport(t, Parse(Claude, tt.out, tt.exit, now, defaultPattern), tt.want, tt.isError, tt.reset, tt.usage)
		})
	}
}

func TestParseCodex(t *testing.T) {
	t.Parallel()
	ok := lines(`{"type":"thread.started","thread_id":"0199a213"}`, `{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Implemented the rate limiter; it answers 429 Too Many Requests."}}`,
		`{"type":"turn.completed","usage":{"input_tokens":2946,"cached_input_tokens":1000,"cache_write_input_tokens":5,"output_tokens":7,"reasoning_output_tokens":2}}`)
	limited := lines(`{"type":"thread.started","thread_id":"0199a213"}`, `{"type":"turn.started"}`,
		`{"type":"error","message":"You've hit your usage limit. Try again at Jul 5th, 2027 8:19 PM."}`,
		`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Try again at Jul 5th, 2027 8:19 PM."}}`)
	retry := lines(`{"type":"turn.started"}`, `{"type":"error","message":"stream error: exceeded retry limit, last status: 429 Too Many Requests, request id: 1"}`,
		`{"type":"turn.failed","error":{"message":"stream error: exceeded retry limit, last status: 429 Too Many Requests, request id: 1"}}`)
	// Codex 0.169.0 against a fake Responses API: a plan's usage limit
	// (note the ’), an API key's 429 with retries off, a 500.
	plan := lines(`{"type":"thread.started","thread_id":"01a21205-f1fa-7101-8749-b9ecb9f17b65"}`, `{"type":"turn.started"}`,
		`{"type":"error","message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 11:25 PM."}`,
		`{"type":"turn.failed","error":{"message":"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 11:25 PM."}}`)
	if r := Parse(Codex, plan, 1, now, defaultPattern); !r.Limited || !r.ResetAt.Equal(time.Date(2026, 11, 23, 23, 25, 0, 0, time.UTC)) {
		t.Errorf("codex 0.169 usage limit: %+v", r)
	}
	rpm := lines(`{"type":"turn.started"}`, `{"type":"error","message":"exceeded retry limit, last status: 429 Too Many Requests"}`,
		`{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}`)
	if r := Parse(Codex, rpm, 1, now, defaultPattern); !r.Limited {
		t.Errorf("codex 0.169 429: %+v", r)
	}
	demand := lines(`{"type":"turn.started"}`, `{"type":"error","message":"We’re currently experiencing high demand, which may cause temporary errors."}`,
		`{"type":"turn.failed","error":{"message":"We’re currently experiencing high demand, which may cause temporary errors."}}`)
	if r := Parse(Codex, demand, 1, now, defaultPattern); !r.Transient || r.Limited {
		t.Errorf("codex 0.169 500: %+v", r)
	}
	// Reconnect notices of a run that then completed are not failures.
	reconnect := lines(`{"type":"turn.started"}`, `{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion: failed to lookup address information: Try again)"}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":1}}`)
	if r := Parse(Codex, reconnect, 0, now, defaultPattern); verdictOf(r) != none || r.IsError {
		t.Errorf("codex reconnect then success: %+v", r)
	}
	overloaded := lines(`{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"We're currently experiencing high demand, which may cause temporary errors."}}`)
	other := lines(`{"type":"turn.started"}`, `{"type":"turn.failed","error":{"message":"sandbox denied the command"}}`)

	if r := Parse(Codex, ok, 0, now, defaultPattern); verdictOf(r) != none || r.IsError ||
		r.Usage != (loop.Usage{InputTokens: 1946, CacheReadTokens: 1000, CacheCreationTokens: 5, OutputTokens: 7}) {
		t.Errorf("passing run: %+v", r)
	}
	// Seven months ahead: beyond ratelimit.Horizon, not believed.
	if r := Parse(Codex, limited, 1, now, defaultPattern); !r.Limited || !r.ResetAt.IsZero() || !strings.Contains(r.Detail, "2027-07-05T20:19:00Z more than 7 days away, not believed") {
		t.Errorf("usage limit: %+v", r)
	}
	if r := Parse(Codex, retry, 1, now, defaultPattern); !r.Limited || !r.ResetAt.IsZero() {
		t.Errorf("exceeded retry limit: %+v", r)
	}
	if r := Parse(Codex, overloaded, 1, now, defaultPattern); !r.Transient || r.Limited {
		t.Errorf("high demand: %+v", r)
	}
	if r := Parse(Codex, other, 1, now, defaultPattern); verdictOf(r) != none || !r.IsError {
		t.Errorf("other failure: %+v", r)
	}
}

func TestParseGemini(t *testing.T) {
	t.Parallel()
	okJSON := []byte(`{"session_id":"x","response":"Added a rate limiter returning 429.","stats":{"models":{"gemini-2.5-pro":{"api":{"totalRequests":2},"tokens":{"prompt":5000,"candidates":300,"total":5400,"cached":1000,"thoughts":100,"tool":0}}}}}`)
	if r := Parse(Gemini, okJSON, 0, now, defaultPattern); verdictOf(r) != none ||
		r.Usage != (loop.Usage{InputTokens: 4000, CacheReadTokens: 1000, OutputTokens: 400}) {
		t.Errorf("json passing run: %+v", r)
	}
	okStream := lines(`{"type":"init","timestamp":"t","session_id":"x","model":"gemini-2.5-pro"}`,
		`{"type":"message","role":"assistant","content":"done","delta":true}`,
		`{"type":"result","timestamp":"t","status":"success","stats":{"total_tokens":350,"input_tokens":300,"output_tokens":50,"cached":100,"duration_ms":1200,"tool_calls":1}}`)
	if r := Parse(Gemini, okStream, 0, now, defaultPattern); verdictOf(r) != none ||
		r.Usage != (loop.Usage{InputTokens: 200, CacheReadTokens: 100, OutputTokens: 50}) {
		t.Errorf("stream passing run: %+v", r)
	}
	quota := []byte(`{"error":{"type":"Error","message":"You have exhausted your capacity on this model. Your quota will reset after 8h44m7s.","code":429}}`)
	if r := Parse(Gemini, quota, 1, now, defaultPattern); !r.Limited || !r.ResetAt.Equal(now.Add(8*time.Hour+44*time.Minute+7*time.Second)) {
		t.Errorf("quota: %+v", r)
	}
	streamErr := lines(`{"type":"init","session_id":"x"}`, `{"type":"error","severity":"error","message":"[API Error: You have exhausted your daily quota on this model.]"}`,
		`{"type":"result","status":"error","error":{"type":"FatalTurnError","message":"[API Error: You have exhausted your daily quota on this model.]"}}`)
	if r := Parse(Gemini, streamErr, 1, now, defaultPattern); !r.Limited {
		t.Errorf("stream quota: %+v", r)
	}
}

func TestParseOpenCode(t *testing.T) {
	t.Parallel()
	ok := lines(`{"type":"step_start","timestamp":1,"sessionID":"ses_1","part":{"type":"step-start"}}`,
		`{"type":"text","timestamp":2,"sessionID":"ses_1","part":{"type":"text","text":"Rate Limited"}}`,
		`{"type":"step_finish","timestamp":3,"sessionID":"ses_1","part":{"type":"step-finish","reason":"tool-calls","cost":0.01,"tokens":{"input":100,"output":20,"reasoning":5,"cache":{"read":300,"write":40}}}}`,
		`{"type":"step_finish","timestamp":4,"sessionID":"ses_1","part":{"type":"step-finish","reason":"stop","cost":0.02,"tokens":{"input":10,"output":2,"reasoning":0,"cache":{"read":0,"write":0}}}}`)
	r := Parse(OpenCode, ok, 0, now, defaultPattern)
	if verdictOf(r) != none || r.Usage.InputTokens != 110 || r.Usage.OutputTokens != 27 || r.Usage.CacheReadTokens != 300 ||
		r.Usage.CacheCreationTokens != 40 || r.Usage.CostUSD < 0.0299 || r.Usage.CostUSD > 0.0301 {
		t.Errorf("passing run: %+v", r)
	}
	limited := lines(`{"type":"error","timestamp":1,"sessionID":"ses_1","error":{"name":"APIError","data":{"message":"Too Many Requests","statusCode":429,"isRetryable":true}}}`)
	if r := Parse(OpenCode, limited, 1, now, defaultPattern); !r.Limited {
		t.Errorf("429: %+v", r)
	}
	free := lines(`{"type":"error","timestamp":1,"sessionID":"ses_1","error":{"name":"UnknownError","data":{"message":"Free usage exceeded, add credits https://opencode.ai/zen"}}}`)
	if r := Parse(OpenCode, free, 1, now, defaultPattern); !r.Limited {
		t.Errorf("free usage: %+v", r)
	}
	over := lines(`{"type":"error","timestamp":1,"sessionID":"ses_1","error":{"name":"APIError","data":{"message":"Provider is overloaded","statusCode":529}}}`)
	if r := Parse(OpenCode, over, 1, now, defaultPattern); !r.Transient {
		t.Errorf("overloaded: %+v", r)
	}
}

// TestStaleReset: a reset already past when read is not trusted.
func TestStaleReset(t *testing.T) {
	t.Parallel()
	later := time.Unix(1795472573, 0).Add(time.Hour)
	r := Parse(Claude, lines(claudeInit, claudeReject, claudeSession), 1, later, defaultPattern)
	if !r.Limited || !r.ResetAt.IsZero() || r.RetryAfter != 0 || !strings.Contains(r.Detail, "already past") {
		t.Errorf("stale reset: %+v", r)
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	for _, n := range Names {
		p, ok := Get(n)
		if !ok || p.Name != n {
			t.Fatalf("Get(%q) = %+v, %v", n, p, ok)
		}
		if n != Command && len(p.Command) == 0 {
			t.Errorf("Get(%q): no default command", n)
		}
		if len(p.Command) > 0 {
			p.Command[0] = "changed" // a copy: the next Get is unchanged
			if q, _ := Get(n); q.Command[0] == "changed" {
				t.Errorf("Get(%q) returns shared slices", n)
			}
		}
	}
	if _, ok := Get("claude-code"); ok {
		t.Error(`Get("claude-code") = ok, want unknown`)
	}
	c, _ := Get(Claude)
	if !strings.Contains(strings.Join(c.Env, " "), "CLAUDE_CODE_MAX_RETRIES=") {
		t.Errorf("claude env %q lacks CLAUDE_CODE_MAX_RETRIES", c.Env)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{claudeOK, claudeSession, claudeReject, claude529,
		`{"type":"turn.completed","usage":{"input_tokens":-5,"cached_input_tokens":99999999999}}`,
		`{"type":"step_finish","part":{"tokens":{"input":1}}}`, `{"error":{"code":"429"}}`,
		"You've hit your weekly limit · resets Nov 26, 10:26pm (UTC)", "try again in 99999999999999 days",
		"You've hit your channel's monthly spend limit.", "Attempt 3 failed with status 429. Retrying with backoff...",
		`timestamp=x level=ERROR message="stream error" small=false error.error="AI_APICallError: Too Many Requests"`} {
		f.Add([]byte(s), 1)
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, out []byte, exit int) {
		for _, n := range Names {
			r := Parse(n, out, exit, now, defaultPattern)
			if r.Limited && r.Transient || r.SpendCap && (r.Limited || r.Transient) {
				t.Fatalf("Parse(%s) contradictory: %+v", n, r)
			}
			if rr := Retried(n, out, now); rr.Limited == rr.Transient || rr.SpendCap || strings.Contains(rr.Detail, "\n") {
				t.Fatalf("Retried(%s) = %+v, want limited or transient, one detail line", n, rr)
			}
			if strings.Contains(r.Detail, "\n") || len(r.Detail) > detailMax+64 {
				t.Fatalf("Parse(%s) detail not one short line: %q", n, r.Detail)
			}
			if r.RetryAfter < 0 || !r.ResetAt.IsZero() && !r.ResetAt.After(now) {
				t.Fatalf("Parse(%s) reset in the past: %+v", n, r)
			}
		}
	})
}

func TestWithMCP(t *testing.T) {
	t.Parallel()
	args := []string{"mcp", "--loop", "L1"}
	tests := []struct {
		name, preset string
		argv, want   []string
	}{
		{"claude", Claude, []string{"claude", "-p"}, []string{"claude", "-p", "--mcp-config", "/it/mcp.json"}},
		{"codex before the stdin dash", Codex, []string{"codex", "exec", "--json", "-"},
			[]string{"codex", "exec", "--json", "-c", `mcp_servers.loopr.command="/bin/lo\"opr"`, "-c", `mcp_servers.loopr.args=["mcp","--loop","L1"]`, "-"}},
		{"a wrapper script", Claude, []string{"/usr/local/bin/my-claude", "-p"}, []string{"/usr/local/bin/my-claude", "-p"}},
		{"gemini unchanged", Gemini, []string{"gemini", "--yolo"}, []string{"gemini", "--yolo"}},
		{"command unchanged", Command, []string{"sh", "agent.sh"}, []string{"sh", "agent.sh"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exe := "/usr/bin/loopr"
			if tc.preset == Codex {
				exe = `/bin/lo"opr`
			}
			got := WithMCP(tc.preset, tc.argv, "/it/mcp.json", exe, args)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WithMCP() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
