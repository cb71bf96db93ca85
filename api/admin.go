package api

import (
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
)

// GCRequest asks for a retention pass now (POST /v1/gc, `loopr gc`).
type GCRequest struct {
	DryRun bool `json:"dry_run,omitzero"`
	// Days overrides retention.days for this pass; 0 uses the configured value.
	Days int `json:"days,omitzero"`
	// Branches also deletes the git branches of cancelled and invalidated
	// loops, whatever their age (`loopr gc` asks for it; the daemon's
	// hourly pass does not). Branches of failed loops are never deleted.
	Branches bool `json:"branches,omitzero"`
}

// GCResult reports a retention pass: what it removed, or with DryRun what
// it would remove.
type GCResult struct {
	DryRun bool `json:"dry_run"`
	// Days is the retention applied; 0 keeps every loop (nothing is removed).
	Days int `json:"days"`
	// Cutoff: terminal loops that finished before it are removed.
	Cutoff  time.Time `json:"cutoff,omitzero"`
	Removed []GCLoop  `json:"removed"`
	// Kept counts loops old enough to go that stay because a descendant is
	// still live or finished after the cutoff.
	Kept int `json:"kept"`
	// Dirs and Bytes measure the <home>/loops/<id> directories removed.
	Dirs  int   `json:"dirs"`
	Bytes int64 `json:"bytes"`
	// Branches are the git branches deleted (or, with DryRun, that would
	// be) because their loops were cancelled or invalidated.
	Branches []GCBranch `json:"branches"`
}

// GCBranch is one git branch a pass deleted, and its loop.
type GCBranch struct {
	Branch string      `json:"branch"`
	ID     string      `json:"id"`
	Type   string      `json:"type"`
	Status loop.Status `json:"status"`
	Title  string      `json:"title"`
}

// GCLoop is one loop a retention pass removed.
type GCLoop struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Status     loop.Status `json:"status"`
	Title      string      `json:"title"`
	FinishedAt time.Time   `json:"finished_at"`
}

// Stats is `loopr stats` (GET /v1/stats): what the store says about the
// retained loops, and what the daemon measured since it started.
type Stats struct {
	Now    time.Time `json:"now"`
	Daemon bool      `json:"daemon"`
	// Since is when the daemon started: the counters and latencies cover
	// its run. Zero without a daemon.
	Since      time.Time `json:"since,omitzero"`
	UptimeSecs int64     `json:"uptime_secs"`

	// From the store, over every retained loop.
	Total          int `json:"total"`
	CompletedHour  int `json:"completed_last_hour"`
	CompletedDay   int `json:"completed_last_day"`
	FinishedOK     int `json:"finished_complete"` // complete
	FinishedFailed int `json:"finished_failed"`   // failed (parked)
	// SuccessRate is complete / (complete + failed), 0 when neither.
	SuccessRate float64     `json:"success_rate"`
	Types       []TypeStats `json:"types"`
	// Usage is what the agents of every retained loop consumed; Today what
	// they consumed since midnight UTC.
	Usage loop.Usage `json:"usage"`
	Today loop.Usage `json:"usage_today"`

	RateLimit RateLimitStats `json:"rate_limit"`
	// Tick is the scheduling tick duration; Dispatch the time from a loop
	// being ready to its start (see daemon/API.md).
	Tick     Latency `json:"tick"`
	Dispatch Latency `json:"dispatch"`
}

// TypeStats is one loop type's row of Stats.
type TypeStats struct {
	Type   string              `json:"type"`
	Counts map[loop.Status]int `json:"counts"` // retained loops by status
	Usage  loop.Usage          `json:"usage"`  // what the retained loops of the type consumed
	// MeanIterations is the mean iteration count of complete loops: how
	// many tries a passing loop of this type needs.
	MeanIterations float64 `json:"mean_iterations"`
	// Counters since the daemon started.
	Starts      int64 `json:"starts"`
	Completions int64 `json:"completions"`
	Failures    int64 `json:"failures"`
	Iterations  int64 `json:"iterations"`
}

// RateLimitStats sums the shared 429 backoff.
type RateLimitStats struct {
	Hits        int64           `json:"hits"`         // since the daemon started
	BlockedSecs float64         `json:"blocked_secs"` // since the daemon started
	State       ratelimit.State `json:"state"`        // as persisted now
	Blocked     bool            `json:"blocked"`      // the backoff holds now
}

// Latency summarises durations: the count since the daemon started, and
// quantiles over the most recent Window of them.
type Latency struct {
	Count  int64   `json:"count"`
	Window int     `json:"window"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// WebhookPayload is the JSON body loopr POSTs to a webhook (see the
// webhooks: setting): the journal event and the loop as it is when the
// delivery is prepared (normally the same instant).
type WebhookPayload struct {
	Event     string      `json:"event"` // created, a status (complete, failed, needs_human, …), rate_limited, tree_complete
	Seq       uint64      `json:"seq"`   // the event's journal sequence number: unique, increasing
	Time      time.Time   `json:"time"`
	From      loop.Status `json:"from,omitzero"`
	To        loop.Status `json:"to,omitzero"`
	Iteration int         `json:"iteration,omitzero"`
	Message   string      `json:"message,omitzero"`
	Loop      loop.Loop   `json:"loop"`
	// Action is the command that acts on the event: `loopr answer ID "…"`
	// (needs_human), `loopr reset ID` (failed), `git merge <plan branch>`
	// (tree_complete); "" for the others.
	Action string `json:"action,omitzero"`
}
