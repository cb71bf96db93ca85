package scheduler

import (
	"fmt"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/loop"
)

// Code is a stable, machine-readable reason why a waiting loop does not
// start now. Scripts match on codes (`loopr debug scheduler --json`); the
// Text of a Reason is for people and may change.
type Code string

// The reason codes, in the order Plan checks the gates. The first group says
// the loop is not ready; the second (rate_limited and the caps) only that
// there is no room for it now.
const (
	Paused           Code = "paused"            // the user paused it
	NeedsHuman       Code = "needs_human"       // it waits for a person's answer (`loopr answer`)
	Orphaned         Code = "orphaned"          // its parent record does not exist
	ParentIncomplete Code = "parent_incomplete" // its parent is not complete
	ArtifactMissing  Code = "artifact_missing"  // the parent artifact that spawned it is missing
	DependsOn        Code = "depends_on"        // a loop of its depends_on is not done (its whole subtree complete or cancelled)
	Backoff          Code = "backoff"           // runnable_at is in the future (retry backoff, or scheduled with --at/--in: the text says which)
	DeadlinePassed   Code = "deadline_passed"   // its deadline is past; the manager expires it
	Budget           Code = "budget"            // its own budget, or its tree's, is spent
	DiskLow          Code = "disk_low"          // free disk space is below storage.disk_quota_min_gb
	Untrusted        Code = "untrusted"         // loopr.yml's commands are not trusted on this machine (`loopr trust`)
	Preflight        Code = "preflight"         // every iteration of its type would fail here (agent or validate program missing, ...)
	RateLimited      Code = "rate_limited"      // its agent profile (and every fallback) is rate limited, or in its one-start-per-poll recovery
	GlobalCap        Code = "global_cap"        // concurrency.max_loops loops already run or start
	TypeCap          Code = "type_cap"          // the per-type cap of its type is reached
	TierCap          Code = "tier_cap"          // tier N already runs N loops
	Quota            Code = "quota"             // its owner runs quotas.<owner>.max_running loops
	Conflict         Code = "conflict"          // a loop holding the same conflict group and key runs or starts
	NoGit            Code = "no_git"            // no git worktrees: a loop sharing the workspace directory runs or starts
)

// Codes lists every reason code in gate order.
var Codes = []Code{Paused, NeedsHuman, Orphaned, ParentIncomplete, ArtifactMissing, DependsOn, Backoff, DeadlinePassed, Budget, DiskLow,
	Untrusted, Preflight, RateLimited, GlobalCap, TypeCap, TierCap, Quota, Conflict, NoGit}

// Capacity reports whether c only says "no room now" (rate limit, caps,
// quota, a conflicting holder) rather than "not ready": a loop held back by
// capacity gates alone is eligible and starts as soon as room frees up.
func (c Code) Capacity() bool {
	switch c {
	case RateLimited, GlobalCap, TypeCap, TierCap, Quota, Conflict, NoGit:
		return true
	}
	return false
}

// Reason is one failing gate: a stable code and a text with the numbers,
// e.g. {type_cap, "type cap ralph 50/50"}.
type Reason struct {
	Code Code   `json:"code"`
	Text string `json:"text"`
}

func (r Reason) String() string { return r.Text }

// Fixed texts.
const (
	pausedText   = "paused"
	diskLowText  = "disk low"
	recoveryText = "rate-limit recovery: one start per poll"
	noGitText    = "no git worktrees: these loops share the workspace directory, so one runs at a time"
)

// parentText holds "parent incomplete (<status>)" for every known status, so
// the common case allocates nothing.
var parentText = func() map[loop.Status]string {
	m := make(map[loop.Status]string, len(loop.Statuses))
	for _, st := range loop.Statuses {
		m[st] = "parent incomplete (" + string(st) + ")"
	}
	return m
}()

func parentIncompleteText(st loop.Status) string {
	if t, ok := parentText[st]; ok {
		return t
	}
	if st == "" {
		return "parent incomplete (status unknown)"
	}
	return "parent incomplete (" + string(st) + ")"
}

// needsText reads "needs you (no_progress): <detail>", the detail clipped
// to one line of at most 120 bytes.
func needsText(n *loop.Needs) string {
	if n == nil {
		return "needs you"
	}
	t := "needs you (" + string(n.Reason) + ")"
	d := n.Detail
	if i := strings.IndexAny(d, "\r\n"); i >= 0 {
		d = d[:i] + " …"
	}
	if len(d) > 120 {
		d = strings.ToValidUTF8(d[:120], "") + "…"
	}
	if d != "" {
		t += ": " + d
	}
	return t
}

func orphanedText(parent loop.ID) string { return "parent " + parent + " not found" }

func artifactMissingText(path string) string {
	if path == "" {
		return "artifact missing"
	}
	return "artifact missing (" + path + ")"
}

// maxDepsText is how many dependencies a depends_on text names.
const maxDepsText = 3

// dependsText reads "waits for 01JD… (running), 01JE… (complete, not all
// loops below it)": the dependencies not met, the first maxDepsText of them.
func dependsText(deps []Dep) string {
	var b strings.Builder
	b.WriteString("waits for ")
	n := 0
	for _, d := range deps {
		if d.Met {
			continue
		}
		if n++; n > maxDepsText {
			continue
		}
		if n > 1 {
			b.WriteString(", ")
		}
		b.WriteString(d.ID)
		switch d.Status {
		case loop.Complete:
			b.WriteString(" (complete, not all loops below it)")
		default:
			b.WriteString(" (" + string(d.Status) + ")")
		}
	}
	if n > maxDepsText {
		fmt.Fprintf(&b, " and %d more", n-maxDepsText)
	}
	return b.String()
}

// backoffText reads "backoff until 12:04:31 (12s)" after a failure, or
// "scheduled for 12:04:31 (10m)" for a loop made to start later, with the
// date when the instant is not on now's day. Times show in now's location.
func backoffText(l *loop.Loop, now time.Time) string {
	what := "backoff until "
	if l.Scheduled() {
		what = "scheduled for "
	}
	t := what + clock(l.RunnableAt, now) + " (" + Wait(l.RunnableAt.Sub(now)) + ")"
	if strings.HasPrefix(l.Reason, loop.HookHold) {
		t += ": " + l.Reason // a before_run hook failed: which, and its last line
	}
	return t
}

// deadlineText reads "deadline passed 11:58:00 (2m ago)".
func deadlineText(deadline, now time.Time) string {
	return "deadline passed " + clock(deadline, now) + " (" + Wait(now.Sub(deadline)) + " ago)"
}

func rateLimitedText(remaining time.Duration) string { return "rate limited for " + Wait(remaining) }

func globalCapText(used, limit int) string { return fmt.Sprintf("global cap %d/%d", used, limit) }

func typeCapText(typ string, used, limit int) string {
	return fmt.Sprintf("type cap %s %d/%d", typ, used, limit)
}

func tierCapText(tier, used int) string { return fmt.Sprintf("tier %d cap %d/%d", tier, used, tier) }

func quotaText(owner string, used, limit int) string {
	return fmt.Sprintf("quota %s %d/%d", owner, used, limit)
}

// conflictText reads "conflict git/repo1: held by a1 (running)".
func conflictText(group, key, holder string, running bool) string {
	state := "starting"
	if running {
		state = "running"
	}
	return "conflict " + group + "/" + key + ": held by " + holder + " (" + state + ")"
}

func clock(t, now time.Time) string {
	t = t.In(now.Location())
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	if t.Year() == now.Year() {
		return t.Format("Jan 2 15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// Wait formats a duration the way reason texts and the TUI show waits, with
// at most two units, rounded up so that a wait that has not ended never reads
// shorter than it is: "12s", "2m10s", "1h5m", "2d3h". Negative durations
// format as "0s".
func Wait(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	secs := int64(d / time.Second)
	if d%time.Second != 0 {
		secs++
	}
	ceilDiv := func(a, b int64) int64 { return (a + b - 1) / b }
	switch {
	case secs < 60:
		return fmt.Sprintf("%ds", secs)
	case secs < 3600:
		return unit2(secs/60, "m", secs%60, "s")
	case ceilDiv(secs, 60) < 24*60:
		mins := ceilDiv(secs, 60)
		return unit2(mins/60, "h", mins%60, "m")
	}
	hours := ceilDiv(secs, 3600)
	return unit2(hours/24, "d", hours%24, "h")
}

func unit2(a int64, ua string, b int64, ub string) string {
	if b == 0 {
		return fmt.Sprintf("%d%s", a, ua)
	}
	return fmt.Sprintf("%d%s%d%s", a, ua, b, ub)
}
