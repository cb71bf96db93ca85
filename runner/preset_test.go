package runner

import (
	"context"
	"github.com/go-json-experiment/json/v1"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
	"github.com/loopr-dev/loopr/ratelimit"
)

// Lines Claude Code 2.1.197 prints with -p --output-format stream-json
// --verbose (shortened: unused fields left out).
const (
	streamInit    = `{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Bash","Write"],"model":"claude-sonnet-4-5"}`
	streamAllowed = `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1745424000,"rateLimitType":"five_hour","overageStatus":"rejected","isUsingOverage":false}}`
	streamReject  = `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1745424000,"rateLimitType":"five_hour","overageStatus":"rejected","isUsingOverage":false}}`
	streamProse   = `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Implemented the token-bucket rate limiter (answers HTTP 429). You've hit your limit errors are mapped too."}]}}`
	streamPassed  = `{"type":"result","subtype":"success","is_error":false,"api_error_status":null,"duration_ms":2210,"num_turns":3,"result":"Implemented the token-bucket rate limiter (answers HTTP 429 when the bucket is empty).","session_id":"s1","total_cost_usd":0.0123,"usage":{"input_tokens":1666,"cache_creation_input_tokens":120,"cache_read_input_tokens":4000,"output_tokens":80}}`
	streamSession = `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"duration_ms":340,"num_turns":1,"result":"You've hit your session limit · resets 4pm (UTC)","session_id":"s1","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}`
	stream529     = `{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"num_turns":1,"result":"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.","session_id":"s1","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}`
	streamErrZero = `{"type":"result","subtype":"error_during_execution","is_error":true,"api_error_status":null,"num_turns":2,"result":"tool failed","session_id":"s1","total_cost_usd":0.002,"usage":{"input_tokens":20,"output_tokens":3}}`
)

// streamAgent is a scripted agent printing lines of stream-json, then
// running tail (shell) and exiting with exit.
func streamAgent(t *testing.T, tail string, exit int, events ...string) []string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		b.WriteString("cat <<'EOF'\n" + e + "\nEOF\n")
	}
	b.WriteString(tail + "\n")
	b.WriteString("exit " + string(rune('0'+exit)) + "\n")
	return agent(t, b.String())
}

func TestRunClaudeStreamJSON(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 4, 23, 12, 0, 0, 0, time.UTC) // 1745409600
	writePlan := `cat > "$LOOPR_ARTIFACT" <<'EOF'
` + goodPlan + `EOF`
	passedUsage := loop.Usage{InputTokens: 1666, OutputTokens: 80, CacheReadTokens: 4000, CacheCreationTokens: 120, CostUSD: 0.0123}
	tests := []struct {
		name      string
		typ       string
		argv      func(t *testing.T) []string
		want      Outcome
		transient bool
		until     time.Time
		usage     loop.Usage
		reason    string
	}{
		{"passing run that talks about rate limiting", loop.Plan,
			func(t *testing.T) []string {
				return streamAgent(t, writePlan, 0, streamInit, streamAllowed, streamProse, streamPassed)
			}, Passed, false, time.Time{}, passedUsage, ""},
		{"subscriber session limit, reset from the rejected event", loop.Plan,
			func(t *testing.T) []string { return streamAgent(t, "", 1, streamInit, streamReject, streamSession) },
			RateLimited, false, time.Unix(1745424000, 0), loop.Usage{}, "rate limited: You've hit your session limit"},
		{"subscriber session limit, reset from the message", loop.Ralph,
			func(t *testing.T) []string { return streamAgent(t, "", 1, streamInit, streamAllowed, streamSession) },
			RateLimited, false, time.Date(2025, 4, 23, 16, 0, 0, 0, time.UTC), loop.Usage{}, "rate limited: You've hit your session limit"},
		{"529 overloaded is transient", loop.Ralph,
			func(t *testing.T) []string { return streamAgent(t, "", 1, streamInit, stream529) },
			Failed, true, time.Time{}, loop.Usage{}, "transient provider error: API Error: 529 Overloaded"},
		{"exit 0 with an error result fails", loop.Ralph,
			func(t *testing.T) []string { return streamAgent(t, "", 0, streamInit, streamErrZero) },
			Failed, false, time.Time{}, loop.Usage{InputTokens: 20, OutputTokens: 3, CostUSD: 0.002}, "agent exited 0 but its result reports an error: tool failed"},
		{"success without the artifact is a failure, not a limit", loop.Plan,
			func(t *testing.T) []string {
				return streamAgent(t, `echo "You've hit your session limit · resets 4pm (UTC)"`, 0, streamInit, streamProse, streamPassed)
			}, Failed, false, time.Time{}, passedUsage, "artifact: not written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, tt.typ, tt.argv(t))
			j.Settings.Preset = preset.Claude
			j.Settings.RateLimitPattern = regexp.MustCompile(ratelimit.DefaultPattern)
			res := (&Runner{Now: func() time.Time { return now }}).Run(context.Background(), j)
			if res.Outcome != tt.want || !strings.HasPrefix(res.Reason, tt.reason) {
				t.Fatalf("Run() = %v %q, want %v %q…", res.Outcome, res.Reason, tt.want, tt.reason)
			}
			if res.Transient != tt.transient {
				t.Errorf("Transient = %v, want %v", res.Transient, tt.transient)
			}
			if !res.RateLimitUntil.Equal(tt.until) {
				t.Errorf("RateLimitUntil = %v, want %v", res.RateLimitUntil, tt.until)
			}
			got := res.Usage
			got.AgentSeconds = 0 // the clock is fixed: wall time is 0
			if diff := cmp.Diff(tt.usage, got); diff != "" {
				t.Errorf("Usage mismatch (-want +got):\n%s", diff)
			}
			b, err := os.ReadFile(filepath.Join(res.Dir, "usage.json"))
			if err != nil {
				t.Fatal(err)
			}
			var onDisk loop.Usage
			if err := json.Unmarshal(b, &onDisk); err != nil {
				t.Fatalf("usage.json: %v: %s", err, b)
			}
			if diff := cmp.Diff(res.Usage, onDisk); diff != "" {
				t.Errorf("usage.json mismatch (-Result +file):\n%s", diff)
			}
		})
	}
}

// TestRunUsageAgentSeconds: usage.json carries the agent's wall time even
// when the agent reports no tokens (the command preset).
func TestRunUsageAgentSeconds(t *testing.T) {
	t.Parallel()
	j := newJob(t, loop.Ralph, agent(t, "sleep 0.2; echo done"))
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Passed {
		t.Fatalf("Run() = %v %q", res.Outcome, res.Reason)
	}
	if res.Usage.AgentSeconds < 0.2 || res.Usage.AgentSeconds > 10 || res.Usage.Tokens() != 0 {
		t.Errorf("Usage = %+v, want agent_seconds >= 0.2 and no tokens", res.Usage)
	}
	b, err := os.ReadFile(filepath.Join(res.Dir, "usage.json"))
	if err != nil || !strings.Contains(string(b), `"agent_seconds":`) {
		t.Errorf("usage.json = %s, %v", b, err)
	}
}
