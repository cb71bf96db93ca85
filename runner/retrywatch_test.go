package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/preset"
)

// Gemini CLI 0.61.0's notices while it retries a provider error itself
// (testdata of package preset).
const (
	geminiInit       = `{"type":"init","timestamp":"2026-11-27T14:40:22.097Z","session_id":"s","model":"auto"}`
	geminiQuotaRetry = `Attempt 1 failed: You exceeded your current quota, please check your plan and billing details.
Please retry in 5.0s.
Suggested retry after 5s.. Retrying after 5344ms...`
	gemini503Retry = `Attempt 1 failed with status 503. Retrying with backoff... _ApiError: {"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}
  status: 503
}`
)

// TestRunRetryWatch: an agent whose CLI only says, for RetryTimeout, that
// it retries a failed provider call is stopped: rate limited until the
// wait the notice names, or a transient failure for a 503; a structured
// event after the notice means it works again.
func TestRunRetryWatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 14, 40, 0, 0, time.UTC)
	tests := []struct {
		name      string
		script    string
		timeout   time.Duration
		want      Outcome
		transient bool
		until     time.Time
		reason    string
	}{
		{"quota retried: rate limited until the CLI's next try",
			"echo '" + geminiInit + "'\ncat <<'EOF' >&2\n" + geminiQuotaRetry + "\nEOF\nsleep 120", time.Second,
			RateLimited, false, now.Add(5344 * time.Millisecond), "rate limited: Attempt 1 failed: You exceeded your current quota"},
		{"503 retried: transient",
			"echo '" + geminiInit + "'\ncat <<'EOF' >&2\n" + gemini503Retry + "\nEOF\nsleep 120", time.Second,
			Failed, true, time.Time{}, "transient provider error: Attempt 1 failed with status 503"},
		{"a structured event after the notice: it works again",
			"cat <<'EOF' >&2\n" + geminiQuotaRetry + "\nEOF\necho '" + geminiInit + "'\nsleep 4\necho done", 3 * time.Second,
			Passed, false, time.Time{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := newJob(t, loop.Ralph, agent(t, tt.script))
			j.Settings.Preset = preset.Gemini
			j.Settings.RetryTimeout = tt.timeout
			start := time.Now()
			res := (&Runner{Now: func() time.Time { return now }}).Run(context.Background(), j)
			if res.Outcome != tt.want || !strings.HasPrefix(res.Reason, tt.reason) {
				t.Fatalf("Run() = %v %q, want %v %q…", res.Outcome, res.Reason, tt.want, tt.reason)
			}
			if res.Transient != tt.transient || !res.RateLimitUntil.Equal(tt.until) {
				t.Errorf("Transient %v, RateLimitUntil %v; want %v, %v", res.Transient, res.RateLimitUntil, tt.transient, tt.until)
			}
			if took := time.Since(start); took > 60*time.Second {
				t.Errorf("Run() took %s: the agent was not stopped", took)
			}
		})
	}
}

// TestRunGeminiArtifactDir: the gemini preset's CLI gets the directory of
// $LOOPR_ARTIFACT as --include-directories (its file tools refuse any
// other path outside the workspace).
func TestRunGeminiArtifactDir(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "gemini")
	script := "#!/bin/sh\ncase \" $* \" in\n*\" --include-directories $(dirname \"$LOOPR_ARTIFACT\") \"*)\n" +
		"  cat > \"$LOOPR_ARTIFACT\" <<'EOF'\n" + goodPlan + "EOF\n  ;;\n*) echo \"not included: $*\"; exit 3;;\nesac\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	j := newJob(t, loop.Plan, []string{bin, "--output-format", "stream-json", "--yolo"})
	j.Settings.Preset = preset.Gemini
	if res := (&Runner{}).Run(context.Background(), j); res.Outcome != Passed {
		t.Fatalf("Run() = %v %q\n%s", res.Outcome, res.Reason, res.Feedback)
	}
}

// TestRunSpendCap: a refusal for a spend limit that names no reset waits
// for a person (a question), without spending the iteration.
func TestRunSpendCap(t *testing.T) {
	t.Parallel()
	spent := `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error":"usage_limit_reached","num_turns":1,"result":"You've hit your channel's monthly spend limit.","session_id":"s1","total_cost_usd":0}`
	j := newJob(t, loop.Ralph, streamAgent(t, "", 1, streamInit, streamReject, spent))
	j.Settings.Preset = preset.Claude
	res := (&Runner{}).Run(context.Background(), j)
	if res.Outcome != Failed || !strings.HasPrefix(res.Reason, "spend limit: You've hit your channel's monthly spend limit.") ||
		!strings.Contains(res.Question, "spend limit") || !res.RateLimitUntil.IsZero() {
		t.Fatalf("Run() = %v %q question %q until %v; want failed with a question about the spend limit", res.Outcome, res.Reason, res.Question, res.RateLimitUntil)
	}
}
