package daemon

import (
	"bufio"
	"github.com/go-json-experiment/json/v1"
	"net/http"
	"strconv"

	"github.com/loopr-dev/loopr/api"
	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/loop"
)

// journal serves GET /v1/journal?loop=ID&after=SEQ&until=SEQ: the events
// of the journal in order as JSON Lines of api.JournalEntry — all of them,
// or those of one loop, after and up to the given sequence numbers. (The
// live stream is GET /v1/events; this is the history `loopr events`
// prints first.)
func (d *daemon) journalRoute(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "loop", "after", "until"); err != nil {
		return err
	}
	id := q.Get("loop")
	if id != "" && !loop.ValidID(id) {
		return control.Invalid("loop", "%q is not a loop id (1-64 characters of A-Z a-z 0-9 _ -)", id)
	}
	seq := func(name string) (uint64, error) {
		s := q.Get(name)
		if s == "" {
			return 0, nil
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, control.Invalid(name, "want a sequence number, got %q", s)
		}
		return v, nil
	}
	after, err := seq("after")
	if err != nil {
		return err
	}
	until, err := seq("until")
	if err != nil {
		return err
	}
	if id != "" {
		if _, err := d.svc.Get(id); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/jsonl")
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	enc := json.NewEncoder(bw)
	err = d.svc.Journal(id, after, until, func(e api.JournalEntry) error { return enc.Encode(e) })
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && cw.n > 0 {
		d.log.Error("journal", "err", err)
		panic(http.ErrAbortHandler) // a cut-off journal must not look complete
	}
	return err
}
