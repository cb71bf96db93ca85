// Package api defines loopr's wire types: the JSON bodies of the daemon's
// HTTP API (SPEC §9) and the stable --json output of the CLI. It holds no
// behaviour; the control package produces these values and the client
// package carries them over the socket.
package api

import (
	"time"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/ratelimit"
	"github.com/loopr-dev/loopr/scheduler"
)

// ProtocolVersion is checked by clients on connect; bump it on any
// incompatible change to these types or the routes.
// Protocol 2: POST /v1/loops/batch answers per-item results.
const ProtocolVersion = 2

// CreateRequest asks for a new loop (`loopr add`, `loopr plan`, POST /v1/loops).
type CreateRequest struct {
	Type          string    `json:"type"`
	Parent        string    `json:"parent,omitzero"`
	Task          string    `json:"task,omitzero"`
	Title         string    `json:"title,omitzero"`
	MaxIterations int       `json:"max_iterations,omitzero"`
	RunnableAt    time.Time `json:"runnable_at,omitzero"`
	Deadline      time.Time `json:"deadline,omitzero"`
	FairnessKey   string    `json:"fairness_key,omitzero"`
	ConflictKey   string    `json:"conflict_key,omitzero"`
	CostHint      float64   `json:"cost_hint,omitzero"`
	Owner         string    `json:"owner,omitzero"`
}

// BatchRequest creates several loops at once (POST /v1/loops/batch). Each
// item is admitted or refused on its own (partial success); parents must
// exist before the batch.
type BatchRequest struct {
	Loops []CreateRequest `json:"loops"`
}

// BatchResult reports every item of a batch, in request order.
type BatchResult struct {
	Created int         `json:"created"`
	Failed  int         `json:"failed"`
	Results []BatchItem `json:"results"`
}

// BatchItem is the outcome of one item of a batch: the loop it created, or
// the error that refused it (its message names the field, as for
// POST /v1/loops).
type BatchItem struct {
	Index int        `json:"index"`
	ID    string     `json:"id,omitzero"`
	Loop  *loop.Loop `json:"loop,omitempty"`
	Error *ErrorBody `json:"error,omitempty"`
}

// ListRequest filters `loopr list`. Empty fields match everything.
type ListRequest struct {
	Status []loop.Status `json:"status,omitzero"`
	Type   string        `json:"type,omitzero"`
	Parent string        `json:"parent,omitzero"`
}

// ActionRequest carries the optional text of an action.
type ActionRequest struct {
	Reason   string `json:"reason,omitzero"`
	Feedback string `json:"feedback,omitzero"`
}

// Actions a user can take on a loop (POST /v1/loops/{id}/{action}).
const (
	ActionCancel  = "cancel"
	ActionReset   = "reset"
	ActionPause   = "pause"
	ActionResume  = "resume"
	ActionApprove = "approve"
	ActionReject  = "reject"
	ActionIterate = "iterate"
)

// Actions lists every action name.
var Actions = []string{ActionCancel, ActionReset, ActionPause, ActionResume, ActionApprove, ActionReject, ActionIterate}

// ActionResult reports what an action changed: the loop itself and every
// other loop it touched (a cancel cascades to descendants).
type ActionResult struct {
	Loop     loop.Loop `json:"loop"`
	Affected []string  `json:"affected"`
}

// ImportResult reports how many loops an import stored (POST /v1/import).
type ImportResult struct {
	Imported int `json:"imported"`
}

// SchedRow is one row of `loopr debug scheduler --json` (SPEC §4). The field
// set is stable.
type SchedRow struct {
	ID           string      `json:"id"`
	Type         string      `json:"type"`
	Status       loop.Status `json:"status"`
	Title        string      `json:"title"`
	Priority     int         `json:"priority"`
	Base         int         `json:"base"`
	AgeBoost     int         `json:"age_boost"`
	Depth        int         `json:"depth"`
	DepthBoost   int         `json:"depth_boost"`
	Iteration    int         `json:"iteration"`
	RetryPenalty int         `json:"retry_penalty"`
	Runnable     bool        `json:"runnable"`
	Reasons      []string    `json:"reasons"`
	ReasonText   []string    `json:"reason_text"`
	AgeSeconds   int64       `json:"age_seconds"`
	// Scheduling policy (the policy issue): the type's tier, and with
	// fairness on the loop's fairness key, the key's accumulated cost when
	// the scheduler reached the row, and the loop's estimated cost (seconds).
	Tier        int     `json:"tier,omitzero"`
	FairnessKey string  `json:"fairness_key,omitzero"`
	KeyUsed     float64 `json:"key_used,omitzero"`
	Cost        float64 `json:"cost,omitzero"`
}

// SchedulerView is the debug plan at one instant (GET /v1/scheduler).
type SchedulerView struct {
	Now      time.Time  `json:"now"`
	Waiting  int        `json:"waiting"`
	Eligible int        `json:"eligible"`
	Running  int        `json:"running"`
	Slots    int        `json:"slots"`
	Rows     []SchedRow `json:"rows"`
}

// Gate is one scheduling check for a loop, passed or not, with its numbers.
type Gate struct {
	Code string `json:"code"`
	OK   bool   `json:"ok"`
	Text string `json:"text"`
}

// Why explains one loop's priority and every gate (GET /v1/loops/{id}/why).
type Why struct {
	Loop       loop.Loop `json:"loop"`
	Now        time.Time `json:"now"`
	Scheduled  bool      `json:"scheduled"` // false when the loop is not waiting
	Row        SchedRow  `json:"row"`
	AgeMinutes int       `json:"age_minutes"`
	Formula    string    `json:"formula"`
	Gates      []Gate    `json:"gates"`
}

// TypeUsage is running/cap for one loop type.
type TypeUsage struct {
	Type    string `json:"type"`
	Running int    `json:"running"`
	Cap     int    `json:"cap"`
}

// Status is `loopr status` (GET /v1/status).
type Status struct {
	Daemon     bool      `json:"daemon"`
	PID        int       `json:"pid,omitzero"`
	Version    string    `json:"version"`
	Protocol   int       `json:"protocol"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	UptimeSecs int64     `json:"uptime_secs"`
	Home       string    `json:"home"`
	Workspace  string    `json:"workspace"`
	// Store is where the records are: "bbolt <file>" or "etcd <endpoints> <prefix>".
	Store       string              `json:"store,omitzero"`
	Counts      map[loop.Status]int `json:"counts"`
	Running     int                 `json:"running"`
	MaxLoops    int                 `json:"max_loops"`
	Types       []TypeUsage         `json:"types"`
	RateLimit   ratelimit.State     `json:"rate_limit"`
	RateLimited bool                `json:"rate_limited"`
	Recovering  bool                `json:"recovering"`
	ResumeAt    time.Time           `json:"resume_at,omitzero"`
	DiskFreeGB  float64             `json:"disk_free_gb"`
	DiskLow     bool                `json:"disk_low"`
	DiskFull    bool                `json:"disk_full"` // below control.DiskFloorBytes free: no loop starts, new loops refused
	Accepting   bool                `json:"accepting"`
	Warning     string              `json:"warning,omitzero"`
	// Policy is the scheduling policy in force (it follows hot reloads), so
	// a dashboard scores loops exactly as the daemon does.
	Policy *scheduler.Policy `json:"policy,omitempty"`
}

// Error is the body of every API error: {"error": {"code": ..., "message": ...}}.
type Error struct {
	Err ErrorBody `json:"error"`
}

// ErrorBody is the inside of Error.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes with their HTTP statuses.
const (
	CodeInvalid     = "invalid"     // 400
	CodeNotFound    = "not_found"   // 404
	CodeConflict    = "conflict"    // 409: illegal transition, id exists
	CodeTooLarge    = "too_large"   // 413
	CodeUnavailable = "unavailable" // 503: disk full, shutting down
	CodeInternal    = "internal"    // 500
	// CodeUnauthorized (401): a request on the TCP listener without the
	// bearer token.
	CodeUnauthorized = "unauthorized"
	// Admission limits (a new loop is refused; retry later): 429.
	CodeQueueFull     = "queue_full"     // admission.max_pending loops already wait
	CodeQuotaExceeded = "quota_exceeded" // the owner has quotas.<owner>.max_pending loops waiting
)
