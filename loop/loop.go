// Package loop holds loopr's domain types — the loop record, its type and
// status, events — and the pure state machine that says which status changes
// are legal. It imports only the standard library: every other package points
// down toward this one.
package loop

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ID identifies a loop. New IDs are ULIDs (see control.NewID), so they sort
// by creation time.
type ID = string

// Type is a loop type: one of the four built-in types or a user type from loopr.yml.
type Type = string

// The built-in loop types, from the root of a tree to its leaves.
const (
	Plan  Type = "plan"
	Spec  Type = "spec"
	Phase Type = "phase"
	Ralph Type = "ralph"
)

// BuiltinTypes lists the built-in types in hierarchy order.
var BuiltinTypes = []Type{Plan, Spec, Phase, Ralph}

// ChildType returns the type of the loops an artifact of type t spawns, and
// false for types that spawn nothing (ralph and user types).
func ChildType(t Type) (Type, bool) {
	switch t {
	case Plan:
		return Spec, true
	case Spec:
		return Phase, true
	case Phase:
		return Ralph, true
	}
	return "", false
}

// Lease marks a loop as owned by a running daemon. PID and PIDStart identify
// the agent's process group so a restarted daemon can kill what a crashed one left.
type Lease struct {
	Owner     string    `json:"owner"`
	ExpiresAt time.Time `json:"expires_at"`
	PID       int       `json:"pid,omitempty"`
	PIDStart  uint64    `json:"pid_start,omitempty"`
}

// Loop is the durable record of one loop (SPEC §2). Zero-valued optional
// fields are omitted from JSON; the set of names is stable.
type Loop struct {
	ID            ID        `json:"id"`
	Type          Type      `json:"type"`
	Status        Status    `json:"status"`
	Parent        ID        `json:"parent,omitzero"`
	Depth         int       `json:"depth"`
	TriggeredBy   string    `json:"triggered_by,omitzero"`
	Task          string    `json:"task,omitzero"`
	Title         string    `json:"title,omitzero"`
	Iteration     int       `json:"iteration"`
	MaxIterations int       `json:"max_iterations"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	StartedAt     time.Time `json:"started_at,omitzero"`
	FinishedAt    time.Time `json:"finished_at,omitzero"`
	RunnableAt    time.Time `json:"runnable_at,omitzero"`
	Deadline      time.Time `json:"deadline,omitzero"`
	Artifact      string    `json:"artifact,omitzero"`
	Workdir       string    `json:"workdir,omitzero"`
	Feedback      string    `json:"feedback,omitzero"`
	Lease         *Lease    `json:"lease,omitempty"`
	FairnessKey   string    `json:"fairness_key,omitzero"`
	ConflictKey   string    `json:"conflict_key,omitzero"`
	CostHint      float64   `json:"cost_hint,omitzero"`
	Owner         string    `json:"owner,omitzero"`
	Reason        string    `json:"reason,omitzero"`

	// Agent names the agent profile (loopr.yml `agents:`) the loop runs
	// on; empty: its type's profile, else the default `agent:`.
	Agent string `json:"agent,omitzero"`
	// Usage sums what the loop's iterations consumed, from the agents'
	// structured output.
	Usage Usage `json:"usage,omitzero"`
	// Budget is the loop's own ceiling (a plan's covers its whole tree);
	// zero fields mean none.
	Budget Budget `json:"budget,omitzero"`
	// Needs says why a loop in NeedsHuman waits for a person.
	Needs *Needs `json:"needs,omitempty"`
	// Answer is a person's reply (`loopr answer`), put in the next prompt
	// and cleared once an iteration has run with it.
	Answer string `json:"answer,omitzero"`
	// RateLimitStreak counts rate-limit waits in a row (reset by any
	// iteration that ran to an outcome); a guard against waiting forever.
	RateLimitStreak int `json:"rate_limit_streak,omitzero"`
	// TransientRetries counts transient provider errors retried in the
	// current iteration without spending it.
	TransientRetries int `json:"transient_retries,omitzero"`
	// Stalls counts consecutive iterations killed for a stall.
	Stalls int `json:"stalls,omitzero"`
	// FailureFingerprint and FailureRepeats track consecutive failures
	// that look the same (no-progress detection).
	FailureFingerprint string `json:"failure_fingerprint,omitzero"`
	FailureRepeats     int    `json:"failure_repeats,omitzero"`
	// Branch is the git branch the loop works on, once it has one: a
	// ralph (or user type) loop's own branch, a plan's integration branch.
	Branch string `json:"branch,omitzero"`
	// Base is the branch and commit Branch was made from, when loopr
	// made it.
	Base Base `json:"base,omitzero"`
	// DependsOn lists the loops this one starts after (usually earlier
	// siblings: an artifact's `**Depends on:**` line, the parent type's
	// `children: sequential`, or `loopr add --after`). Each must be done
	// first: see DependencyMet.
	DependsOn []ID `json:"depends_on,omitempty"`
	// SubtreeDoneAt is when this loop and every loop below it were found
	// complete or cancelled; zero while any of them is not. Set in the
	// transaction that finished the last of them (control.Settle), so
	// the depends_on gate reads one record, never a subtree.
	SubtreeDoneAt time.Time `json:"subtree_done_at,omitzero"`
	// Commit is the commit of Branch whose iteration passed: what the
	// merge queue merges into the plan branch (never a later tip).
	Commit string `json:"commit,omitzero"`
	// Evidence is what validated the last iteration that passed: each
	// validate command, where and on which commit it ran, and then the
	// merge.validate commands that admitted the branch into the plan
	// branch.
	Evidence []Evidence `json:"evidence,omitempty"`
	// Review makes every task of this plan's tree wait for a person's
	// review when it passes (`loopr plan --review`), as
	// loops.<type>.require_review does for a type.
	Review bool `json:"review,omitzero"`
	// Comments are people's line comments that reached this loop (see
	// Comment), oldest first, at most MaxComments.
	Comments []Comment `json:"comments,omitempty"`
	// Landed says when `loopr land` last merged this plan's branch into
	// its base branch, and how; zero until then.
	Landed Landed `json:"landed,omitzero"`
	// Session is the agent session of the loop's latest run (Session):
	// what the next run resumes, and what `loopr attach` opens.
	Session *Session `json:"session,omitempty"`
	// Progress is what the loop's agent last reported (the MCP tool
	// report_progress): shown in the TUI and the web dashboard. Cleared
	// when a new iteration starts.
	Progress *Progress `json:"progress,omitempty"`
	// Fanout is the best-of-N group this loop is a candidate of (issue 25);
	// nil for a loop of its own.
	Fanout *Fanout `json:"fanout,omitempty"`
}

// Progress is an agent's report of how far it is.
type Progress struct {
	Text    string    `json:"text"`
	Percent int       `json:"percent"` // 0–100; -1: not given
	At      time.Time `json:"at"`
}

// Fanout names a best-of-N group: N candidate loops of one task, of which
// only the winner merges.
type Fanout struct {
	Group string `json:"group"` // the id shared by the candidates (the first candidate's id)
	Index int    `json:"index"` // 1..N
	Of    int    `json:"of"`    // N
	// Winner is set on every candidate once the group is decided.
	Winner string `json:"winner,omitzero"`
}

// Landed records a landing (`loopr land`): the branch merged into, the
// commit that branch was moved to, how (LandFastForward or LandMerge), the
// plan branch's commit that landed, and when.
type Landed struct {
	Into   string    `json:"into"`
	Commit string    `json:"commit"`
	Mode   string    `json:"mode"`
	From   string    `json:"from,omitzero"`
	At     time.Time `json:"at"`
}

// How a landing moved the base branch (Landed.Mode).
const (
	LandFastForward = "fast-forward"
	LandMerge       = "merge"
	LandUpToDate    = "up-to-date" // the base branch already held the plan branch
)

// ReadyToLand reports whether l is a root plan whose whole tree is done
// and that was not landed since: `loopr status` lists it.
func (l *Loop) ReadyToLand() bool {
	return l.Type == Plan && l.Parent == "" && l.Status == Complete && !l.SubtreeDoneAt.IsZero() &&
		(l.Landed.At.IsZero() || l.Landed.At.Before(l.SubtreeDoneAt))
}

// Evidence is one validation command's run: what ran, how it ended, how
// long it took, the commit it validated and where.
type Evidence struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	Commit     string `json:"commit,omitzero"`
	Where      string `json:"where"`
}

// Where a validation command ran (Evidence.Where).
const (
	// WhereWorktree is the loop's own worktree, as the agent left it.
	WhereWorktree = "worktree"
	// WhereClean is a fresh checkout of the committed tree
	// (loops.<type>.validate_in: clean).
	WhereClean = "clean"
	// WhereMerge is the integration worktree, on the result of merging
	// the branch into the plan branch (merge.validate).
	WhereMerge = "merge"
)

// MaxEvidence bounds a record's evidence list, and MaxEvidenceCommand the
// command text each entry keeps.
const (
	MaxEvidence        = 64
	MaxEvidenceCommand = 1024
)

// AddEvidence appends ev to l's evidence, the commands clipped to
// MaxEvidenceCommand bytes and the list to the last MaxEvidence entries.
func (l *Loop) AddEvidence(ev ...Evidence) {
	for _, e := range ev {
		if len(e.Command) > MaxEvidenceCommand {
			e.Command = strings.ToValidUTF8(e.Command[:MaxEvidenceCommand], "")
		}
		l.Evidence = append(l.Evidence, e)
	}
	if n := len(l.Evidence); n > MaxEvidence {
		l.Evidence = slices.Clone(l.Evidence[n-MaxEvidence:])
	}
}

// Base is where a loop's branch started: the branch checked out (or
// "" for a detached HEAD) and the commit.
type Base struct {
	Branch string `json:"branch,omitzero"`
	Commit string `json:"commit,omitzero"`
}

// String reads "main@1a2b3c4d5e6f" (the commit clipped to 12 characters),
// "" for none.
func (b Base) String() string {
	c := ShortCommit(b.Commit)
	switch {
	case b.Branch == "":
		return c
	case c == "":
		return b.Branch
	}
	return b.Branch + "@" + c
}

// ShortID is the part of an id that people read and type, and that a
// branch name carries: the last 8 characters of a ULID (its random part,
// unique in practice), lowercased; any other id whole, without leading
// '-'. Wherever a command takes an id, a short id works too (as a unique
// suffix).
func ShortID(id ID) string {
	if isULID(id) {
		return strings.ToLower(id[len(id)-ShortIDLen:])
	}
	if s := strings.TrimLeft(id, "-"); s != "" {
		return s
	}
	return "loop"
}

// ShortIDs writes every ULID in text (a command or message for people)
// that stands as a word as its short id.
func ShortIDs(text string) string {
	const n = 26
	word := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
	var b strings.Builder
	last := 0
	for i := 0; i+n <= len(text); i++ {
		if (i > 0 && word(text[i-1])) || (i+n < len(text) && word(text[i+n])) || !isULID(text[i:i+n]) {
			continue
		}
		b.WriteString(text[last:i])
		b.WriteString(ShortID(text[i : i+n]))
		last = i + n
		i += n - 1
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// ShortIDLen is the length of a ULID's short id.
const ShortIDLen = 8

func isULID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// MaxDependsOn bounds a loop's depends_on list.
const MaxDependsOn = 256

// DependencyMet reports whether l, named in another loop's depends_on,
// lets that loop start: l and its whole subtree are complete or cancelled
// (SubtreeDoneAt), or l itself was cancelled (a cancelled dependency
// counts as done, whatever it leaves below it).
func (l *Loop) DependencyMet() bool { return !l.SubtreeDoneAt.IsZero() || l.Status == Cancelled }

// Usage is what agents consumed: tokens by kind, dollars and agent time.
type Usage struct {
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CacheReadTokens     int64   `json:"cache_read_tokens"`
	CacheCreationTokens int64   `json:"cache_creation_tokens"`
	CostUSD             float64 `json:"cost_usd"`
	AgentSeconds        float64 `json:"agent_seconds"`
}

// Add returns u plus v; every sum saturates (usage.go).
func (u Usage) Add(v Usage) Usage {
	u.InputTokens = addTokens(u.InputTokens, v.InputTokens)
	u.OutputTokens = addTokens(u.OutputTokens, v.OutputTokens)
	u.CacheReadTokens = addTokens(u.CacheReadTokens, v.CacheReadTokens)
	u.CacheCreationTokens = addTokens(u.CacheCreationTokens, v.CacheCreationTokens)
	u.CostUSD = addAmount(u.CostUSD, v.CostUSD, MaxLedgerUSD)
	u.AgentSeconds = addAmount(u.AgentSeconds, v.AgentSeconds, MaxLedgerSeconds)
	return u
}

// Tokens is every token counted, of all kinds (saturating).
func (u Usage) Tokens() int64 {
	return addTokens(addTokens(u.InputTokens, u.OutputTokens), addTokens(u.CacheReadTokens, u.CacheCreationTokens))
}

// Budget is a spending ceiling; a zero field is no ceiling of that kind.
type Budget struct {
	USD    float64 `json:"usd,omitzero"`
	Tokens int64   `json:"tokens,omitzero"`
}

// Spent reports whether u has reached b in dollars or tokens.
func (b Budget) Spent(u Usage) bool {
	return b.USD > 0 && u.CostUSD >= b.USD || b.Tokens > 0 && u.Tokens() >= b.Tokens
}

// NeedsReason says why a loop needs a person.
type NeedsReason string

// The reasons a loop waits in NeedsHuman.
const (
	NeedsBudget     NeedsReason = "budget"      // its own or its tree's budget is spent
	NeedsNoProgress NeedsReason = "no_progress" // the same failure repeated
	NeedsStalled    NeedsReason = "stalled"     // the agent stalled twice in a row
	NeedsQuestion   NeedsReason = "question"    // the agent asked a question
	NeedsLimit      NeedsReason = "limit"       // its agent profile is limited for long, with no fallback
	NeedsHook       NeedsReason = "hook"        // a hook with on_error: suspend failed
)

// HookHold starts the Reason of a pending loop that a failing before_run
// hook (on_error: block) holds back: the backoff gate shows it.
const HookHold = "hook "

// SetupHold starts the Reason of a pending loop whose agent could not be
// started (a secret that cannot be read, a worktree that cannot be made):
// the backoff gate of `loopr why` shows it.
const SetupHold = "could not start the agent: "

// Held reports whether reason is one a start clears: the hold of a hook
// or of a failed setup, said again if it happens again.
func Held(reason string) bool {
	return strings.HasPrefix(reason, HookHold) || strings.HasPrefix(reason, SetupHold)
}

// NeedsReasons lists every NeedsReason.
var NeedsReasons = []NeedsReason{NeedsBudget, NeedsNoProgress, NeedsStalled, NeedsQuestion, NeedsLimit, NeedsHook}

// Needs is why a loop waits for a person, and since when.
type Needs struct {
	Reason NeedsReason `json:"reason"`
	Detail string      `json:"detail,omitzero"`
	Since  time.Time   `json:"since"`
}

// NeedsAction is the command that resumes l, a loop in needs_human: for a
// spent budget, `loopr budget` on the loop whose budget it is (the root of
// a tree whose budget is spent, named in the detail as "(root ID)", else l
// itself; `loopr answer` would only put it back behind the same gate); for
// a long limit, `loopr limits clear` of the profile the detail names after
// LimitedAgent (it also resumes by itself when the limit ends); otherwise
// `loopr answer`.
func (l *Loop) NeedsAction() string {
	if n := l.Needs; n != nil && n.Reason == NeedsLimit {
		if rest, ok := strings.CutPrefix(n.Detail, LimitedAgent); ok {
			if name, _, _ := strings.Cut(rest, " "); ValidTypeName(name) {
				return "loopr limits clear " + name
			}
		}
	}
	if n := l.Needs; n != nil && n.Reason == NeedsBudget {
		holder := l.ID
		if i := strings.LastIndex(n.Detail, TreeBudgetRoot); i >= 0 {
			if id := strings.TrimSuffix(n.Detail[i+len(TreeBudgetRoot):], ")"); ValidID(id) {
				holder = id
			}
		}
		return "loopr budget " + holder + " --usd N"
	}
	return fmt.Sprintf("loopr answer %s \"…\"", l.ID)
}

// LimitedAgent begins the detail of a loop held for a long limit, followed
// by the profile's name and a space.
const LimitedAgent = "agent "

// TreeBudgetRoot precedes the root's id, closed by ")", in the detail of a
// loop held because its tree's budget is spent.
const TreeBudgetRoot = " (root "

// Scheduled reports whether l's runnable_at is a start time it was made
// with (`loopr add --at/--in`) rather than a retry's backoff: it has never
// started.
func (l *Loop) Scheduled() bool { return l.Iteration <= 1 && l.StartedAt.IsZero() }

// Root reports whether l has no parent.
func (l *Loop) Root() bool { return l.Parent == "" }

// ValidID reports whether s is safe to use as a loop id, including as a path
// element under the home directory: 1–64 characters of [A-Za-z0-9_-], not
// starting with '-'.
func ValidID(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// ValidTypeName reports whether s can name a loop type: lowercase letters,
// digits and '-' or '_', starting with a letter, at most 32 characters.
func ValidTypeName(s string) bool {
	if s == "" || len(s) > 32 || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0
}

// Validate checks the fields every stored record must have.
func (l *Loop) Validate() error {
	switch {
	case !ValidID(l.ID):
		return fmt.Errorf("id %q: must be 1-64 characters of letters, digits, '-' or '_'", l.ID)
	case !ValidTypeName(l.Type):
		return fmt.Errorf("loop %s: type %q: not a valid type name", l.ID, l.Type)
	case !l.Status.Valid():
		return fmt.Errorf("loop %s: status %q: unknown status", l.ID, l.Status)
	case l.Parent != "" && !ValidID(l.Parent):
		return fmt.Errorf("loop %s: parent %q: not a valid id", l.ID, l.Parent)
	case l.Parent == l.ID:
		return fmt.Errorf("loop %s: parent: a loop cannot be its own parent", l.ID)
	case l.Iteration < 1:
		return fmt.Errorf("loop %s: iteration %d: must be >= 1", l.ID, l.Iteration)
	case l.MaxIterations < 1:
		return fmt.Errorf("loop %s: max_iterations %d: must be >= 1", l.ID, l.MaxIterations)
	case l.Depth < 0:
		return fmt.Errorf("loop %s: depth %d: must be >= 0", l.ID, l.Depth)
	case l.CreatedAt.IsZero():
		return fmt.Errorf("loop %s: created_at: missing", l.ID)
	case len(l.DependsOn) > MaxDependsOn:
		return fmt.Errorf("loop %s: depends_on: %d loops, at most %d", l.ID, len(l.DependsOn), MaxDependsOn)
	case len(l.Evidence) > MaxEvidence:
		return fmt.Errorf("loop %s: evidence: %d entries, at most %d", l.ID, len(l.Evidence), MaxEvidence)
	case len(l.Comments) > MaxComments:
		return fmt.Errorf("loop %s: comments: %d, at most %d", l.ID, len(l.Comments), MaxComments)
	}
	for _, d := range l.DependsOn {
		switch {
		case !ValidID(d):
			return fmt.Errorf("loop %s: depends_on %q: not a valid id", l.ID, d)
		case d == l.ID:
			return fmt.Errorf("loop %s: depends_on: a loop cannot depend on itself", l.ID)
		}
	}
	return nil
}

// ShortCommit clips a commit id to the 12 characters people read (as
// git's abbreviated ids); a shorter string is returned as it is.
func ShortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
