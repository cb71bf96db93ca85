package tui

import (
	"context"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// Client is what the dashboard needs from the daemon. The client package
// implements it over the daemon's socket; tests use a hand-written fake.
type Client interface {
	// Events subscribes to the daemon's event stream. The first message is
	// an api.StreamSnapshot (Loops and Status); then come api.StreamEvent
	// (Event and the Loop after it), api.StreamStatus and
	// api.StreamHeartbeat. The channel closes when the connection drops or
	// ctx ends.
	Events(ctx context.Context) (<-chan api.StreamMsg, error)
	// Act performs an action (api.ActionCancel … api.ActionIterate) on loop id.
	Act(ctx context.Context, id, action string, req api.ActionRequest) (api.ActionResult, error)
	// Why explains loop id's priority and every scheduling gate at now.
	Why(ctx context.Context, id string, now time.Time) (api.Why, error)
	// Output returns at most maxBytes of the end of the agent log of loop
	// id's current iteration.
	Output(ctx context.Context, id string, maxBytes int) (string, error)
}

// PolicyView is the part of the scheduling policy the dashboard needs to
// compute priorities and the first blocking reason locally, so that they tick
// live without a request per loop (SPEC §4). The daemon's why stays the
// authority; this view only has to agree with it for display.
type PolicyView struct {
	Base                     map[loop.Type]int // base priority per type; unknown types score 0
	AgeBoostPerMinute        int
	AgeBoostMax              int
	DepthBoostPerLevel       int
	RetryPenaltyPerIteration int
	RetryPenaltyMax          int
	MaxLoops                 int               // global cap (api.Status.MaxLoops wins when the daemon reports it)
	TypeCap                  map[loop.Type]int // running cap per type (api.Status.Types wins when reported); 0: no cap
}

// DefaultPolicyView returns the SPEC §4 defaults: base plan 40, spec 60,
// phase 80, ralph 100; age 1 per minute up to 50; depth 10 per level; retry
// penalty 5 per iteration up to 30; at most 50 loops, and plan 2, spec 5,
// phase 20, ralph 50 per type.
func DefaultPolicyView() PolicyView {
	return PolicyView{
		Base:                     map[loop.Type]int{loop.Plan: 40, loop.Spec: 60, loop.Phase: 80, loop.Ralph: 100},
		AgeBoostPerMinute:        1,
		AgeBoostMax:              50,
		DepthBoostPerLevel:       10,
		RetryPenaltyPerIteration: 5,
		RetryPenaltyMax:          30,
		MaxLoops:                 50,
		TypeCap:                  map[loop.Type]int{loop.Plan: 2, loop.Spec: 5, loop.Phase: 20, loop.Ralph: 50},
	}
}

// scoreParts is a loop's priority and its parts, as SPEC §4 defines them.
type scoreParts struct {
	Priority, Base, AgeMinutes, AgeBoost, Depth, DepthBoost, RetryPenalty int
}

// score computes l's priority at now:
//
//	base(type) + min(age_minutes·age_boost, age_max) + depth·depth_boost − min(max(iter−1, 0)·penalty, penalty_max)
//
// where age_minutes is whole minutes since created_at and depth is l.Depth.
func (p PolicyView) score(l *loop.Loop, now time.Time) scoreParts {
	s := scoreParts{Base: p.Base[l.Type], Depth: max(l.Depth, 0)}
	if age := now.Sub(l.CreatedAt); age > 0 {
		s.AgeMinutes = int(age / time.Minute)
	}
	s.AgeBoost = min(s.AgeMinutes*p.AgeBoostPerMinute, p.AgeBoostMax)
	s.DepthBoost = s.Depth * p.DepthBoostPerLevel
	s.RetryPenalty = min(max(l.Iteration-1, 0)*p.RetryPenaltyPerIteration, p.RetryPenaltyMax)
	s.Priority = s.Base + s.AgeBoost + s.DepthBoost - s.RetryPenalty
	return s
}

// Options configures the dashboard.
type Options struct {
	// Client is the connected daemon client. It may be nil when Dial is set:
	// the model then dials first.
	Client Client
	// Dial connects again after the event stream drops. When nil the model
	// retries Events on Client.
	Dial func(ctx context.Context) (Client, error)
	// Workspace is shown in the header (the home directory shortens to ~).
	Workspace string
	// Now is the clock; nil means time.Now. Tests fix it.
	Now func() time.Time
	// NoColor drops colours (NO_COLOR); icons and words still carry every meaning.
	NoColor bool
	// Version is the CLI's version, shown in the help overlay.
	Version string
	// Policy holds the weights and caps for live priorities; the zero value
	// means DefaultPolicyView().
	Policy PolicyView
	// DoneHint, when set, replaces the status line once loops exist and
	// none is pending, paused, running or awaiting approval (the demo uses
	// it to say how to see its summary).
	DoneHint string
}
