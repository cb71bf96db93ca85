package preset

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/loopr-dev/loopr/loop"
)

// capturedAt is when the Claude Code captures were made: their resets
// ("resets 4:12pm (UTC)", resetsAt 1795795933) lie 90 minutes ahead.
var capturedAt = time.Date(2026, 11, 27, 14, 42, 0, 0, time.UTC)

func readCapture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCapturedOutputs parses what the real CLIs printed (stdout and stderr
// interleaved, as agent.log holds them) when run with the preset's argv
// and environment against local fakes of their APIs: testdata/README.md
// says how. Each is classified, with its reset and its usage.
func TestCapturedOutputs(t *testing.T) {
	t.Parallel()
	fiveHour := time.Date(2026, 11, 27, 16, 12, 0, 0, time.UTC)
	tests := []struct {
		file    string
		preset  string
		exit    int
		now     time.Time
		want    verdict
		isError bool
		reset   time.Time
		usage   loop.Usage
	}{
		// Gemini CLI 0.61.0: stream-json stats count the router's call too.
		{"gemini-0.61.0/ok.jsonl", Gemini, 0, now, none, false, time.Time{}, loop.Usage{InputTokens: 1807, CacheReadTokens: 600, OutputTokens: 83}},
		{"gemini-0.61.0/ok.json", Gemini, 0, now, none, false, time.Time{}, loop.Usage{InputTokens: 1807, CacheReadTokens: 600, OutputTokens: 93}},
		{"gemini-0.61.0/untrusted.txt", Gemini, 55, now, none, false, time.Time{}, loop.Usage{}},
		{"gemini-0.61.0/quota.jsonl", Gemini, 173, now, limit, true, now.Add(3599 * time.Second), loop.Usage{InputTokens: 7, OutputTokens: 3}},
		{"gemini-0.61.0/daily.jsonl", Gemini, 173, now, limit, true, time.Time{}, loop.Usage{InputTokens: 7, OutputTokens: 3}},
		{"gemini-0.61.0/exhausted.jsonl", Gemini, 173, now, limit, true, time.Time{}, loop.Usage{InputTokens: 7, OutputTokens: 3}},
		// opencode 1.18.33: without --auto the artifact's write is
		// rejected and the run still exits 0.
		{"opencode-1.18.33/ok.jsonl", OpenCode, 0, now, none, false, time.Time{}, loop.Usage{InputTokens: 2400, CacheReadTokens: 600, OutputTokens: 80}},
		{"opencode-1.18.33/rejected.jsonl", OpenCode, 0, now, none, false, time.Time{}, loop.Usage{InputTokens: 1200, CacheReadTokens: 300, OutputTokens: 40}},
		{"opencode-1.18.33/ratelimited.jsonl", OpenCode, 1, now, limit, true, time.Time{}, loop.Usage{}},
		// Claude Code 2.1.332.
		{"claude-2.1.332/ok.jsonl", Claude, 0, capturedAt, none, false, time.Time{}, loop.Usage{InputTokens: 10, OutputTokens: 1, CostUSD: 3e-05}},
		// A run of tools (Read, Edit, Bash passing and failing, Write): prose, not a limit.
		{"claude-2.1.332/tools.jsonl", Claude, 0, capturedAt, none, false, time.Time{}, loop.Usage{InputTokens: 7200, OutputTokens: 240, CacheReadTokens: 1800, CacheCreationTokens: 300, CostUSD: 0.01773}},
		// Codex 0.171.0: four shell commands (one fails), then the answer.
		{"codex-0.171.0/tools.jsonl", Codex, 0, now, none, false, time.Time{}, loop.Usage{InputTokens: 7500, CacheReadTokens: 2500, OutputTokens: 300}},
		{"claude-2.1.332/five-hour.txt", Claude, 1, capturedAt, limit, false, fiveHour, loop.Usage{}},
		{"claude-2.1.332/five-hour.jsonl", Claude, 1, capturedAt, limit, true, time.Unix(1795795933, 0), loop.Usage{}},
		{"claude-2.1.332/channel-spend.jsonl", Claude, 1, capturedAt, limit, true, time.Unix(1795795937, 0), loop.Usage{}},
		{"claude-2.1.332/individual-spend.txt", Claude, 1, capturedAt, limit, false, fiveHour, loop.Usage{}},
		{"claude-2.1.332/out-of-credits.txt", Claude, 1, capturedAt, limit, false, fiveHour, loop.Usage{}},
		{"claude-2.1.332/paused.txt", Claude, 1, capturedAt, spend, false, time.Time{}, loop.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			checkReport(t, Parse(tt.preset, readCapture(t, tt.file), tt.exit, tt.now, defaultPattern), tt.want, tt.isError, tt.reset, tt.usage)
		})
	}
}

// TestCapturedRetries: the output of a CLI stopped while it retried a
// provider error itself (gemini's "Attempt 2 failed", opencode's "stream
// error" with a retry-after of 30 s) ends in a Retrying line, and Retried
// reads what it retried; a run that completed has no Retrying line.
func TestCapturedRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		preset string
		want   verdict
		reset  time.Time
		detail string
	}{
		{"gemini-0.61.0/quota-retrying.txt", Gemini, limit, now.Add(10383 * time.Millisecond), "Attempt 2 failed: You exceeded your current quota"},
		{"gemini-0.61.0/exhausted-retrying.txt", Gemini, limit, time.Time{}, "Attempt 2 failed with status 429"},
		{"gemini-0.61.0/unavailable-retrying.txt", Gemini, transient, time.Time{}, "Attempt 2 failed with status 503"},
		{"opencode-1.18.33/retryafter-retrying.txt", OpenCode, limit, time.Time{}, "AI_APICallError: Rate limit reached for requests per minute"},
		{"opencode-1.18.33/ratelimited.jsonl", OpenCode, limit, time.Time{}, "AI_APICallError: Rate limit reached for requests per minute"},
		{"opencode-1.18.33/down-retrying.txt", OpenCode, transient, time.Time{}, "AI_APICallError: Cannot connect to API: Unable to connect."},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			out := readCapture(t, tt.file)
			if kinds := lineKinds(tt.preset, out); !slices.Contains(kinds, Retrying) {
				t.Errorf("Line() finds no Retrying line in %s: %v", tt.file, kinds)
			}
			r := Retried(tt.preset, out, now)
			if got := verdictOf(r); got != tt.want {
				t.Fatalf("Retried() = %v (%+v), want %v", got, r, tt.want)
			}
			if !r.ResetAt.Equal(tt.reset) {
				t.Errorf("ResetAt = %v, want %v", r.ResetAt, tt.reset)
			}
			if !strings.HasPrefix(r.Detail, tt.detail) {
				t.Errorf("Detail = %q, want %q…", r.Detail, tt.detail)
			}
		})
	}
	for _, c := range []struct{ file, preset string }{
		{"gemini-0.61.0/ok.jsonl", Gemini}, {"gemini-0.61.0/quota.jsonl", Gemini},
		{"opencode-1.18.33/ok.jsonl", OpenCode}, {"claude-2.1.332/ok.jsonl", Claude},
	} {
		kinds := lineKinds(c.preset, readCapture(t, c.file))
		if slices.Contains(kinds, Retrying) || !slices.Contains(kinds, Progress) {
			t.Errorf("Line() over %s = %v, want Progress lines and no Retrying one", c.file, kinds)
		}
	}
}

func lineKinds(name string, out []byte) []LineKind {
	var kinds []LineKind
	for l := range strings.Lines(string(out)) {
		kinds = append(kinds, Line(name, []byte(l)))
	}
	return kinds
}

// TestLimitsFile: every line of testdata/limits.txt, the output of a run
// that exited 1, gets its verdict and its reset, with the command preset
// (text only) and, but for spend limits (a structured limit already),
// as the message of a failed structured result.
func TestLimitsFile(t *testing.T) {
	t.Parallel()
	for _, c := range limitsFile(t) {
		t.Run(firstLine(c.text), func(t *testing.T) {
			t.Parallel()
			r := Parse(Command, []byte("Working on the task...\n"+c.text+"\n"), 1, now, defaultPattern)
			if got := verdictOf(r); got != c.want {
				t.Fatalf("Parse() = %v (%+v), want %v", got, r, c.want)
			}
			if !r.ResetAt.Equal(c.reset) {
				t.Errorf("ResetAt = %v, want %v", r.ResetAt, c.reset)
			}
			if c.want != none && (r.Detail == "" || strings.Contains(r.Detail, "\n")) {
				t.Errorf("Detail = %q, want one non-empty line", r.Detail)
			}
			if c.want != spend && c.want != limit {
				return
			}
			// Claude's result event says 429 and carries the text.
			res := `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":` + quote(c.text) + `}`
			r = Parse(Claude, lines(res), 1, now, defaultPattern)
			if got := verdictOf(r); got != c.want || !r.ResetAt.Equal(c.reset) {
				t.Errorf("Parse(claude result) = %v reset %v (%+v), want %v reset %v", got, r.ResetAt, r, c.want, c.reset)
			}
		})
	}
}

type limitCase struct {
	want  verdict
	reset time.Time
	text  string
}

// limitsFile reads testdata/limits.txt (its header says the format).
func limitsFile(t *testing.T) []limitCase {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "limits.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []limitCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.SplitN(line, "\t", 3)
		if len(fields) != 3 {
			t.Fatalf("limits.txt:%d: want verdict, reset and text separated by tabs: %q", n, line)
		}
		c := limitCase{text: strings.ReplaceAll(fields[2], `\n`, "\n")}
		switch fields[0] {
		case "limit":
			c.want = limit
		case "spend":
			c.want = spend
		case "transient":
			c.want = transient
		case "none":
			c.want = none
		default:
			t.Fatalf("limits.txt:%d: unknown verdict %q", n, fields[0])
		}
		if fields[1] != "-" {
			if c.reset, err = time.Parse(time.RFC3339, fields[1]); err != nil {
				t.Fatalf("limits.txt:%d: %v", n, err)
			}
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("limits.txt holds %d cases, want them all", len(cases))
	}
	return cases
}

func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestPresetCommands: the gemini preset trusts the worktree (headless
// Gemini CLI exits 55 in an untrusted folder) and lets its file tools
// write the artifact's directory; the opencode preset approves the
// permissions it would ask for (external_directory: the artifact) and
// prints its retries.
func TestPresetCommands(t *testing.T) {
	t.Parallel()
	const dir = "/home/u/.loopr/loops/L1/iterations/001"
	g, _ := Get(Gemini)
	if !slices.Contains(g.Env, "GEMINI_CLI_TRUST_WORKSPACE=true") {
		t.Errorf("gemini env %q does not trust the workspace", g.Env)
	}
	c, _ := Get(Claude)
	tests := []struct {
		name   string
		preset string
		argv   []string
		want   []string
	}{
		{"gemini preset", Gemini, g.Command, append(slices.Clone(g.Command), "--include-directories", dir)},
		{"gemini with a model", Gemini, []string{"/opt/bin/gemini", "-m", "gemini-2.5-pro", "--include-directories", "/data"},
			[]string{"/opt/bin/gemini", "-m", "gemini-2.5-pro", "--include-directories", "/data", "--include-directories", dir}},
		{"gemini behind a wrapper", Gemini, []string{"npx", "@google/gemini-cli"}, []string{"npx", "@google/gemini-cli"}},
		{"claude", Claude, c.Command, c.Command},
		{"command", Command, []string{"gemini"}, []string{"gemini"}},
	}
	for _, tt := range tests {
		got := WithArtifactDir(tt.preset, slices.Clip(tt.argv), dir)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: WithArtifactDir() mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
	o, _ := Get(OpenCode)
	for _, flag := range []string{"--auto", "--print-logs"} {
		if !slices.Contains(o.Command, flag) {
			t.Errorf("opencode command %q lacks %s", o.Command, flag)
		}
	}
}
