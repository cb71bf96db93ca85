package preset

import (
	"bytes"
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// tok is a token count as read from an agent's output, bounded
// (loop.BoundTokens): the parsers add them up.
func tok(n int64) int64 { return loop.BoundTokens(n) }

// jsonLines calls fn with each line of out that holds a JSON object and
// contains one of needles (agent CLIs print one event per line; anything
// else on a line, such as a warning, is skipped, and so are the events a
// parser has no use for, without decoding them: most of a long run's log
// is the assistant's messages and tool results).
func jsonLines(out []byte, needles []string, fn func(line []byte)) {
	for len(out) > 0 {
		var line []byte
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			line, out = out, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) > 1 && line[0] == '{' && line[len(line)-1] == '}' && containsAny(line, needles) {
			fn(line)
		}
	}
}

func containsAny(line []byte, needles []string) bool {
	for _, n := range needles {
		if bytes.Contains(line, []byte(n)) {
			return true
		}
	}
	return false
}

// status reads an HTTP status carried as a number or a string; 0 if neither.
type status int

func (s *status) UnmarshalJSON(b []byte) error {
	var n json.Number
	if json.Unmarshal(b, &n) == nil {
		if v, err := strconv.Atoi(n.String()); err == nil {
			*s = status(v)
		}
		return nil
	}
	var str string
	if json.Unmarshal(b, &str) == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(str)); err == nil {
			*s = status(v)
		}
	}
	return nil
}

// byStatus classifies an HTTP status the provider answered with.
func byStatus(r *Report, code status, msg string) bool {
	switch {
	case code == 429:
		r.Limited = true
	case code == 529 || code >= 500 && code <= 599:
		r.Transient = true
	default:
		return false
	}
	if msg == "" {
		msg = fmt.Sprintf("HTTP %d", code)
	}
	r.Detail = oneLine(msg)
	return true
}

// Claude Code: claude -p --output-format stream-json --verbose (one event a
// line, the last "result") or --output-format json (the result alone).
type claudeEvent struct {
	Type          string `json:"type"`
	RateLimitInfo *struct {
		Status        string `json:"status"`
		ResetsAt      int64  `json:"resetsAt"`
		RateLimitType string `json:"rateLimitType"`
	} `json:"rate_limit_info"`
	ErrorStatus    status   `json:"error_status"` // system/api_retry
	IsError        bool     `json:"is_error"`
	APIErrorStatus status   `json:"api_error_status"`
	Result         string   `json:"result"`
	Subtype        string   `json:"subtype"`
	TotalCostUSD   *float64 `json:"total_cost_usd"`
	Usage          *struct {
		InputTokens         int64 `json:"input_tokens"`
		OutputTokens        int64 `json:"output_tokens"`
		CacheReadTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

func parseClaude(out []byte, r *Report) structured {
	var s structured
	var rejected time.Time
	var rejectedSeen bool
	var rejectedDetail string
	var retrying status
	jsonLines(out, []string{`"result"`, `"rate_limit_event"`, `"api_retry"`}, func(line []byte) {
		var e claudeEvent
		if json.Unmarshal(line, &e) != nil {
			return
		}
		switch e.Type {
		case "rate_limit_event":
			// Every stream-json run carries one (status allowed or
			// allowed_warning); only rejected blocks.
			if e.RateLimitInfo != nil && e.RateLimitInfo.Status == "rejected" {
				rejectedSeen = true
				rejected = ratelimit.Epoch(e.RateLimitInfo.ResetsAt) // seconds, or milliseconds
				rejectedDetail = "rate_limit_event rejected"
				if t := e.RateLimitInfo.RateLimitType; t != "" {
					rejectedDetail += " (" + t + ")"
				}
			}
		case "system":
			// With retries left, the CLI reports each one it waits for
			// (subtype api_retry, error_status 429/529/5xx).
			if e.Subtype == "api_retry" && e.ErrorStatus != 0 {
				retrying = e.ErrorStatus
			}
		case "result":
			s.done = true
			r.IsError = e.IsError
			s.message = e.Result
			if e.Usage != nil {
				r.Usage.InputTokens = tok(e.Usage.InputTokens)
				r.Usage.OutputTokens = tok(e.Usage.OutputTokens)
				r.Usage.CacheReadTokens = tok(e.Usage.CacheReadTokens)
				r.Usage.CacheCreationTokens = tok(e.Usage.CacheCreationTokens)
			}
			if e.TotalCostUSD != nil {
				r.Usage.CostUSD = loop.BoundUSD(*e.TotalCostUSD)
			}
			if e.IsError {
				byStatus(r, e.APIErrorStatus, e.Result)
			}
		}
	})
	// A rejected event without a failed result (the CLI was killed, or
	// printed the event and carried on with an overage) still says the
	// provider refused when the run did not succeed.
	if !s.done && retrying != 0 && !rejectedSeen {
		// Killed (loopr's timeout) while the CLI waited out a 429 or 529.
		byStatus(r, retrying, fmt.Sprintf("killed while the CLI retried HTTP %d", retrying))
	}
	if rejectedSeen && (!s.done || r.IsError) {
		r.Transient = false
		r.Limited = true
		r.ResetAt = rejected
		if r.Detail == "" {
			r.Detail = rejectedDetail
		}
	}
	return s
}

// Codex: codex exec --json (thread.started, turn.started, item.*,
// turn.completed with usage, turn.failed with error.message, error).
type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		CacheWriteTokens  int64 `json:"cache_write_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
}

func parseCodex(out []byte, r *Report) structured {
	var s structured
	jsonLines(out, []string{`"turn.`, `"error"`}, func(line []byte) {
		var e codexEvent
		if json.Unmarshal(line, &e) != nil {
			return
		}
		switch e.Type {
		case "turn.completed":
			s.done = true
			if u := e.Usage; u != nil {
				cached := min(tok(u.CachedInputTokens), tok(u.InputTokens))
				// input_tokens counts the cached ones too.
				r.Usage = r.Usage.Add(loop.Usage{InputTokens: tok(u.InputTokens) - cached, CacheReadTokens: cached,
					CacheCreationTokens: tok(u.CacheWriteTokens), OutputTokens: tok(u.OutputTokens)})
			}
		case "turn.failed":
			s.done = true
			r.IsError = true
			if e.Error != nil {
				s.message = e.Error.Message
			}
		case "error":
			if s.message == "" || !s.done {
				s.message = e.Message
			}
		}
	})
	return s
}

// Gemini CLI: --output-format stream-json (init, message, tool_use,
// tool_result, error, result) or json (one object: response, stats,
// error). Usage: stream-json's result.stats counts every model's tokens
// (input_tokens with the cached ones, cached, output_tokens), as does each
// stats.models.<model> entry; json's stats.models.<model>.tokens has
// prompt, candidates, cached and thoughts.
type geminiEvent struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    status `json:"code"`
	} `json:"error"`
	Response *string      `json:"response"`
	Stats    *geminiStats `json:"stats"`
}

type geminiStats struct {
	geminiTokens
	Models map[string]struct {
		geminiTokens
		Tokens *struct {
			Prompt     int64 `json:"prompt"`
			Candidates int64 `json:"candidates"`
			Cached     int64 `json:"cached"`
			Thoughts   int64 `json:"thoughts"`
		} `json:"tokens"`
	} `json:"models"`
}

type geminiTokens struct {
	InputTokens  *int64 `json:"input_tokens"` // the cached ones included
	OutputTokens int64  `json:"output_tokens"`
	Cached       int64  `json:"cached"`
}

// usage adds t to u: input_tokens less the cached ones as input.
func (t geminiTokens) usage(u *loop.Usage) {
	in := tok(*t.InputTokens)
	cached := min(tok(t.Cached), in)
	*u = u.Add(loop.Usage{InputTokens: in - cached, CacheReadTokens: cached, OutputTokens: tok(t.OutputTokens)})
}

// usage is what the stats say was consumed: the totals when given, else
// the sum over the models.
func (st *geminiStats) usage() loop.Usage {
	var u loop.Usage
	if st.InputTokens != nil {
		st.geminiTokens.usage(&u)
		return u
	}
	for _, m := range st.Models {
		switch {
		case m.InputTokens != nil:
			m.geminiTokens.usage(&u)
		case m.Tokens != nil:
			t := m.Tokens
			cached := min(tok(t.Cached), tok(t.Prompt))
			u = u.Add(loop.Usage{InputTokens: tok(t.Prompt) - cached, CacheReadTokens: cached,
				OutputTokens: tok(t.Candidates) + tok(t.Thoughts)})
		}
	}
	return u
}

func parseGemini(out []byte, r *Report) structured {
	var s structured
	event := func(line []byte) {
		var e geminiEvent
		if json.Unmarshal(line, &e) != nil {
			return
		}
		final := e.Type == "result" || e.Type == "" && (e.Response != nil || e.Stats != nil || e.Error != nil)
		if e.Type == "error" && e.Message != "" {
			s.message = e.Message
		}
		if !final {
			return
		}
		s.done = true
		if e.Error != nil || e.Status == "error" {
			r.IsError = true
			if e.Error != nil {
				s.message = e.Error.Message
				byStatus(r, e.Error.Code, e.Error.Message)
			}
		}
		if e.Stats != nil {
			u := e.Stats.usage()
			r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.CacheReadTokens = u.InputTokens, u.OutputTokens, u.CacheReadTokens
		}
	}
	jsonLines(out, []string{`"result"`, `"error"`, `"stats"`, `"response"`}, event)
	if !s.done {
		// --output-format json prints its object indented, over lines.
		if i, j := bytes.Index(out, []byte("\n{\n")), bytes.LastIndex(out, []byte("\n}")); i >= 0 && j > i {
			event(out[i+1 : j+2])
		} else if bytes.HasPrefix(out, []byte("{\n")) && j > 0 {
			event(out[:j+2])
		}
	}
	return s
}

// opencode: opencode run --format json (step_start, text, tool_use,
// step_finish with tokens and cost, error).
type openCodeEvent struct {
	Type string `json:"type"`
	Part *struct {
		Cost   float64 `json:"cost"`
		Tokens *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message    string `json:"message"`
			StatusCode status `json:"statusCode"`
		} `json:"data"`
	} `json:"error"`
}

func parseOpenCode(out []byte, r *Report) structured {
	var s structured
	jsonLines(out, []string{`"step_finish"`, `"error"`}, func(line []byte) {
		var e openCodeEvent
		if json.Unmarshal(line, &e) != nil {
			return
		}
		switch e.Type {
		case "step_finish":
			if e.Part == nil {
				return
			}
			var step loop.Usage
			if t := e.Part.Tokens; t != nil {
				step = loop.Usage{InputTokens: tok(t.Input), OutputTokens: tok(t.Output) + tok(t.Reasoning),
					CacheReadTokens: tok(t.Cache.Read), CacheCreationTokens: tok(t.Cache.Write)}
			}
			step.CostUSD = loop.BoundUSD(e.Part.Cost)
			r.Usage = r.Usage.Add(step)
		case "error":
			r.IsError = true
			if e.Error != nil {
				msg := e.Error.Data.Message
				if msg == "" {
					msg = e.Error.Name
				}
				s.message = msg
				byStatus(r, e.Error.Data.StatusCode, msg)
			}
		}
	})
	return s
}
