package runner

import (
	"fmt"
	"github.com/go-json-experiment/json/v1"
	"path/filepath"

	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/preset"
)

// parseOutput reads what the agent's output says about its run (preset
// package: structured events of Settings.Preset, else the text rules),
// records the usage it reported with the agent's wall time in Result.Usage
// and in usage.json.
func (it *iteration) parseOutput(p procResult) preset.Report {
	it.output = readTail(it.agentLog, int(min(it.s.MaxLogBytes, maxParseBytes))+logSlack)
	rep := preset.Parse(it.s.Preset, []byte(it.output), p.exitCode, it.r.now(), it.s.RateLimitPattern)
	u := rep.Usage
	u.AgentSeconds = max(it.res.AgentEnd.Sub(it.res.AgentStart).Seconds(), 0)
	it.res.Usage = u
	if b, err := json.Marshal(u); err == nil {
		if err := safefile.WriteAtomic(filepath.Join(it.res.Dir, "usage.json"), append(b, '\n'), 0o644); err != nil {
			it.log.Warn("usage.json", "err", err)
		}
	}
	return rep
}

// rateLimited reports whether the agent hit a rate limit, exactly: its
// structured output says so (preset.Parse), or it exited with the
// configured status, or its text matched the pattern under the rules of
// preset.Parse (a failed run; on exit 0, a usage-limit line at the end).
func (it *iteration) rateLimited(p procResult) (string, bool) {
	if it.report.Limited {
		return "rate limited: " + it.report.Detail, true
	}
	if c := it.s.RateLimitExitCode; c != 0 && p.exitCode == c {
		return fmt.Sprintf("rate limited: agent exited %d", c), true
	}
	return "", false
}

// retried ends an iteration whose agent was stopped while its CLI retried a
// failed provider call (Settings.RetryTimeout): rate limited, or a
// transient failure, as preset.Retried reads the last retry notice.
func (it *iteration) retried() Result {
	rep := preset.Retried(it.s.Preset, []byte(it.output), it.r.now())
	how := " (the agent retried it for " + shortDuration(it.s.RetryTimeout) + ": stopped)"
	if rep.Transient {
		it.res.Transient = true
		return it.fail("transient provider error: "+rep.Detail+how, "agent.log", it.agentLog)
	}
	return it.limited("rate limited: "+rep.Detail+how, rep)
}

// spendCapped ends an iteration refused for a spend limit that names no
// reset (preset.Report.SpendCap): waiting would not lift it, so the loop
// waits for a person, as for a question, without spending the iteration.
func (it *iteration) spendCapped(rep preset.Report) Result {
	it.res.Outcome = Failed
	it.res.Reason = clip("spend limit: "+rep.Detail, 240)
	it.res.Question = "The provider refused the agent for a spend limit, which waiting does not lift: " + rep.Detail +
		"\nRaise the limit (or give the agent profile another account), then answer this loop to run the iteration again."
	return it.res
}

// limited ends the iteration as rate limited, with the reset rep announced
// (none when it was already past: the caller's short backoff re-probes).
func (it *iteration) limited(reason string, rep preset.Report) Result {
	it.res.Outcome = RateLimited
	it.res.Reason = clip(reason, 240)
	it.res.RateLimitUntil = rep.ResetAt
	it.res.RateLimitAfter = rep.RetryAfter
	return it.res
}
