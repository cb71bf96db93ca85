package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/loopr-dev/loopr/control"
	"github.com/loopr-dev/loopr/internal/safefile"
	"github.com/loopr-dev/loopr/loop"
	"github.com/loopr-dev/loopr/runner"
	"github.com/loopr-dev/loopr/store"
)

// logPoll is how often a followed agent log is checked for more output.
const logPoll = 100 * time.Millisecond

// IterationLog returns the agent.log of loop id's iteration n, or when n
// is 0 of its latest iteration that has one, with that iteration's
// number; "" and 0 when there is none.
func IterationLog(home, id string, n int) (string, int) {
	if n > 0 {
		p := filepath.Join(runner.IterationDir(home, id, n), "agent.log")
		if _, err := os.Lstat(p); err != nil {
			return "", 0
		}
		return p, n
	}
	p := agentLog(home, id, 0)
	if p == "" {
		return "", 0
	}
	k, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
	return p, k
}

// agentLogRoute serves GET /v1/loops/{id}/log?iteration=N&follow=1: the
// whole agent.log of iteration N (default: the latest that has one) as
// text/plain, its number in X-Loopr-Iteration. With follow the response
// goes on while the agent writes and ends when that iteration does (the
// loop leaves running or moves to another iteration), when the daemon
// stops or the client leaves; a loop that has not run yet is waited for.
func (d *daemon) agentLogRoute(w http.ResponseWriter, r *http.Request) error {
	n, follow, err := logQuery(r.URL.Query())
	if err != nil {
		return err
	}
	id, err := loopID(r)
	if err != nil {
		return err
	}
	l, err := d.svc.Get(id)
	if err != nil {
		return err
	}
	if n > l.Iteration {
		return control.Invalid("iteration", "loop %s has had %d iteration(s); there is no iteration %d", id, l.Iteration, n)
	}
	// On a worker of several, the iteration asked for (or the latest) may
	// have run on another machine: its log is there, and what this home
	// holds is at most an earlier or cut-short run.
	if elsewhere := d.ranElsewhere(id, n); elsewhere != "" {
		return control.Invalid("iteration", "%s", elsewhere)
	}
	path, it := IterationLog(d.paths.Home, id, n)
	d.streams.Add(1)
	defer d.streams.Done()
	if path == "" && follow && n == 0 {
		var gone bool
		if path, it, gone, err = d.waitFirstLog(r, l); err != nil || gone {
			return err
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Loopr-Iteration", strconv.Itoa(it))
	if path == "" {
		w.WriteHeader(http.StatusOK) // never ran: no output, not an error
		return nil
	}
	// Only a regular file is read: the agent could have replaced its log
	// with a FIFO or a link to /proc/self/environ.
	f, err := safefile.Open(path)
	var nr *safefile.NotRegularError
	if errors.As(err, &nr) {
		return control.Invalid("output", "%v; loopr shows only a log it wrote", err)
	}
	if err != nil {
		return fmt.Errorf("agent log: %w", err)
	}
	defer f.Close()
	w.Header().Set("X-Loopr-Log", path)
	w.WriteHeader(http.StatusOK)
	d.streamLog(w, r, f, id, it, follow)
	return nil
}

// logQuery reads ?iteration=N (0: the latest) and ?follow=1.
func logQuery(q url.Values) (n int, follow bool, err error) {
	if err := checkQuery(q, "iteration", "follow"); err != nil {
		return 0, false, err
	}
	if s := q.Get("iteration"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			return 0, false, control.Invalid("iteration", "want a positive integer, got %q", s)
		}
		n = v
	}
	switch s := q.Get("follow"); s {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		return 0, false, control.Invalid("follow", "want 1 or 0, got %q", s)
	}
	return n, follow, nil
}

// waitFirstLog waits, for a follower of a loop that has not run yet, until
// its first log exists, the loop ends or waits for a person, the request
// or the daemon ends (gone: nothing more to send); "" when there is none.
func (d *daemon) waitFirstLog(r *http.Request, l loop.Loop) (path string, it int, gone bool, err error) {
	for path == "" && !l.Status.Terminal() && !l.Status.AwaitsPerson() {
		select {
		case <-r.Context().Done():
			return "", 0, true, nil
		case <-d.hub.done:
			return "", 0, true, nil
		case <-time.After(logPoll):
		}
		if l, err = d.svc.Get(l.ID); err != nil {
			return "", 0, false, err
		}
		if elsewhere := d.ranElsewhere(l.ID, 0); elsewhere != "" {
			return "", 0, false, control.Invalid("iteration", "%s", elsewhere) // it started on another worker
		}
		path, it = IterationLog(d.paths.Home, l.ID, 0)
	}
	return path, it, false, nil
}

// streamLog copies f to w; following, it goes on copying what is appended
// while iteration it of loop id runs.
func (d *daemon) streamLog(w http.ResponseWriter, r *http.Request, f io.Reader, id string, it int, follow bool) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	copyAll := func() error {
		for {
			k, rerr := f.Read(buf)
			if k > 0 {
				if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
					return err
				}
				if _, err := w.Write(buf[:k]); err != nil {
					return err
				}
			}
			if errors.Is(rerr, io.EOF) {
				return rc.Flush()
			}
			if rerr != nil {
				return rerr
			}
		}
	}
	for {
		if err := copyAll(); err != nil {
			d.log.Debug("agent log stream ended", "loop", id, "err", err)
			return
		}
		if !follow {
			return
		}
		cur, err := d.svc.Get(id)
		if err != nil || cur.Status != loop.Running || cur.Iteration != it {
			copyAll() // what was written before the iteration ended
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-d.hub.done:
			copyAll()
			return
		case <-time.After(logPoll):
		}
	}
}

// ranElsewhere says, on a worker of an etcd store, where loop id's
// iteration n (0: its latest) last started when that was another worker:
// its log stays in that worker's home. "" when it started here, never
// started, or the store is the bbolt file.
func (d *daemon) ranElsewhere(id string, n int) string {
	if d.worker == nil {
		return ""
	}
	var evs []loop.Event
	if err := d.store.View(func(tx *store.Tx) error {
		var err error
		evs, err = tx.Events(id)
		return err
	}); err != nil {
		return ""
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Kind != loop.EventTransition || e.To != loop.Running || (n > 0 && e.Iteration != n) {
			continue
		}
		_, after, ok := strings.Cut(e.Message, " started on worker ")
		if !ok {
			return ""
		}
		name, _, _ := strings.Cut(after, " ")
		if name == d.worker.Name() {
			return ""
		}
		return fmt.Sprintf("iteration %d of loop %s ran on worker %s: its agent log is in that worker's home; run loopr logs %s on that machine", e.Iteration, id, name, id)
	}
	return ""
}
