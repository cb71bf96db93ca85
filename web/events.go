package web

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/loop"
)

// events relays the daemon's event stream to the browser as Server-Sent
// Events carrying HTML the server rendered (app.js swaps it in):
//
//	tree    the whole tree (on connect, and when a loop appears or goes)
//	row     one loop's row, by its id (the loop changed)
//	counts  the header's counts
//	inbox   the NEEDS YOU section, when what it holds changed
//
// The stream ends with the daemon's; EventSource reconnects by itself.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	ctx := r.Context()
	dctx, cancel := context.WithTimeout(ctx, callTimeout)
	be, err := s.backend(dctx)
	cancel()
	if err != nil {
		s.fail(w, http.StatusBadGateway, err.Error())
		return
	}
	ch, err := be.Events(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	st := stream{s: s, be: be, w: w, loops: map[string]loop.Loop{}}
	for {
		select {
		case <-ctx.Done(): // the browser left
			return
		case m, ok := <-ch:
			if !ok {
				return // the daemon's stream ended
			}
			if err := st.handle(ctx, m); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// stream is one browser's event stream: the loops it has shown.
type stream struct {
	s      *Server
	be     Backend
	w      http.ResponseWriter
	loops  map[string]loop.Loop
	counts counts
	inbox  string // inbox.key() last sent
}

func (st *stream) handle(ctx context.Context, m api.StreamMsg) error {
	switch m.Type {
	case "snapshot":
		clear(st.loops)
		for _, l := range m.Loops {
			st.loops[l.ID] = l
		}
		if err := st.sendTree(ctx); err != nil {
			return err
		}
	case "event":
		if m.Loop != nil {
			_, seen := st.loops[m.Loop.ID]
			st.loops[m.Loop.ID] = *m.Loop
			if !seen {
				return st.sendTree(ctx)
			}
			r := rowOf(*m.Loop, st.s.priorities(ctx, st.be))
			return st.send("row", "frag-row", r)
		}
		if m.Event != nil && m.Event.Loop != "" {
			if _, seen := st.loops[m.Event.Loop]; seen { // deleted
				delete(st.loops, m.Event.Loop)
				return st.sendTree(ctx)
			}
		}
	case "heartbeat":
		_, err := st.w.Write([]byte(": heartbeat\n\n"))
		return err
	}
	if m.Status != nil {
		if c := countsOf(*m.Status); c != st.counts {
			st.counts = c
			if err := st.send("counts", "frag-counts", c); err != nil {
				return err
			}
		}
		if b := inboxOf(*m.Status); b.key() != st.inbox {
			st.inbox = b.key()
			return st.send("inbox", "frag-inbox", b)
		}
	}
	return nil
}

func (st *stream) sendTree(ctx context.Context) error {
	all := make([]loop.Loop, 0, len(st.loops))
	for _, l := range st.loops {
		all = append(all, l)
	}
	rows, more := treeRows(all, st.s.o.Now(), st.s.priorities(ctx, st.be))
	return st.send("tree", "frag-tree", indexView{Rows: rows, More: more})
}

// send writes one event: the fragment tmpl rendered with data, each of
// its lines a data: line. EventSource ends a line at CR as at LF, so a
// CR (html/template leaves it, in a title say) becomes a line break too
// (the same to HTML), never a line that is not data:.
func (st *stream) send(event, tmpl string, data any) error {
	var b bytes.Buffer
	if err := st.s.frags.ExecuteTemplate(&b, tmpl, data); err != nil {
		st.s.o.Log.Warn("web: render", "fragment", tmpl, "err", err)
		return nil
	}
	var out strings.Builder
	out.WriteString("event: " + event + "\n")
	html := strings.ReplaceAll(strings.ReplaceAll(b.String(), "\r\n", "\n"), "\r", "\n")
	for line := range strings.SplitSeq(strings.TrimSpace(html), "\n") {
		out.WriteString("data: " + line + "\n")
	}
	out.WriteString("\n")
	_, err := st.w.Write([]byte(out.String()))
	return err
}
