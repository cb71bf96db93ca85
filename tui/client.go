package tui

import (
	"context"
	"io"
	"os/exec"
	"time"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/scheduler"
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
	// Diff returns what loop id's work changes (the diff view, d).
	Diff(ctx context.Context, id string) (api.Diff, error)
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
	// Policy is the scheduling policy of the workspace (control.Policy of
	// its configuration): the dashboard runs scheduler.Plan with it to show
	// live priorities, the scheduling order and why each waiting loop does
	// not start. The caps the daemon reports win over its MaxLoops and
	// TypeCap. The zero value means scheduler.DefaultPolicy().
	Policy scheduler.Policy
	// Notify receives the terminal notifications (a bell, OSC 9 and OSC
	// 777) sent when a loop needs you, is parked (failed) or a plan's tree
	// is done; nil sends none. Run sets it to the terminal.
	Notify io.Writer
	// DoneHint, when set, replaces the status line once loops exist and
	// none is pending, paused, running or awaiting approval (the demo uses
	// it to say how to see its summary).
	DoneHint string
	// ReportInterrupt makes Run return ErrInterrupted when the user quits
	// with ctrl+c (or ctx ends) rather than q: `loopr demo` then stops its
	// run and exits 130, where `loopr tui` treats both alike.
	ReportInterrupt bool
	// ReadArtifact returns the text of loop l's accepted artifact
	// (l.Artifact) for the artifact view (v). It runs in a command, off the
	// update loop. nil: the view says it cannot read artifacts.
	ReadArtifact func(ctx context.Context, l loop.Loop) (string, error)
	// Comment sends a line comment on path:line (the new version's line)
	// to loop id, from the diff view (c). It runs in a command, off the
	// update loop. nil: the view says to use `loopr comment`.
	Comment func(ctx context.Context, id, path string, line int, text string) error
	// Attach returns the command that takes loop id over by hand
	// (`loopr attach ID`): the dashboard suspends while it runs on the
	// terminal (T). nil: the key says it is not available.
	Attach func(id string) *exec.Cmd
	// Preset names the preset of loop l's agent profile (claude, codex,
	// gemini, opencode), for the output pane to render its structured
	// output. nil or "": the pane goes by the output's first events.
	Preset func(l loop.Loop) string
}
