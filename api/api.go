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
	// Agent names the agent profile (loopr.yml agent:/agents:) the loop and
	// the loops it spawns run on; "" = its type's.
	Agent string `json:"agent,omitzero"`
	// Budget is the loop's own budget (a root's covers its tree); zero:
	// loops.<type>.budget, else for a root the default budget:.
	Budget loop.Budget `json:"budget,omitzero"`
	// DependsOn lists the loops (full ids, each must exist) the new loop
	// starts after: each one and every loop below it complete or
	// cancelled (`loopr add --after`).
	DependsOn []string `json:"depends_on,omitempty"`
	// Review makes every task of the new loop's tree wait for a person's
	// review when it passes (`loopr plan --review`).
	Review bool `json:"review,omitzero"`
	// Fanout runs the loop as that many best-of-N candidates (`loopr add
	// --fanout`); 0 = loops.<type>.fanout. The response is the first
	// candidate; its fanout field names the group.
	Fanout int `json:"fanout,omitzero"`
	// Agents gives the candidates their agent profiles in turn (`loopr
	// add --agents`); with no fanout, a list of two or more is a group of
	// one candidate per profile.
	Agents []string `json:"agents,omitempty"`
}

// BudgetRequest changes a loop's budget (`loopr budget`, POST
// /v1/loops/{id}/budget). A nil field keeps its value; 0 removes that ceiling.
type BudgetRequest struct {
	USD    *float64 `json:"usd,omitempty"`
	Tokens *int64   `json:"tokens,omitempty"`
}

// BudgetResult is the loop after the change, the loops it put back to
// pending (they waited in needs_human for the budget) and those it put in
// needs_human (a lowered budget already spent).
type BudgetResult struct {
	Loop    loop.Loop  `json:"loop"`
	Usage   loop.Usage `json:"tree_usage"`
	Resumed []string   `json:"resumed"`
	Held    []string   `json:"held"`
}

// TreeUsage is what a loop and all its descendants consumed (GET
// /v1/loops/{id}/usage; `tree_usage` in `loopr show --json`).
type TreeUsage struct {
	ID    string     `json:"id"`
	Usage loop.Usage `json:"tree_usage"`
	Loops int        `json:"loops"` // the loop and its descendants
}

// ProfileLimit is the rate-limit state of one agent profile (`loopr status`).
type ProfileLimit struct {
	Agent      string    `json:"agent"`
	Hits       int       `json:"hits"`
	Limited    bool      `json:"limited"`
	Recovering bool      `json:"recovering"`
	ResumeAt   time.Time `json:"resume_at,omitzero"`
	Since      time.Time `json:"since,omitzero"`
}

// AgentLimit is one agent profile's rate-limit state and the loops that
// wait in needs_human for it (`loopr limits`, GET /v1/limits).
type AgentLimit struct {
	ProfileLimit
	Configured    bool      `json:"configured"` // a profile of loopr.yml; false: only its stored state is left
	LastHit       time.Time `json:"last_hit,omitzero"`
	RecoveryUntil time.Time `json:"recovery_until,omitzero"` // end of the one-start-per-poll ramp
	Held          int       `json:"held"`                    // loops in needs_human (reason limit) waiting for it
}

// ClearLimitResult is the answer to POST /v1/limits/{agent}/clear (`loopr
// limits clear`): the profile's state before, and the loops that went
// back to pending from needs_human (reason limit).
type ClearLimitResult struct {
	Agent    string       `json:"agent"`
	Was      ProfileLimit `json:"was"`
	Released []string     `json:"released"`
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
	Prefix string        `json:"prefix,omitzero"` // ids that start with this
	Suffix string        `json:"suffix,omitzero"` // ids that end with this, in any case (a short id)
}

// ActionRequest carries the optional text of an action.
type ActionRequest struct {
	Reason   string `json:"reason,omitzero"`
	Feedback string `json:"feedback,omitzero"`
	// Answer is a person's reply to a loop that needs one (action answer).
	Answer string `json:"answer,omitzero"`
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
	ActionAnswer  = "answer" // needs_human → pending, with the reply in the next prompt
)

// Actions lists every action name.
var Actions = []string{ActionCancel, ActionReset, ActionPause, ActionResume, ActionApprove, ActionReject, ActionIterate, ActionAnswer}

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
	// Agent is the profile the loop's next iteration would run on: its
	// own, or a fallback while its own is rate limited.
	Agent string `json:"agent,omitzero"`
	// The tree term (scheduler.priority.tree_*), when on: the points it
	// added (TreeBoost + TreeAgeBoost are part of Priority), the estimated
	// seconds of work left in the loop's tree and in the waiting tree with
	// the least, and the minutes since the tree's root was created.
	TreeBoost      int     `json:"tree_boost,omitzero"`
	TreeAgeBoost   int     `json:"tree_age_boost,omitzero"`
	TreeLeft       float64 `json:"tree_left,omitzero"`
	TreeLeast      float64 `json:"tree_least,omitzero"`
	TreeAgeMinutes int     `json:"tree_age_minutes,omitzero"`
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
	// Tree says, with the tree term on, what it did to this loop's place:
	// the waiting loops of other trees it put first, e.g. `the tree term put
	// 2 loops of other trees first: 01J… "Add docs" (tree 01H…: 4m left,
	// tree +100, tree age +1) …`, or that it put none.
	Tree string `json:"tree,omitzero"`
	// Conflicts are the loop's predicted merge conflicts (the conflict
	// radar, computed when asked): against its plan branch's tip or
	// another live loop's branch. ConflictCheck says why they could not be
	// computed, when they could not (no git flow, git older than 2.38).
	Conflicts     []Conflict `json:"conflicts,omitempty"`
	ConflictCheck string     `json:"conflict_check,omitzero"`
}

// Conflicts is `loopr conflicts PLAN` (GET /v1/loops/{id}/conflicts): the
// conflict radar's dry-run merges of a plan's live loop branches against
// the plan branch's tip and against each other.
type Conflicts struct {
	Plan    string `json:"plan"`             // the plan (root loop) id
	Branch  string `json:"branch"`           // its integration branch; "" before it has one
	Commit  string `json:"commit,omitzero"`  // the branch's tip
	Live    int    `json:"live"`             // live loops with a branch
	Checked int    `json:"checked"`          // of those, branches with commits past the tip
	Ran     int    `json:"ran"`              // dry runs git performed (the rest were cached)
	Skipped int    `json:"skipped,omitzero"` // loop pairs not dry-run, over the per-scan bound
	// Conflicts lists each predicted conflict once; never null.
	Conflicts []Conflict `json:"conflicts"`
}

// Conflict is one predicted conflict: loop's branch against the plan tip
// (With "plan", Other the plan's id) or against another loop's branch
// (With "loop").
type Conflict struct {
	Loop        string   `json:"loop"`
	Title       string   `json:"title"`
	Branch      string   `json:"branch"`
	With        string   `json:"with"` // "plan" or "loop"
	Other       string   `json:"other"`
	OtherTitle  string   `json:"other_title"`
	OtherBranch string   `json:"other_branch"`
	Files       []string `json:"files"`
}

// Conflict.With values.
const (
	ConflictWithPlan = "plan"
	ConflictWithLoop = "loop"
)

// TypeUsage is running/cap for one loop type.
type TypeUsage struct {
	Type    string `json:"type"`
	Running int    `json:"running"`
	Cap     int    `json:"cap"`
}

// ProfileSandbox is the sandbox of one agent profile, as Status shows it.
type ProfileSandbox struct {
	Profile    string   `json:"profile"`
	Runner     string   `json:"runner"`                // none or bwrap
	Network    string   `json:"network,omitzero"`      // host, none or allow (bwrap only)
	AllowHosts []string `json:"allow_hosts,omitempty"` // what network allow admits
	Text       string   `json:"text"`                  // one line, e.g. "bwrap, network none"
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
	Store    string              `json:"store,omitzero"`
	Counts   map[loop.Status]int `json:"counts"`
	Running  int                 `json:"running"`
	MaxLoops int                 `json:"max_loops"`
	Types    []TypeUsage         `json:"types"`
	// RateLimit is the state of the limited profile that resumes last
	// (RateLimited: some profile is limited); Profiles lists every profile
	// that has been limited, Limits is their states for a client's Plan.
	RateLimit   ratelimit.State            `json:"rate_limit"`
	RateLimited bool                       `json:"rate_limited"`
	Recovering  bool                       `json:"recovering"`
	ResumeAt    time.Time                  `json:"resume_at,omitzero"`
	Profiles    []ProfileLimit             `json:"profiles,omitempty"`
	Limits      map[string]ratelimit.State `json:"limits,omitempty"`
	// Spent lists the trees whose budget is spent (root id → reason text).
	Spent map[string]string `json:"budget_spent,omitempty"`
	// SpentToday is what agents consumed since midnight (UTC), by the
	// iterations recorded today.
	SpentToday loop.Usage `json:"spent_today"`
	DiskFreeGB float64    `json:"disk_free_gb"`
	DiskLow    bool       `json:"disk_low"`
	DiskFull   bool       `json:"disk_full"` // below control.DiskFloorBytes free: no loop starts, new loops refused
	Accepting  bool       `json:"accepting"`
	Warning    string     `json:"warning,omitzero"`
	// Problems are what would fail every iteration of some loop types in
	// this workspace (`loopr config check`): those loops wait with reason
	// preflight. Empty when nothing is wrong.
	Problems []Problem `json:"problems"`
	// NoGit says why loops share the workspace directory and leaf loops
	// (ralph) run one at a time (reason no_git); "" when each loop gets a
	// git worktree.
	NoGit string `json:"no_git,omitzero"`
	// Containment is how the daemon keeps every process an iteration
	// starts within reach: "cgroup", "subreaper+scan" or "pgroup+scan".
	Containment string `json:"containment,omitzero"`
	// Sandbox says, per agent profile, where its agents run: "none", or
	// e.g. "bwrap, network allow (api.anthropic.com:443)".
	Sandbox []ProfileSandbox `json:"sandbox,omitempty"`
	// Policy is the scheduling policy in force (it follows hot reloads), so
	// a dashboard scores loops exactly as the daemon does.
	Policy *scheduler.Policy `json:"policy,omitempty"`
	// Durations are the learned iteration times by type and by type and
	// agent profile ("ralph", "ralph/claude"; seconds), with the tree term
	// on: what a dashboard estimates each tree's work left with.
	Durations scheduler.Durations `json:"durations,omitempty"`
	// NeedsYou lists the loops waiting for a person (status needs_human),
	// longest waiting first, at most MaxNeedsYou of them.
	NeedsYou []NeedsYou `json:"needs_you,omitzero"`
	// AwaitingApproval lists the plans that passed and wait for `loopr
	// approve` (or iterate, or reject), longest waiting first, at most
	// MaxNeedsYou of them.
	AwaitingApproval []Approval `json:"awaiting_approval,omitzero"`
	// AwaitingReview lists the tasks that passed and wait for a person's
	// review (`loopr approve`, iterate or reject), longest waiting first,
	// at most MaxNeedsYou of them.
	AwaitingReview []Approval `json:"awaiting_review,omitzero"`
	// ReadyToLand lists the plans whose whole tree is done and that were
	// not landed since (`loopr land`), oldest first, at most MaxNeedsYou.
	ReadyToLand []LandReady `json:"ready_to_land,omitzero"`
	// Trust, when set, says that loopr.yml has commands not trusted on
	// this machine (`loopr trust`); nil when nothing waits for trust.
	Trust *Trust `json:"trust,omitempty"`
	// Cluster, on an etcd store, lists the workers sharing its queue;
	// absent on the bbolt file.
	Cluster *Cluster `json:"cluster,omitempty"`
}

// Cluster is the workers of an etcd store (docs/several-machines.md).
type Cluster struct {
	Worker       string   `json:"worker"`    // this daemon's worker name ("" from the CLI without a daemon)
	Scheduler    string   `json:"scheduler"` // the elected scheduler, "" if none
	LeaseTTLSecs int      `json:"lease_ttl_secs"`
	Workers      []Worker `json:"workers"`
}

// Worker is one live worker: what it registered, whether it is the
// scheduler and how many loops it runs (the fields of cluster.WorkerInfo).
type Worker struct {
	Name      string    `json:"name"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Home      string    `json:"home"`
	Workspace string    `json:"workspace"`
	Repo      string    `json:"repo,omitempty"`
	Remote    string    `json:"remote,omitempty"`
	MaxLoops  int       `json:"max_loops"`
	Labels    []string  `json:"labels,omitempty"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	Scheduler bool      `json:"scheduler"`
	Running   int       `json:"running"`
}

// MaxNeedsYou bounds Status.NeedsYou.
const MaxNeedsYou = 50

// NeedsYou is one loop waiting for a person, and how to answer it.
type NeedsYou struct {
	ID     string           `json:"id"`
	Type   string           `json:"type"`
	Title  string           `json:"title"`
	Reason loop.NeedsReason `json:"reason"`
	Detail string           `json:"detail,omitzero"` // its first line, clipped
	Since  time.Time        `json:"since"`
	Action string           `json:"action"` // e.g. loopr answer 01J… "…"
}

// Trust is what of loopr.yml waits for `loopr trust`.
type Trust struct {
	File string `json:"file"`
	// Held: a reload of the file changed these commands; the daemon keeps
	// the configuration it had (trusted) until they are trusted. Not held:
	// the configuration in force is not trusted, and nothing of it runs —
	// no agent, validate command, hook, notify.command or webhook.
	Held bool `json:"held"`
	// Commands are the lines to trust ("loops.ralph.validate: make"): all
	// of the file's, or, held, those the change adds or removes.
	Commands []string  `json:"commands"`
	Since    time.Time `json:"since"`
	Text     string    `json:"text"`   // one line for people
	Action   string    `json:"action"` // the command to run: loopr trust
}

// Approval is one plan awaiting approval, and the commands that decide on
// it.
type Approval struct {
	ID    string    `json:"id"`
	Type  string    `json:"type"`
	Title string    `json:"title"`
	Since time.Time `json:"since"`
	// Actions are approve, iterate and reject, e.g. loopr approve 01J….
	Actions []string `json:"actions"`
}

// ApprovalActions are the commands that decide on a plan awaiting
// approval, naming it by ref: approve, iterate with feedback, reject.
func ApprovalActions(ref string) []string {
	return []string{"loopr approve " + ref, "loopr iterate " + ref + ` --feedback "…"`, "loopr reject " + ref}
}

// CommentRequest is a line comment (`loopr comment ID PATH:LINE TEXT`,
// POST /v1/loops/{id}/comments): on the line of PATH, a path relative to
// the repository's root, at the tip of the loop's branch (a plan's: its
// plan branch).
type CommentRequest struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Comment is a line comment as the loop it reached keeps it (the one
// that wrote the line), with that loop and the comment's state.
type Comment struct {
	// Loop is the loop the comment reached; Type, Title and Status are
	// its own, Status as it is now.
	Loop   string      `json:"loop"`
	Type   string      `json:"type"`
	Title  string      `json:"title,omitzero"`
	Status loop.Status `json:"status"`
	// State is "sent" while the comment waits for the loop's next
	// iteration, then "answered by iteration N (passed|failed)".
	State string `json:"state"`
	loop.Comment
}

// ReviewActions are the commands that decide on a task awaiting review,
// naming it by ref: look at the diff, then approve (merge), iterate with
// feedback or a line comment, reject.
func ReviewActions(ref string) []string {
	return []string{"loopr diff " + ref, "loopr approve " + ref, "loopr iterate " + ref + ` --feedback "…"`,
		"loopr comment " + ref + ` PATH:LINE "…"`, "loopr reject " + ref}
}

// Problem is one preflight problem: something that would fail every
// iteration of the loop types it names.
type Problem struct {
	Types     []string `json:"types"`      // the loop types affected
	TypesText string   `json:"types_text"` // for people: "all types" or "ralph" or "plan,ralph"
	Key       string   `json:"key"`        // the configuration key at fault
	What      string   `json:"what"`       // e.g. agent "claude" is not on PATH
	Fix       string   `json:"fix"`        // what to do about it
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
	// CodeForbidden (403): an MCP call with a token that is not its
	// loop's, or whose target lies outside the token's loop subtree.
	CodeForbidden = "forbidden"
	// Admission limits (a new loop is refused; retry later): 429.
	CodeQueueFull     = "queue_full"     // admission.max_pending loops already wait
	CodeQuotaExceeded = "quota_exceeded" // the owner has quotas.<owner>.max_pending loops waiting
)

// LandReady is a plan ready to land: its branch holds its whole tree.
type LandReady struct {
	ID     string    `json:"id"`
	Title  string    `json:"title"`
	Branch string    `json:"branch"`
	Into   string    `json:"into,omitzero"` // its base branch, where `loopr land` merges it
	Since  time.Time `json:"since"`         // when its tree was done
}

// LandRequest is `loopr land PLAN` (POST /v1/loops/{id}/land).
type LandRequest struct {
	// DryRun says what would happen and changes nothing.
	DryRun bool `json:"dry_run,omitzero"`
	// Into is the branch to land on; "": the plan's base branch (its
	// record's base.branch).
	Into string `json:"into,omitzero"`
	// Partial lands a plan whose tree is not done yet.
	Partial bool `json:"partial,omitzero"`
}

// LandResult is what `loopr land` did, or with DryRun would do.
type LandResult struct {
	Plan   string `json:"plan"`
	Branch string `json:"branch"` // the plan branch
	Into   string `json:"into"`   // the base branch
	// Mode is fast-forward, merge or up-to-date (loop.LandFastForward, …).
	Mode   string `json:"mode"`
	From   string `json:"from"`            // the plan branch's tip
	Onto   string `json:"onto"`            // the base branch's tip before
	Result string `json:"result,omitzero"` // what the base branch moved (or would move) to; "" on a dry-run merge
	// Commits are the commits the base branch lacked, newest first
	// ("<short> <subject>", at most 50); CommitCount counts them all.
	Commits     []string `json:"commits"`
	CommitCount int      `json:"commit_count"`
	Files       []string `json:"files"` // the files the base branch's tree changes
	// Checkout is the worktree that has the base branch checked out, ""
	// when none (the ref was moved with update-ref).
	Checkout string          `json:"checkout,omitzero"`
	Evidence []loop.Evidence `json:"evidence,omitempty"` // merge.validate on the result
	Steps    []string        `json:"steps"`              // what was done, one line each
	DryRun   bool            `json:"dry_run,omitzero"`
}

// ManualRequest (POST /v1/loops/{id}/manual) journals the work a person
// did by hand on a paused loop (`loopr attach`): the commit loopr made of
// it on the loop's branch ("" when nothing changed), at its iteration.
type ManualRequest struct {
	Iteration int    `json:"iteration"`
	Branch    string `json:"branch,omitzero"`
	Commit    string `json:"commit,omitzero"`
}
