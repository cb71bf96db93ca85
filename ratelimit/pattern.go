package ratelimit

// DefaultPattern is the default agent.rate_limit_pattern: the limit messages
// real agent CLIs print (Claude Code, Codex, Gemini CLI, opencode, aider),
// and nothing an agent says about rate limiting in ordinary prose. It names
// phrases, never a bare "429" or "rate limit": a run that implemented a
// rate limiter "answering HTTP 429" is not limited. The terse forms
// ("Too Many Requests", "Rate Limited") count only as a whole line.
//
// The runner applies it only to a run that failed, or, on exit 0, to a
// usage-limit line among the last three lines of output (preset.Parse).
// Transient provider errors (529 Overloaded, 500) are not limits: preset
// recognizes them separately and retries them.
const DefaultPattern = `(?im)hit your (?:\S+ ){0,3}(?:limit|budget)\b|usage limit reached|\d+-hour limit reached|` +
	`exhausted your (?:daily )?(?:quota|capacity)|quota exceeded|exceeded your current quota|resource has been exhausted \(e\.g\. check quota\)|out of usage credits|free usage exceeded|` +
	`request rejected \(429\)|API Error: 429\b|exceeded retry limit, last status: 429|` +
	`would exceed (?:your account.s|the) rate limit|rate_limit_error|RateLimitError|usage_limit_reached|` +
	`^\W*(?:error:\s*)?(?:(?:http\s*)?429\s*)?(?:too many requests|rate limit(?:ed| exceeded| reached))(?:\W*$|\s*[,.;:(\[])`
