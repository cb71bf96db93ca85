package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/redact"
)

// useRedactor puts the daemon's one Redactor (d.redact, which the runner
// and the manager also hold) at the sinks the daemon owns:
//   - the store: every loop record and journal event written from now on
//     (store.SetRedact), whoever writes it — the manager's results, hooks'
//     and merge.validate's summaries, the API's answers and comments;
//   - the daemon's log: every message and attribute (redactingLog).
//
// Webhook bodies, notify.command's LOOPR_* values and the event stream are
// redacted again as they are sent (redactLoop), for records a daemon
// without redaction stored.
func (d *daemon) useRedactor() {
	d.store.SetRedact(d.redact.String)
	if h, ok := d.log.Handler().(*redactHandler); ok {
		h.r.Store(d.redact)
	}
}

// redactLoop is l as the daemon sends it (a webhook body, the event
// stream).
func (d *daemon) redactLoop(l loop.Loop) loop.Loop { return l.MapText(d.redact.String) }

// redactingLog returns a logger that writes to l's handler with every
// message and attribute redacted: token shapes from the start, and the
// secrets of the Redactor that useRedactor sets from then on.
func redactingLog(l *slog.Logger) *slog.Logger {
	return slog.New(&redactHandler{h: l.Handler(), r: new(atomic.Pointer[redact.Redactor])})
}

// redactHandler is a slog.Handler that redacts before its inner handler
// formats. The Redactor is shared by the handlers WithAttrs and WithGroup
// derive, so one set later reaches the loggers made before.
type redactHandler struct {
	h slog.Handler
	r *atomic.Pointer[redact.Redactor] // nil inside: token shapes only
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	r := h.r.Load()
	out := slog.NewRecord(rec.Time, rec.Level, r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(r, a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	r := h.r.Load()
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(r, a)
	}
	return &redactHandler{h: h.h.WithAttrs(red), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{h: h.h.WithGroup(name), r: h.r}
}

// redactAttr redacts a's value: a string, an error or anything else that
// prints with text in it (a value whose printed form holds nothing to
// redact keeps its kind), and the attributes of a group.
func redactAttr(r *redact.Redactor, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = redactAttr(r, ga)
		}
		a.Value = slog.GroupValue(red...)
	case slog.KindAny:
		s := fmt.Sprint(v.Any())
		if rs := r.String(s); rs != s {
			a.Value = slog.StringValue(rs)
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
