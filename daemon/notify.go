package daemon

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/config"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/redact"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// notifyQueue bounds the notifications waiting for notify.command; beyond
// it new ones are dropped (logged): a slow command never holds up the
// journal, the manager or the API.
const notifyQueue = 64

// note is one event a person should hear about: a loop that needs them,
// a parked (failed) loop, or a plan whose whole tree is done.
type note struct {
	Event  string // needs_human, awaiting_review, failed, tree_complete
	Loop   string
	Title  string
	Reason string // one line
	Action string // the command that acts on it
}

// noteFor returns the note ev is, reading its loop in tx; ok is false for
// every other event.
func noteFor(tx *store.Tx, ev loop.Event) (n note, ok bool) {
	var name string
	switch {
	case ev.Kind == loop.EventTransition && ev.To == loop.NeedsHuman:
		name = string(loop.NeedsHuman)
	case ev.Kind == loop.EventTransition && ev.To == loop.AwaitingReview:
		name = string(loop.AwaitingReview)
	case ev.Kind == loop.EventTransition && ev.To == loop.Failed:
		name = string(loop.Failed)
	case ev.Kind == loop.EventTreeComplete:
		name = "tree_complete"
	default:
		return n, false
	}
	l, err := tx.Get(ev.Loop)
	if err != nil {
		return n, false // gone (gc)
	}
	n = note{Event: name, Loop: l.ID, Title: l.Title, Action: actionFor(name, l)}
	switch name {
	case string(loop.NeedsHuman):
		n.Reason = ev.Message
		if l.Needs != nil {
			first, _, _ := strings.Cut(l.Needs.Detail, "\n")
			n.Reason = string(l.Needs.Reason) + ": " + first
		}
	case string(loop.Failed):
		n.Reason = l.Reason
	default:
		n.Reason = ev.Message
	}
	n.Reason = clipOne(n.Reason, 300)
	return n, true
}

// actionFor is the command a person runs to act on event name of l.
func actionFor(name string, l loop.Loop) string {
	switch name {
	case string(loop.NeedsHuman):
		return l.NeedsAction()
	case string(loop.Failed):
		return "loopr reset " + l.ID
	case string(loop.AwaitingReview):
		return "loopr approve " + l.ID
	case "tree_complete":
		return "loopr land " + l.ID
	}
	return ""
}

func clipOne(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// notifier runs notify.command once per note, one at a time, each for at
// most config.NotifyTimeout. It follows the journal from the daemon's start.
type notifier struct {
	d       *daemon
	queue   chan note
	timeout time.Duration // config.NotifyTimeout; tests shorten it
}

func newNotifier(d *daemon) *notifier {
	return &notifier{d: d, queue: make(chan note, notifyQueue), timeout: config.NotifyTimeout}
}

func (n *notifier) run(ctx context.Context, from uint64) {
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return // the daemon stops: what is queued is dropped
			case nt := <-n.queue:
				n.exec(ctx, nt)
			}
		}
	}()
	n.d.tail(ctx, "notify", from, func(tx *store.Tx, evs []loop.Event) {
		if len(n.d.config().Notify.Command) == 0 || n.d.svc.Untrusted() != "" {
			return // none, or the file's, not trusted: nothing is run
		}
		for _, ev := range evs {
			nt, ok := noteFor(tx, ev)
			if !ok {
				continue
			}
			select {
			case n.queue <- nt:
			default:
				n.d.log.Warn("notify: queue full, notification dropped", "event", nt.Event, "loop", nt.Loop)
			}
		}
	})
	close(stop)
	<-done // at most the command in flight: config.NotifyTimeout
}

// exec runs the command for nt as an agent is run (runner.RunCommand): in
// its own process group and, where the daemon has them, its own cgroup;
// after n.timeout it is stopped, and when it ends, what it started ends
// with it (a notifier that forks into the background is no exception).
func (n *notifier) exec(ctx context.Context, nt note) {
	argv := n.d.config().Notify.Command
	if len(argv) == 0 {
		return
	}
	home := n.d.paths.Home
	nt = nt.redacted(n.d.redact)
	// The user's whole environment, not an agent's allowlist (package
	// procenv): a notifier talks to their desktop (DISPLAY, DBUS_…) or
	// their chat (a token they exported for it), and runs nothing an
	// agent wrote.
	env := append(os.Environ(), "LOOPR_HOME="+home,
		"LOOPR_EVENT="+nt.Event, "LOOPR_LOOP_ID="+nt.Loop, "LOOPR_TITLE="+nt.Title,
		"LOOPR_REASON="+nt.Reason, "LOOPR_ACTION="+nt.Action)
	var out headWriter
	err := runner.RunCommand(ctx, runner.Command{Argv: argv, Dir: n.d.paths.Workspace, Env: env,
		Timeout: n.timeout, Grace: time.Second, Jail: n.d.jail, Name: "notify", Home: home, Loop: nt.Loop}, &out)
	if err != nil {
		n.d.log.Warn("notify: command failed", "event", nt.Event, "loop", nt.Loop, "err", err,
			"output", clipOne(string(out.b), 200))
		return
	}
	n.d.log.Info("notify: sent", "event", nt.Event, "loop", nt.Loop)
}

// redacted is nt with its text redacted: the values notify.command gets
// leave the machine (a chat message, a mail).
func (nt note) redacted(r *redact.Redactor) note {
	nt.Title, nt.Reason, nt.Action = r.String(nt.Title), r.String(nt.Reason), r.String(nt.Action)
	return nt
}

// headWriter keeps the first 4 KiB written to it: what a failed notify
// command said, for the log.
type headWriter struct{ b []byte }

func (h *headWriter) Write(p []byte) (int, error) {
	if room := 4<<10 - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}
